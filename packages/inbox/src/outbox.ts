import { hash } from 'node:crypto';

import { bounded, PoisonMessageError } from './errors';
import { jsonBytesBound } from './jsonBytes';
import { contextOf, type TraceCarrier, traceProperties } from './tracing';

/**
 * A message a handler publishes with `tx.publish`: it becomes an outbox document committed in the
 * same transactional batch as the marker and the staged writes, and the relay sends it to Service
 * Bus once that batch has committed (never for a batch that did not).
 *
 * @example
 * ```ts
 * tx.publish({
 *   topic: 'business-events',
 *   subject: 'StockReserved',
 *   name: 'stock-reserved',
 *   body: { orderId: order.orderId, productId: order.productId, quantity: order.quantity },
 * });
 * ```
 */
export interface OutgoingMessage {
  /** The topic to send to: one that src/topology.json declares with this consumer among its `publishers`. */
  topic: string;
  /** The Service Bus Subject (Label), which the subscriptions filter on. */
  subject: string;
  /**
   * Plain data, sent as `application/json` text: objects, arrays, text, finite numbers, booleans,
   * null (a Date, or anything with `toJSON`, as what that returns). Anything JSON would not keep as
   * it is (NaN, Infinity, a function, a Map, a class instance, undefined in an array) is refused.
   * With the rest of the message, at most 192 KiB as JSON.
   */
  body: unknown;
  /**
   * A label for the message, unique among what one handler run publishes, and part of its MessageId
   * (so keep it stable across releases while messages may be redelivered).
   * @default its position among the run's publishes: `#0`, `#1`, ...
   */
  name?: string;
  /** @default the incoming message's CorrelationId, else its MessageId */
  correlationId?: string;
  /** At most 32: text of up to 1024 characters, finite numbers, booleans. */
  applicationProperties?: Record<string, string | number | boolean>;
}

// Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing)
export const OUTBOX_TYPE = 'outbox';

/** What the relay sends: the Service Bus message an outbox document holds. */
export interface OutboxMessage {
  messageId: string;
  topic: string;
  subject: string;
  body: unknown;
  contentType: 'application/json';
  correlationId: string | undefined;
  applicationProperties: Record<string, string | number | boolean> | undefined;
  /**
   * The trace context the message is sent with (`traceparent`, and `Diagnostic-Id` for the Service
   * Bus extension): the relay sets it from the document's `trace`, or from its own send span for a
   * document that has none. Never part of the stored message text.
   */
  trace?: TraceCarrier;
}

/** An outbox message as @azure/service-bus sends it (a `ServiceBusMessage`, which this library does not import). */
export interface OutboxServiceBusMessage {
  messageId: string;
  subject: string;
  contentType: 'application/json';
  body: Buffer;
  correlationId?: string;
  applicationProperties?: Record<string, string | number | boolean>;
}

/**
 * The body goes as JSON text in a data section, as every producer of this template sends it. The
 * trace context the relay chose (the publishing delivery's) goes as `traceparent`/`tracestate` and
 * as `Diagnostic-Id`, which the Functions Service Bus extension continues and which the SDK's own
 * instrumentation leaves as it is when present.
 */
export function serviceBusMessageOf(message: OutboxMessage): OutboxServiceBusMessage {
  const properties = { ...message.applicationProperties, ...traceProperties(message.trace) };
  return {
    messageId: message.messageId,
    subject: message.subject,
    contentType: message.contentType,
    // Stryker disable next-line StringLiteral: equivalent: an empty encoding is Buffer.from's default, UTF-8
    body: Buffer.from(JSON.stringify(message.body), 'utf8'),
    ...(message.correlationId === undefined ? {} : { correlationId: message.correlationId }),
    ...(Object.keys(properties).length === 0 ? {} : { applicationProperties: properties }),
  };
}

