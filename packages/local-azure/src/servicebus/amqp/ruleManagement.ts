import { types } from 'rhea';

import type { Subscription } from '../broker';
import { type CorrelationFilter, correlationFilter, type Rule, type RuleFilter, sqlFilter } from '../rules';
import { CONDITIONS, PeerError } from './errors';
import { decodeApplicationProperties } from './messageCodec';
import type { ManagementRequest, ManagementResponse } from './requestResponse';

/**
 * A subscription's rules over its $management node, as the rule manager
 * (`ServiceBusClient.createRuleManager`) and the .NET ServiceBusRuleManager use them:
 *   com.microsoft:add-rule          rule-name, rule-description { sql-filter | correlation-filter }
 *   com.microsoft:remove-rule       rule-name
 *   com.microsoft:enumerate-rules   top, skip → rules: [{ rule-description }] (described types)
 * A rule action (sql-rule-action) is refused: the local peer does not run actions.
 */
export const RULE_OPERATIONS = {
  add: 'com.microsoft:add-rule',
  remove: 'com.microsoft:remove-rule',
  enumerate: 'com.microsoft:enumerate-rules',
} as const;

export function isRuleOperation(operation: string | undefined): boolean {
  return Object.values<string | undefined>(RULE_OPERATIONS).includes(operation);
}

/** The AMQP descriptors of Service Bus's rule types (Microsoft.Azure.Amqp's, as @azure/core-amqp lists them). */
const DESCRIPTORS = {
  ruleDescription: 0x13700000004,
  emptyRuleAction: 0x13700000005,
  sqlFilter: 0x1370000006,
  trueFilter: 0x1370000007,
  falseFilter: 0x1370000008,
  correlationFilter: 0x1370000009,
} as const;

/** A correlation filter's fields on the wire, and the model's names for them. */
const CORRELATION_FIELDS = {
  'correlation-id': 'correlationId',
  'message-id': 'messageId',
  to: 'to',
  'reply-to': 'replyTo',
  label: 'subject',
  'session-id': 'sessionId',
  'reply-to-session-id': 'replyToSessionId',
  'content-type': 'contentType',
} as const satisfies Record<string, Exclude<keyof CorrelationFilter, 'applicationProperties'>>;

/** The SQL filters' compatibility level, as Service Bus reports it. */
const SQL_COMPATIBILITY_LEVEL = 20;

export function handleRuleRequest(
  subscription: Subscription,
  request: ManagementRequest,
): ManagementResponse {
  switch (request.operation) {
    case RULE_OPERATIONS.add:
      subscription.addRule(ruleName(request.body), filterOf(request.body['rule-description']));
      return { statusCode: 200 };
    case RULE_OPERATIONS.remove:
      subscription.removeRule(ruleName(request.body));
      return { statusCode: 200 };
    default: {
      const skip = count(request.body.skip, 'skip');
      const top = count(request.body.top, 'top');
      const rules = subscription.rules.slice(skip, skip + top);
      // No rule is 204, which the SDK reads as an empty list.
      if (rules.length === 0) return { statusCode: 204 };
      return {
        statusCode: 200,
        body: { rules: rules.map((rule) => ({ 'rule-description': describe(rule) })) },
      };
    }
  }
}

function ruleName(body: Record<string, unknown>): string {
  const name = body['rule-name'];
  if (typeof name !== 'string') throw new PeerError(CONDITIONS.invalidField, 'rule-name must be a string.');
  return name;
}

function count(value: unknown, field: string): number {
  if (value === undefined) return field === 'skip' ? 0 : Number.MAX_SAFE_INTEGER;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
    throw new PeerError(CONDITIONS.invalidField, `${field} must be a non-negative integer.`);
  return value;
}

function filterOf(description: unknown): RuleFilter {
  if (typeof description !== 'object' || description === null)
    throw new PeerError(CONDITIONS.invalidField, 'rule-description must be a map.');
  const fields = description as Record<string, unknown>;
  if (fields['sql-rule-action'] !== undefined && fields['sql-rule-action'] !== null)
    throw new PeerError(
      CONDITIONS.notImplemented,
      'The local peer does not run rule actions (sql-rule-action): add the rule without one.',
    );
  const sql = fields['sql-filter'];
  if (typeof sql === 'object' && sql !== null) return sqlFilter((sql as Record<string, unknown>).expression);
  const correlation = fields['correlation-filter'];
  if (typeof correlation === 'object' && correlation !== null) {
    const wire = correlation as Record<string, unknown>;
    const filter: CorrelationFilter = {};
    for (const [field, key] of Object.entries(CORRELATION_FIELDS)) {
      const value = wire[field];
      if (value === undefined || value === null) continue;
      if (typeof value !== 'string')
        throw new PeerError(CONDITIONS.invalidField, `correlation-filter ${field} must be a string.`);
      filter[key] = value;
    }
    if (wire.properties !== undefined && wire.properties !== null)
      filter.applicationProperties = decodeApplicationProperties(wire.properties);
    return correlationFilter(filter);
  }
  throw new PeerError(
    CONDITIONS.invalidField,
    'rule-description must carry a sql-filter or a correlation-filter.',
  );
}

/** A rule as Service Bus describes it: [filter, action, name, created-at], each a described list. */
function describe(rule: Rule): unknown {
  return types.wrap_described(
    [
      describeFilter(rule.filter),
      types.wrap_described([], DESCRIPTORS.emptyRuleAction),
      types.wrap_string(rule.name),
      types.wrap_timestamp(rule.createdAt),
    ],
    DESCRIPTORS.ruleDescription,
  );
}

function describeFilter(filter: RuleFilter): unknown {
  switch (filter.kind) {
    case 'true':
      return types.wrap_described([], DESCRIPTORS.trueFilter);
    case 'false':
      return types.wrap_described([], DESCRIPTORS.falseFilter);
    case 'sql':
      return types.wrap_described(
        [types.wrap_string(filter.expression), types.wrap_int(SQL_COMPATIBILITY_LEVEL)],
        DESCRIPTORS.sqlFilter,
      );
    default: {
      const text = (value: string | undefined): unknown =>
        value === undefined ? null : types.wrap_string(value);
      return types.wrap_described(
        [
          text(filter.correlationId),
          text(filter.messageId),
          text(filter.to),
          text(filter.replyTo),
          text(filter.subject),
          text(filter.sessionId),
          text(filter.replyToSessionId),
          text(filter.contentType),
          types.wrap_map(filter.applicationProperties ?? {}),
        ],
        DESCRIPTORS.correlationFilter,
      );
    }
  }
}
