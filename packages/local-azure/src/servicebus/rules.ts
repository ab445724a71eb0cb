import type { ApplicationProperties, OutgoingMessage } from './broker';

/**
 * A subscription's rules, as Service Bus has them: a message is copied to the subscription when the
 * filter of any one of its rules takes it. A subscription starts with one rule, `$Default`, whose
 * filter is true (it takes everything); the Bicep redefines `$Default` with the subscription's
 * filter (infra/modules/servicebus.bicep: a correlation filter on Subject for one subject, the SQL
 * filter `sys.Label IN (...)` for several, with `OR sys.Label = 'inbox.retry' AND inboxRetryFor =
 * '<name>'` when it declares delayedRetry), and a client adds and removes rules (the rule manager).
 *
 * Filters evaluated here: true (`1=1`), false (`1=0`), correlation filters on every property Service
 * Bus has (all that are set must be equal), and SQL filters of one shape: comparisons of one
 * property with literals (`=`, `<>`, `!=`, `IN (...)`, `NOT IN (...)`) joined by AND and OR, without
 * parentheses. A SQL filter outside it, and any rule action, is refused with a clear error rather
 * than taken and evaluated differently from Service Bus.
 */
export type RuleFilter =
  | { kind: 'true' }
  | { kind: 'false' }
  | ({ kind: 'correlation' } & CorrelationFilter)
  | { kind: 'sql'; expression: string; test: (message: OutgoingMessage) => boolean };

export interface CorrelationFilter {
  correlationId?: string;
  messageId?: string;
  to?: string;
  replyTo?: string;
  subject?: string;
  sessionId?: string;
  replyToSessionId?: string;
  contentType?: string;
  applicationProperties?: ApplicationProperties;
}

export interface Rule {
  readonly name: string;
  readonly filter: RuleFilter;
  /** Model ms. */
  readonly createdAt: number;
}

export const DEFAULT_RULE_NAME = '$Default';

/** Service Bus: a subscription has at most 2,000 rules; a rule name at most 50 characters. */
export const MAX_RULES = 2000;
const MAX_RULE_NAME_LENGTH = 50;
/** Service Bus: a SQL filter's condition is at most 1,024 characters. */
const MAX_SQL_LENGTH = 1024;

export class RuleError extends Error {
  constructor(
    message: string,
    readonly code: 'invalid' | 'exists' | 'not-found' | 'unsupported' | 'quota',
  ) {
    super(message);
    this.name = 'RuleError';
  }
}

export function takes(filter: RuleFilter, message: OutgoingMessage): boolean {
  switch (filter.kind) {
    case 'true':
      return true;
    case 'false':
      return false;
    case 'sql':
      return filter.test(message);
    default:
      return correlates(filter, message);
  }
}

/**
 * How the delayed copies of a message are told apart, as data from the app's library
 * (packages/inbox/src/delayedRetry.ts RETRY_SUBJECT and RETRY_PROPERTIES.for): the subject every
 * copy carries, and the application property that names the subscription it is for.
 */
export interface RetryCopies {
  readonly subject: string;
  readonly forProperty: string;
}

/**
 * The filter the Bicep gives a subscription declared with these subjects: a correlation filter on
 * Subject for one, `sys.Label IN (...)` for several. `retry`, for a subscription that declares
 * delayedRetry, makes it a SQL filter even for one subject, which also takes the delayed copies
 * scheduled for that subscription (`retry.for`, its name) and no other's:
 * `sys.Label IN ('A') OR sys.Label = 'inbox.retry' AND inboxRetryFor = '<name>'` (AND binds
 * tighter than OR, in Service Bus SQL as in sqlFilter below).
 */
export function subjectsFilter(
  subjects: readonly string[],
  retry?: { readonly copies: RetryCopies; readonly for: string },
): RuleFilter {
  if (subjects.length === 1 && retry === undefined) return { kind: 'correlation', subject: subjects[0]! };
  const retries =
    retry === undefined
      ? ''
      : ` OR sys.Label = ${sqlString(retry.copies.subject)} AND ${retry.copies.forProperty} = ${sqlString(retry.for)}`;
  return sqlFilter(`sys.Label IN (${subjects.map(sqlString).join(', ')})${retries}`);
}