/**
 * Why the relay set an outbox document aside (status `unsendable`), never to try it again on its
 * own (`npm run outbox -- resend` or `discard` is the operator's choice):
 *
 *   unreadable  its `message` is not the JSON text tx.publish writes (not JSON, a field missing, an
 *               id that does not match): it was not written by tx.publish, or was changed since
 *   invalid     the message it holds fails the checks tx.publish makes (written by another version
 *               of the template, or by hand)
 *   too-large   Service Bus refused its size (a namespace whose message size is below what
 *               tx.publish allows)
 */
export const UNSENDABLE_REASONS = ['unreadable', 'invalid', 'too-large'] as const;
export type UnsendableReason = (typeof UNSENDABLE_REASONS)[number];

/**
 * An outbox document, in the logical partition of the message that staged it. `pendingSinceEpochSeconds`
 * exists only while it is pending (the sweeper's query and the pending metrics filter on it, with the
 * container's index); the relay's dispatch mark removes it and sets `ttl`, so the document deletes
 * itself after OUTBOX_DISPATCHED_RETENTION. A document set aside carries
 * `unsendableSinceEpochSeconds` instead (indexed too: the sweeper counts them), with the reason.
 *
 * The message is kept as JSON text: the Cosmos DB trigger hands the relay its documents re-read by
 * Json.NET, which rewrites every string that looks like an ISO date (`…00.120Z` becomes `…00.12Z`,
 * an offset becomes UTC), but never the inside of a string. So what the relay sends is, byte for
 * byte, what the handler staged, whether the relay or the sweeper sends it. `messageId`, `topic`
 * and `subject` are copies for queries and triage.
 */
export type OutboxDocument = {
  id: string;
  partitionKey: string;
  type: typeof OUTBOX_TYPE;
  status: 'pending' | 'dispatched' | 'unsendable';
  /** The consumer that published it, and the incoming MessageId it published for (bounded). */
  consumer: string;
  sourceMessageId: string;
  createdAtEpochSeconds: number;
  pendingSinceEpochSeconds?: number;
  dispatchedAtEpochSeconds?: number;
  unsendableSinceEpochSeconds?: number;
  unsendableReason?: UnsendableReason;
  /** What was wrong with it, for the operator (bounded; never the body). */
  unsendableDetail?: string;
  ttl?: number;
  messageId: string;
  topic: string;
  subject: string;
  /** The OutboxMessage, as JSON text. */
  message: string;
  /**
   * The W3C trace context of the delivery that published it (added in issue 24; optional, so a
   * relay of either version reads a document of either version). The relay sends the message with
   * it, so the downstream consumer joins the publisher's trace, and links its own send span to it.
   * A document without it (written before, or by a delivery that had no trace) is sent with the
   * relay's send span's context: the downstream operation joins the relay's trace, and that span
   * has no link back. An older relay ignores the field.
   */
  trace?: TraceCarrier;
};

/**
 * At most this many bytes of JSON per message (body, subject, correlation id and application
 * properties): Service Bus Standard carries 256 KiB per message, headers included, and the outbox
 * document counts in the 2 MiB batch.
 */
// Stryker disable next-line ArithmeticOperator: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing)
export const MAX_OUTGOING_MESSAGE_BYTES = 192 * 1024;
/** Service Bus limits MessageId, CorrelationId and Subject to 128 characters. */
const MAX_PROPERTY_CHARS = 128;
/** Entity names as Service Bus accepts them (./topology.ts ENTITY_NAME). */
// Stryker disable next-line Regex: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); outgoing.test.ts pins it at 50 and 51 characters
const TOPIC_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,48}[A-Za-z0-9])?$/;
const MAX_APPLICATION_PROPERTIES = 32;

/**
 * The MessageId of a published message: SHA-256 of the consumer, the incoming message's marker key
 * and partition, and the message's name, 32 hex digits. A handler re-run (after a failed condition
 * or an ETag conflict) and a redelivery stage the same ids, so every layer downstream can
 * deduplicate: the broker's duplicate detection drops a relay resend inside its window, the
 * downstream inbox the rest. The partition keeps apart two different messages that reuse one
 * MessageId (a producer bug) and land in different partitions: both commit, so both publish.
 */
