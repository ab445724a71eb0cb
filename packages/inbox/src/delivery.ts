import type { InvocationContext } from '@azure/functions';

import type { RetryIdentity } from './delayedRetry';

/**
 * One delivery of a Service Bus message, typed. The Functions host (Node.js v4 model) hands the body
 * JSON-parsed when it can, and JSON-parses every trigger metadata value too, so an all-digit
 * MessageId arrives as a number and `"true"` as a boolean. This is the only place that knows.
 */
export interface Delivery {
  /** The body as the host handed it: a parsed JSON value, a string, or bytes. */
  readonly body: unknown;
  /** Always a string when present (see messageIdOf); undefined when the message has none. */
  readonly messageId: string | undefined;
  /**
   * True when the MessageId may not be the producer's text, so two different MessageIds may have
   * arrived as the same value. The Node.js library JSON-parses every text metadata value it can:
   * `1e3` and `1000` both arrive as 1000, `1.0` as 1, `-0` as 0, ` true` as true, `[1, 2]` as [1,2],
   * `"x"` as x. So every value that is not text is ambiguous, and so is text that is itself JSON
   * (only a quoted literal such as `"1e3"` arrives as it). Such a marker is keyed by MessageId and
   * payload hash (see markerKey).
   */
  readonly messageIdIsLossy: boolean;
  /** 1 on the first delivery. */
  readonly deliveryCount: number;
  readonly enqueuedTimeUtc: Date | undefined;
  readonly subject: string | undefined;
  readonly correlationId: string | undefined;
  readonly applicationProperties: Readonly<Record<string, unknown>>;
  /**
   * The broker's values the body replaced: the host adds a JSON body's top-level properties to the
   * trigger metadata (names compared ignoring case), so a value is lost when the body has every name
   * it comes under (`subject` and `label` for the Subject, `applicationProperties` and
   * `userProperties` for the properties, ...). Such a value reads as absent here. A message that
   * lost its MessageId or DeliveryCount is poison: it cannot be deduplicated.
   */
  readonly shadowedByBody?: readonly ShadowedField[];
  /**
   * Set on a delivery of a delayed-retry copy (packages/inbox/src/delayedRetry.ts): which copy it is and its
   * own MessageId. `messageId` and `subject` are then the original message's.
   */
  readonly retry?: RetryIdentity;
  /**
   * Set when the delivery claims to be a delayed-retry copy (an `inboxRetry*` property, the Subject
   * `inbox.retry`, or a copy's MessageId whose properties the body hides) but cannot be read as one:
   * what is wrong with it. Processing refuses it as poison (`invalid-retry-copy`) before any handler
   * runs, since its effect could not be told apart from the original's. (What the
   * `inboxRetry*` properties are: packages/inbox/src/delayedRetry.ts.)
   */
  readonly invalidRetryCopy?: string;
}

export function toDelivery(message: unknown, context: InvocationContext): Delivery {
  const metadata: Record<string, unknown> = context.triggerMetadata ?? {};
  const replaced = bodyProperties(message);
  // The broker's value under the first of its names the body did not replace.
  const broker = (field: ShadowedField): unknown => {
    const name = METADATA_NAMES[field].find((candidate) => !replaced.has(candidate.toLowerCase()));
    // Stryker disable next-line ConditionalExpression: equivalent: metadata[undefined] is undefined too
    return name === undefined ? undefined : metadata[name];
  };
  const shadowedByBody = SHADOWABLE.filter((field) =>
    METADATA_NAMES[field].every((name) => replaced.has(name.toLowerCase())),
  );
  const { messageId, lossy } = messageIdOf(broker('messageId'));
  const deliveryCount = Number(broker('deliveryCount'));
  return {
    body: message,
    messageId,
    messageIdIsLossy: lossy,
    deliveryCount: Number.isInteger(deliveryCount) && deliveryCount > 0 ? deliveryCount : 1,
    enqueuedTimeUtc: dateOf(broker('enqueuedTimeUtc')),
    subject: textOf(broker('subject')),
    correlationId: textOf(broker('correlationId')),
    applicationProperties: recordOf(broker('applicationProperties')),
    shadowedByBody: shadowedByBody.length > 0 ? shadowedByBody : undefined,
  };
}