/** A SQL string literal: quoted, a quote inside doubled. */
function sqlString(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

export function checkRuleName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_RULE_NAME_LENGTH)
    throw new RuleError(`A rule name is 1 to ${MAX_RULE_NAME_LENGTH} characters.`, 'invalid');
  if (/[/\\?#]/.test(name))
    throw new RuleError(`A rule name cannot contain '/', '\\', '?' or '#'.`, 'invalid');
  return name;
}

const CORRELATION_KEYS = [
  'correlationId',
  'messageId',
  'to',
  'replyTo',
  'subject',
  'sessionId',
  'replyToSessionId',
  'contentType',
] as const;

function correlates(filter: CorrelationFilter, message: OutgoingMessage): boolean {
  for (const key of CORRELATION_KEYS) {
    if (filter[key] !== undefined && filter[key] !== message[key]) return false;
  }
  for (const [name, expected] of Object.entries(filter.applicationProperties ?? {})) {
    if (!sameValue(message.applicationProperties?.[name], expected)) return false;
  }
  return true;
}

export function correlationFilter(filter: CorrelationFilter): RuleFilter {
  const set = CORRELATION_KEYS.filter((key) => filter[key] !== undefined);
  if (set.length === 0 && Object.keys(filter.applicationProperties ?? {}).length === 0)
    throw new RuleError('A correlation filter must set at least one property.', 'invalid');
  return { kind: 'correlation', ...filter };
}

function sameValue(actual: unknown, expected: unknown): boolean {
  if (actual instanceof Date && expected instanceof Date) return actual.getTime() === expected.getTime();
  return actual !== undefined && actual === expected;
}

type Literal = string | number | boolean;
interface Comparison {
  property: (message: OutgoingMessage) => unknown;
  negated: boolean;
  values: Literal[];
}

/** `sys.<name>` in a SQL filter: the system properties the model carries. */
const SYSTEM_PROPERTIES: Record<string, (message: OutgoingMessage) => unknown> = {
  label: (m) => m.subject,
  subject: (m) => m.subject,
  messageid: (m) => m.messageId,
  correlationid: (m) => m.correlationId,
  to: (m) => m.to,
  replyto: (m) => m.replyTo,
  sessionid: (m) => m.sessionId,
  replytosessionid: (m) => m.replyToSessionId,
  contenttype: (m) => m.contentType,
};

/**
 * Parses a SQL filter into a test. Beyond the shape above it refuses (RuleError 'unsupported'),
 * naming what the local peer evaluates. The expression is bounded before it is read, and read with
 * one regular-expression scan per comparison: no recursion over what the client sent.
 */
export function sqlFilter(expression: unknown): RuleFilter {
  if (typeof expression !== 'string' || expression.trim() === '')
    throw new RuleError('A SQL filter needs an expression.', 'invalid');
  if (expression.length > MAX_SQL_LENGTH)
    throw new RuleError(`A SQL filter's expression is at most ${MAX_SQL_LENGTH} characters.`, 'invalid');
  // Kept as sent: Service Bus hands a SQL filter back as its expression, even one that is constant.
  const compact = expression.replace(/\s+/g, '');
  if (compact === '1=1') return { kind: 'sql', expression, test: () => true };
  if (compact === '1=0') return { kind: 'sql', expression, test: () => false };
  // OR of ANDs of comparisons: split on the keywords outside quotes.
  const disjuncts = splitOutsideQuotes(expression, 'OR').map((part) =>
    splitOutsideQuotes(part, 'AND').map((comparison) => parseComparison(comparison, expression)),
  );
  const test = (message: OutgoingMessage): boolean =>
    disjuncts.some((conjuncts) => conjuncts.every((comparison) => compare(comparison, message)));
  return { kind: 'sql', expression, test };
}

function compare({ property, negated, values }: Comparison, message: OutgoingMessage): boolean {
  const actual = property(message);
  // SQL's unknown: a comparison with a property the message does not have is false, negated or not.
  if (actual === undefined || actual === null) return false;
  const found = values.some((value) => value === actual);
  return negated ? !found : found;
}

function splitOutsideQuotes(text: string, keyword: 'AND' | 'OR'): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  const pattern = new RegExp(`^\\s${keyword}\\s`, 'i');
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "'") quoted = !quoted;
    else if (!quoted && pattern.test(text.slice(i, i + keyword.length + 2))) {
      parts.push(text.slice(start, i));
      start = i + keyword.length + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

const COMPARISON = /^\s*(?:(sys|user)\.)?([A-Za-z_]\w{0,127})\s*(=|<>|!=|\s(?:NOT\s+)?IN\s*)\s*(.+?)\s*$/is;
const LITERAL = /^\s*('(?:[^']|'')*'|-?\d+(?:\.\d+)?|TRUE|FALSE)\s*$/i;

function parseComparison(text: string, whole: string): Comparison {
  const match = COMPARISON.exec(text);
  if (!match) throw unsupported(whole);
  const [, scope, name, operator, rest] = match as unknown as [
    string,
    string | undefined,
    string,
    string,
    string,
  ];
  let property: (message: OutgoingMessage) => unknown;
  if (scope?.toLowerCase() === 'sys') {
    const system = SYSTEM_PROPERTIES[name.toLowerCase()];
    if (!system) throw unsupported(whole);
    property = system;
  } else {
    property = (message) => message.applicationProperties?.[name];
  }
  const op = operator.trim().toUpperCase().replace(/\s+/g, ' ');
  if (op === 'IN' || op === 'NOT IN') {
    const list = /^\((.*)\)$/s.exec(rest.trim());
    if (!list) throw unsupported(whole);
    const values = splitList(list[1]!).map((item) => literal(item, whole));
    return { property, negated: op === 'NOT IN', values };
  }
  return { property, negated: op !== '=', values: [literal(rest, whole)] };
}

function splitList(text: string): string[] {
  const items: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "'") quoted = !quoted;
    else if (!quoted && text[i] === ',') {
      items.push(text.slice(start, i));
      start = i + 1;
    }
  }
  items.push(text.slice(start));
  return items;
}

function literal(text: string, whole: string): Literal {
  const match = LITERAL.exec(text);
  if (!match) throw unsupported(whole);
  const token = match[1]!;
  if (token.startsWith("'")) return token.slice(1, -1).replace(/''/g, "'");
  if (/^true$/i.test(token)) return true;
  if (/^false$/i.test(token)) return false;
  return Number(token);
}

function unsupported(expression: string): RuleError {
  const shown = expression.length > 100 ? `${expression.slice(0, 100)}…` : expression;
  return new RuleError(
    `The local peer evaluates SQL filters of the form "<property> = <literal>" (or <>, !=, IN (...), ` +
      `NOT IN (...)) joined by AND and OR, without parentheses, and 1=1 / 1=0; it cannot evaluate '${shown}'.`,
    'unsupported',
  );
}