export function outgoingMessageId(consumer: string, key: string, partitionKey: string, name: string): string {
  return hash('sha256', `${consumer}\u0000${key}\u0000${partitionKey}\u0000${name}`, 'hex').slice(0, 32);
}

/** The id of the outbox document that carries the message with this MessageId. */
export function outboxDocumentId(messageId: string): string {
  return `outbox-${messageId}`;
}

/**
 * Where a consumer may publish: each topic src/topology.json lists it among the publishers of, with
 * the subjects that reach someone there (a subscription's filter takes them, or the topology declares
 * them unsubscribed on purpose). Service Bus accepts a message no subscription takes, and discards it.
 */
export type OutboxRoutes = ReadonlyMap<string, ReadonlySet<string>>;

export interface OutboxSource {
  consumer: string;
  /** The incoming message's marker key (markerKey). */
  key: string;
  messageId: string;
  correlationId: string | undefined;
  /**
   * Where this consumer may publish (the Bicep grants the app Azure Service Bus Data Sender on
   * those topics only); undefined: not checked.
   */
  routes?: OutboxRoutes;
  /** The delivery's trace context (./tracing.ts); stored in the document when it names a trace. */
  trace?: TraceCarrier;
}

/**
 * The outbox document for one `tx.publish`, validated on what will be stored: the message is
 * written as JSON text first, and that text must read back as the relay reads it. Anything Service
 * Bus would refuse or discard, anything JSON would not keep (NaN, a function, a Map, ...), or
 * anything that could never fit, is poison (`invalid-outgoing-message`): it would fail the same way
 * on every delivery, and nothing is written.
 */
export function buildOutboxDocument(
  message: OutgoingMessage,
  position: number,
  source: OutboxSource,
  partitionKey: string,
  now: Date,
): OutboxDocument {
  const problem = outgoingProblem(message) ?? routeProblem(message, source);
  if (problem !== undefined) throw invalid(problem);
  const name = message.name ?? `#${position}`;
  const messageId = outgoingMessageId(source.consumer, source.key, partitionKey, name);
  const createdAtEpochSeconds = Math.floor(now.getTime() / 1000);
  const outgoing: OutboxMessage = {
    messageId,
    topic: message.topic,
    subject: message.subject,
    body: message.body,
    contentType: 'application/json',
    // Cut, not bounded: Service Bus takes at most 128 characters, and a marker would add to them.
    correlationId:
      // Stryker disable next-line MethodExpression: equivalent: Service Bus ids are at most 128 characters, so the cut never shortens one
      message.correlationId ?? (source.correlationId ?? source.messageId).slice(0, MAX_PROPERTY_CHARS),
    applicationProperties: message.applicationProperties,
  };
  const written = losslessJson({ ...outgoing, partitionKey });
  if (typeof written !== 'string') throw invalid(written.problem);
  const id = outboxDocumentId(messageId);
  // What the relay will read: tx.publish accepts nothing the relay would set aside.
  const read = readOutboxMessage(written, id);
  if (!read.ok) throw invalid(read.detail);
  return {
    id,
    partitionKey,
    type: OUTBOX_TYPE,
    status: 'pending',
    consumer: source.consumer,
    sourceMessageId: bounded(source.messageId, MAX_PROPERTY_CHARS),
    createdAtEpochSeconds,
    pendingSinceEpochSeconds: createdAtEpochSeconds,
    messageId,
    topic: message.topic,
    subject: message.subject,
    message: written,
    ...traceField(source.trace),
  };
}

/** The document's `trace`, when the carrier names a trace the W3C propagator reads. */
function traceField(carrier: TraceCarrier | undefined): { trace?: TraceCarrier } {
  // Stryker disable next-line ConditionalExpression: equivalent: contextOf(undefined) is undefined
  return carrier !== undefined && contextOf(carrier) !== undefined ? { trace: carrier } : {};
}