/**
 * The broker values a body can replace, each with the metadata names it comes under, in the order
 * they are read (Subject and Label carry the same value, as do ApplicationProperties and
 * UserProperties, EnqueuedTimeUtc and EnqueuedTime).
 */
// Stryker disable ArrayDeclaration,StringLiteral,ObjectLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); delivery.test.ts pins each name
const METADATA_NAMES = {
  messageId: ['messageId'],
  deliveryCount: ['deliveryCount'],
  subject: ['subject', 'label'],
  correlationId: ['correlationId'],
  applicationProperties: ['applicationProperties', 'userProperties'],
  enqueuedTimeUtc: ['enqueuedTimeUtc', 'enqueuedTime'],
} as const;
// Stryker restore ArrayDeclaration,StringLiteral,ObjectLiteral
export type ShadowedField = keyof typeof METADATA_NAMES;
const SHADOWABLE = Object.keys(METADATA_NAMES) as ShadowedField[];

/**
 * The names, lower-cased, under which the host put a JSON body's top-level properties into the
 * trigger metadata (WorkerFunctionInvoker.TransformInput): those of an object body, except null
 * and array values.
 */
function bodyProperties(body: unknown): Set<string> {
  const names = new Set<string>();
  // Stryker disable next-line ConditionalExpression: equivalent: the entries of text, a list or bytes are indices, which name no metadata
  if (body === null || typeof body !== 'object' || Array.isArray(body) || Buffer.isBuffer(body)) return names;
  for (const [name, value] of Object.entries(body)) {
    if (value !== null && !Array.isArray(value)) names.add(name.toLowerCase());
  }
  return names;
}

function messageIdOf(value: unknown): { messageId: string | undefined; lossy: boolean } {
  if (value === undefined || value === '') return { messageId: undefined, lossy: false };
  if (typeof value === 'string') return { messageId: value, lossy: isJson(value) };
  // Numbers, true, false, null, arrays and objects: the host parsed text that was valid JSON, and
  // many texts parse to each. Their JSON text (String for numbers, as before) maps a redelivery to
  // the same id; the payload hash in the marker key keeps different messages apart.
  // Stryker disable next-line ConditionalExpression,StringLiteral: equivalent: String and JSON.stringify write a finite number alike
  return { messageId: typeof value === 'number' ? String(value) : JSON.stringify(value), lossy: true };
}

/**
 * Whether text is JSON. Text the library could parse never arrives as text, so text that parses
 * came from a quoted literal (`"1e3"` arrives as 1e3), and `" 1e3"` or `"1\u0065 3"` would too.
 * The common case (a GUID, `order-42`) fails at its first character.
 */
export function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function textOf(value: unknown): string | undefined {
  // Stryker disable next-line ConditionalExpression: equivalent: JSON.stringify(undefined) is undefined too
  if (value === undefined || value === null || value === '') return undefined;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * The host writes EnqueuedTimeUtc as a .NET DateTime without a zone designator
 * ("2026-11-29T10:00:00.12"), which JavaScript would read in the process's time zone: it is UTC.
 */
function dateOf(value: unknown): Date | undefined {
  if (typeof value !== 'string' && typeof value !== 'number') return undefined;
  // Stryker disable next-line ConditionalExpression: equivalent: a number's text never matches ZONELESS_DATE_TIME
  const date = new Date(typeof value === 'string' && ZONELESS_DATE_TIME.test(value) ? `${value}Z` : value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

// Stryker disable next-line Regex: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); packages/inbox/test/delivery.test.ts pins it at its bounds
const ZONELESS_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?$/;

function recordOf(value: unknown): Record<string, unknown> {
  if (typeof value === 'string') {
    try {
      return recordOf(JSON.parse(value));
      // Stryker disable next-line BlockStatement: equivalent: falling through, text is not an object and gives {} as well
    } catch {
      return {};
    }
  }
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}
