import type { ApplicationProperties } from '../broker';
import {
  type CorrelationFilter,
  correlationFilter,
  type Rule,
  RuleError,
  type RuleFilter,
  sqlFilter,
} from '../rules';
import { DescriptionError, SERVICEBUS_NAMESPACE } from './descriptions';
import { childOf, escapeXml, textOf, type XmlElement } from './xml';

/**
 * RuleDescription, the ATOM form of a subscription's rule (rules.ts holds the model): a Filter
 * (SqlFilter, CorrelationFilter, TrueFilter, FalseFilter) and an Action, which must be empty (the
 * model evaluates no rule actions, and refuses them rather than ignore them).
 */
const CORRELATION_ELEMENTS: ReadonlyArray<
  readonly [string, keyof Omit<CorrelationFilter, 'applicationProperties'>]
> = [
  ['CorrelationId', 'correlationId'],
  ['MessageId', 'messageId'],
  ['To', 'to'],
  ['ReplyTo', 'replyTo'],
  ['Label', 'subject'],
  ['SessionId', 'sessionId'],
  ['ReplyToSessionId', 'replyToSessionId'],
  ['ContentType', 'contentType'],
];
const XML_SCHEMA = 'http://www.w3.org/2001/XMLSchema';

/** The filter of a RuleDescription (or a subscription's DefaultRuleDescription); a DescriptionError when the model cannot take it. */
export function readRuleFilter(description: XmlElement): RuleFilter {
  const action = childOf(description, 'Action');
  const actionType = action && typeOf(action);
  if (action && actionType !== undefined && actionType !== 'EmptyRuleAction')
    throw new DescriptionError(`The local peer does not evaluate rule actions (${actionType.slice(0, 40)}).`);
  const filter = childOf(description, 'Filter');
  if (!filter) return { kind: 'true' };
  try {
    switch (typeOf(filter)) {
      case 'TrueFilter':
        return { kind: 'true' };
      case 'FalseFilter':
        return { kind: 'false' };
      case 'SqlFilter':
        if (childOf(filter, 'Parameters')?.children.length)
          throw new DescriptionError('The local peer does not evaluate SQL filter parameters.');
        return sqlFilter(textOf(filter, 'SqlExpression'));
      case 'CorrelationFilter':
        return correlationFilter(readCorrelation(filter));
      default:
        throw new DescriptionError(
          'The rule filter is not a SqlFilter, CorrelationFilter, TrueFilter or FalseFilter.',
        );
    }
  } catch (error) {
    if (error instanceof RuleError) throw new DescriptionError(error.message);
    throw error;
  }
}

function readCorrelation(filter: XmlElement): CorrelationFilter {
  const correlation: CorrelationFilter = {};
  for (const [element, key] of CORRELATION_ELEMENTS) {
    const value = textOf(filter, element);
    if (value !== undefined && value !== '') correlation[key] = value;
  }
  const properties: ApplicationProperties = {};
  for (const pair of childOf(filter, 'Properties')?.children ?? []) {
    const key = textOf(pair, 'Key');
    const value = childOf(pair, 'Value');
    if (key === undefined || !value)
      throw new DescriptionError('A correlation filter property lacks its Key or Value.');
    properties[key] = typedValue(value);
  }
  if (Object.keys(properties).length > 0) correlation.applicationProperties = properties;
  return correlation;
}

function typedValue(value: XmlElement): string | number | boolean | Date {
  const text = value.text;
  switch (typeOf(value)) {
    case 'string':
      return text;
    case 'double':
    case 'long':
    case 'int': {
      const number = Number(text);
      if (text.trim() === '' || !Number.isFinite(number))
        throw new DescriptionError('A numeric property value is not a number.');
      return number;
    }
    case 'boolean':
      return text.trim() === 'true';
    case 'dateTime': {
      const date = new Date(text);
      if (Number.isNaN(date.getTime()))
        throw new DescriptionError('A dateTime property value is not a date.');
      return date;
    }
    default:
      throw new DescriptionError('A property value has a type the local peer does not read.');
  }
}

/** The xsi type an element names (`i:type="SqlFilter"`, `p4:type="l28:string"`), without prefixes. */
function typeOf(element: XmlElement): string | undefined {
  const entry = Object.entries(element.attributes).find(
    ([name]) => name === 'type' || name.endsWith(':type'),
  );
  return entry?.[1].slice(entry[1].indexOf(':') + 1);
}

/** The rule as Service Bus writes a RuleDescription (filter, action, creation time, name). */
export function writeRule(rule: Rule, createdAt: Date): string {
  return (
    `<RuleDescription xmlns="${SERVICEBUS_NAMESPACE}" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
    writeFilter(rule.filter) +
    '<Action i:type="EmptyRuleAction"/>' +
    `<CreatedAt>${createdAt.toISOString()}</CreatedAt><Name>${escapeXml(rule.name)}</Name></RuleDescription>`
  );
}

function writeFilter(filter: RuleFilter): string {
  switch (filter.kind) {
    case 'true':
      return '<Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>';
    case 'false':
      return '<Filter i:type="FalseFilter"><SqlExpression>1=0</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>';
    case 'sql':
      return `<Filter i:type="SqlFilter"><SqlExpression>${escapeXml(filter.expression)}</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter>`;
    case 'correlation': {
      const fields = CORRELATION_ELEMENTS.map(([element, key]) =>
        filter[key] === undefined ? '' : `<${element}>${escapeXml(filter[key])}</${element}>`,
      ).join('');
      const properties = Object.entries(filter.applicationProperties ?? {})
        .map(([key, value]) => {
          const [type, text] =
            typeof value === 'string'
              ? ['string', value]
              : typeof value === 'boolean'
                ? ['boolean', String(value)]
                : value instanceof Date
                  ? ['dateTime', value.toISOString()]
                  : [Number.isInteger(value) ? 'int' : 'double', String(value)];
          return (
            `<KeyValueOfstringanyType><Key>${escapeXml(key)}</Key>` +
            `<Value i:type="d6p1:${type}" xmlns:d6p1="${XML_SCHEMA}">${escapeXml(text)}</Value></KeyValueOfstringanyType>`
          );
        })
        .join('');
      return `<Filter i:type="CorrelationFilter">${fields}${properties === '' ? '' : `<Properties>${properties}</Properties>`}</Filter>`;
    }
  }
}