/** The trace context stored in an outbox document, when it names one (an old document has none). */
export function storedTrace(document: OutboxDocument): TraceCarrier | undefined {
  const stored = (document as { trace?: unknown }).trace;
  if (typeof stored !== 'object' || stored === null) return undefined;
  const { traceparent, tracestate } = stored as Partial<Record<string, unknown>>;
  // Stryker disable next-line ConditionalExpression: equivalent: contextOf reads no trace from a traceparent that is not text
  if (typeof traceparent !== 'string') return undefined;
  const carrier = typeof tracestate === 'string' ? { traceparent, tracestate } : { traceparent };
  return contextOf(carrier) === undefined ? undefined : carrier;
}

function invalid(problem: string): PoisonMessageError {
  return new PoisonMessageError('invalid-outgoing-message', `tx.publish: ${problem}`);
}

/** How many subjects a refusal lists, of those the topic's subscriptions take. */
const LISTED_SUBJECTS = 10;

function routeProblem(message: OutgoingMessage, source: OutboxSource): string | undefined {
  if (source.routes === undefined) return undefined;
  const subjects = source.routes.get(message.topic);
  if (subjects === undefined) {
    return (
      `the topic ${echo(message.topic)} does not list ${source.consumer} among its publishers (src/topology.json), ` +
      // Stryker disable next-line StringLiteral: message text only
      'so the app may not send to it.'
    );
  }
  if (subjects.has(message.subject)) return undefined;
  const taken = [...subjects].sort();
  const listed = taken.slice(0, LISTED_SUBJECTS).join(', ') + (taken.length > LISTED_SUBJECTS ? ', ...' : '');
  return (
    `no subscription of the topic ${echo(message.topic)} takes the subject ${echo(message.subject)} ` +
    `(they take: ${taken.length > 0 ? listed : 'none'}), so Service Bus would accept the message and discard it. ` +
    // Stryker disable next-line StringLiteral: message text only
    'A new subject needs a subscription that filters on it (npm run new:consumer), or, when no one here ' +
    'reads it on purpose, its name in the topic\'s "unsubscribedSubjects" in src/topology.json.'
  );
}

function outgoingProblem(message: OutgoingMessage): string | undefined {
  const { topic, subject, name, correlationId, applicationProperties, body } = message;
  if (typeof topic !== 'string' || !TOPIC_NAME.test(topic)) {
    return `the topic ${echo(topic)} is not a Service Bus topic name.`;
  }
  if (typeof subject !== 'string' || subject.length === 0 || subject.length > MAX_PROPERTY_CHARS) {
    return `the subject ${echo(subject)} must be text of 1 to ${MAX_PROPERTY_CHARS} characters.`;
  }
  if (
    name !== undefined &&
    (typeof name !== 'string' || name.length === 0 || name.length > MAX_PROPERTY_CHARS)
  ) {
    return `the name ${echo(name)} must be text of 1 to ${MAX_PROPERTY_CHARS} characters.`;
  }
  if (
    correlationId !== undefined &&
    (typeof correlationId !== 'string' || correlationId.length > MAX_PROPERTY_CHARS)
  ) {
    return `the correlationId ${echo(correlationId)} must be text of at most ${MAX_PROPERTY_CHARS} characters.`;
  }
  if (applicationProperties !== undefined) {
    if (typeof applicationProperties !== 'object' || applicationProperties === null) {
      return 'applicationProperties must be an object.';
    }
    const entries = Object.entries(applicationProperties);
    if (entries.length > MAX_APPLICATION_PROPERTIES) {
      return `${entries.length} applicationProperties; at most ${MAX_APPLICATION_PROPERTIES}.`;
    }
    const wrong = entries.find(([key, value]) => key.length > MAX_PROPERTY_CHARS || !isPropertyValue(value));
    if (wrong)
      return (
        `the application property ${echo(wrong[0])} is ${describe(wrong[1])}; it must be a string ` +
        // Stryker disable next-line StringLiteral: message text only
        `(up to ${MAX_PROPERTY_VALUE_CHARS} characters), a finite number or a boolean.`
      );
  }
  if (body === undefined) return 'the body is undefined; publish a JSON value.';
  return undefined;
}

/** Whether the message fits one Service Bus message, as JSON (body and properties). */
function sizeProblem(message: OutgoingMessage): string | undefined {
  const { subject, correlationId, applicationProperties, body } = message;
  const sent = { subject, correlationId, applicationProperties, body };
  // Stryker disable next-line ConditionalExpression,EqualityOperator: equivalent: a quick bound before the exact count, which decides alone
  if (jsonBytesBound(sent) <= MAX_OUTGOING_MESSAGE_BYTES) return undefined;
  const bytes = Buffer.byteLength(JSON.stringify(sent));
  return bytes > MAX_OUTGOING_MESSAGE_BYTES
    ? `the message takes ${bytes} bytes as JSON (body and properties); at most ${MAX_OUTGOING_MESSAGE_BYTES}.`
    : undefined;
}

const MAX_PROPERTY_VALUE_CHARS = 1024;

function isPropertyValue(value: unknown): boolean {
  return (
    typeof value === 'boolean' ||
    // Stryker disable next-line ConditionalExpression: equivalent: Number.isFinite is false for anything but a number
    (typeof value === 'number' && Number.isFinite(value)) ||
    (typeof value === 'string' && value.length <= MAX_PROPERTY_VALUE_CHARS)
  );
}

/** A value for an error message: bounded text, or its type. */
function echo(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(bounded(value)) : typeof value;
}

/** What a value is, for an error message, without its content (NaN and Infinity by name). */
function describe(value: unknown): string {
  // Stryker disable next-line StringLiteral: message text only
  if (typeof value === 'number') return Number.isFinite(value) ? 'a number' : String(value);
  if (typeof value === 'string') return `text of ${value.length} characters`;
  if (value === null) return 'null';
  // Stryker disable next-line ConditionalExpression: message text only: the kind named in an error message
  if (typeof value === 'object') return kindOf(value);
  // Stryker disable next-line StringLiteral: message text only
  return `a ${typeof value}`;
}

function kindOf(value: object): string {
  if (Array.isArray(value)) return 'an array';
  const prototype = Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null;
  // Stryker disable next-line ConditionalExpression: message text only: the kind named in an error message
  if (prototype === null || prototype === Object.prototype) return 'an object';
  // Stryker disable next-line OptionalChaining: message text only: the kind named in an error message
  const name = prototype?.constructor?.name;
  // Stryker disable next-line ConditionalExpression,LogicalOperator,StringLiteral: message text only: the kind named in an error message
  return typeof name === 'string' && name !== '' ? `a ${bounded(name, 40)}` : 'an object';
}

/** Path segments an error message shows, each bounded; the rest is elided. */
const MAX_PATH_KEY_CHARS = 40;

/**
 * The JSON text of `value`, or the first thing in it that JSON would not keep as it is: a number
 * that is not finite (written as null), a function, symbol or BigInt, undefined in an array (written
 * as null), or an object that is not plain data (a Map or a Set is written as `{}`, a class instance
 * as its own fields only, a Promise as `{}`). A value with `toJSON` (a Date) is what it returns, as
 * JSON.stringify has it. An undefined property is left out, as JSON does. JSON.stringify walks the
 * value (natively, so a cycle or too deep a value is its error, reported as such).
 */
export function losslessJson(value: unknown): string | { problem: string } {
  const paths = new WeakMap<object, string>();
  let problem: string | undefined;
  const check = function (this: unknown, key: string, current: unknown): unknown {
    if (problem !== undefined) return undefined;
    const holder = this as object;
    // Stryker disable next-line StringLiteral: equivalent: only the root has no parent, and its path is never built from one
    const parent = paths.get(holder) ?? '';
    const path =
      key === ''
        ? ''
        : Array.isArray(holder)
          ? `${parent}[${key}]`
          : `${parent}.${bounded(key, MAX_PATH_KEY_CHARS)}`;
    const at = path === '' ? '' : ` at ${bounded(path.replace(/^\./, ''), 200)}`;
    const lossy = (what: string): undefined => {
      problem = `${what}${at}, which JSON cannot keep; publish plain data (objects, arrays, text, finite numbers, booleans, null).`;
      return undefined;
    };
    switch (typeof current) {
      case 'number':
        return Number.isFinite(current) ? current : lossy(String(current));
      case 'function':
      case 'symbol':
      case 'bigint':
        return lossy(`a ${typeof current}`);
      case 'undefined':
        return Array.isArray(holder) ? lossy('undefined in an array') : current;
      case 'object': {
        if (current === null) return current;
        const prototype = Object.getPrototypeOf(current) as unknown;
        if (!Array.isArray(current) && prototype !== Object.prototype && prototype !== null)
          return lossy(kindOf(current));
        paths.set(current, path);
        return current;
      }
      default:
        return current;
    }
  };
  let text: string | undefined;
  try {
    text = JSON.stringify(value, check);
  } catch (error) {
    return { problem: `the message cannot be written as JSON (${bounded((error as Error).message)}).` };
  }
  if (problem !== undefined) return { problem };
  return text ?? { problem: 'the message is not a JSON value.' };
}

/** What the relay sends for an outbox document, and the partition to mark it in. */
export interface OutboxEntry {
  message: OutboxMessage;
  /** From the JSON text, which the trigger's rewriting of date-like strings does not reach. */
  partitionKey: string;
}

export type OutboxRead =
  { ok: true; entry: OutboxEntry } | { ok: false; reason: UnsendableReason; detail: string };

/**
 * The message an outbox document holds, checked again as `tx.publish` checks it (tx.publish runs
 * this very check on the text it stores), or why the relay cannot send it.
 */
export function outboxEntryOf(document: OutboxDocument): OutboxRead {
  if (typeof document.message !== 'string')
    return { ok: false, reason: 'unreadable', detail: 'it has no "message" text.' };
  return readOutboxMessage(document.message, document.id);
}

function readOutboxMessage(text: string, documentId: unknown): OutboxRead {
  const unreadable = (detail: string): OutboxRead => ({ ok: false, reason: 'unreadable', detail });
  let stored: unknown;
  try {
    stored = JSON.parse(text);
  } catch {
    return unreadable(`its "message" (${text.length} characters) is not JSON.`);
  }
  if (typeof stored !== 'object' || stored === null || Array.isArray(stored))
    return unreadable('its "message" is not a JSON object.');
  const { messageId, topic, subject, body, correlationId, applicationProperties, partitionKey } =
    stored as Partial<OutboxMessage> & { partitionKey?: unknown };
  if (!isText(messageId)) return unreadable('its "message" has no messageId.');
  if (!isText(partitionKey)) return unreadable('its "message" has no partitionKey.');
  if (documentId !== outboxDocumentId(messageId))
    return unreadable(`its id is not ${echo(outboxDocumentId(messageId))}, the one its messageId gives.`);
  const checked = { topic, subject, body, correlationId, applicationProperties } as OutgoingMessage;
  // Parsed JSON: plain data, so the size is measured without a walk that could fail.
  const problem = outgoingProblem(checked) ?? sizeProblem(checked);
  if (problem !== undefined) return { ok: false, reason: 'invalid', detail: problem };
  return {
    ok: true,
    entry: {
      message: {
        messageId,
        topic: checked.topic,
        subject: checked.subject,
        body,
        contentType: 'application/json',
        correlationId,
        applicationProperties,
      },
      partitionKey,
    },
  };
}

function isText(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}

/** The outbox documents among changes (a change feed page holds every kind of document). */
export function isOutboxDocument(document: unknown): document is OutboxDocument {
  const candidate = document as Partial<OutboxDocument> | null;
  // Stryker disable next-line ConditionalExpression: equivalent: a primitive has no type property, so the last check refuses it too
  return typeof candidate === 'object' && candidate !== null && candidate.type === OUTBOX_TYPE;
}
