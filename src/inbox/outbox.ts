import { hash } from 'node:crypto';

import { bounded, PoisonMessageError } from './errors';
import { jsonBytesBound } from './jsonBytes';

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
  /** A JSON value, sent as `application/json`; with the rest of the message, at most 192 KiB as JSON. */
  body: unknown;
  /**
   * A label for the message, unique among what one handler run publishes, and part of its MessageId
   * (so keep it stable across releases while messages may be redelivered).
   * @default its position among the run's publishes: `#0`, `#1`, ...
   */
  name?: string;
  /** @default the incoming message's CorrelationId, else its MessageId */
  correlationId?: string;
  applicationProperties?: Record<string, string | number | boolean>;
}

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
}

/**
 * An outbox document, in the logical partition of the message that staged it. `pendingSinceEpochSeconds`
 * exists only while it is pending (the sweeper's query and the pending metrics filter on it, with the
 * container's index); the relay's dispatch mark removes it and sets `ttl`, so the document deletes
 * itself after OUTBOX_DISPATCHED_RETENTION.
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
  ttl?: number;
  messageId: string;
  topic: string;
  subject: string;
  /** The OutboxMessage, as JSON text. */
  message: string;
};

/**
 * At most this many bytes of JSON per message (body, subject, correlation id and application
 * properties): Service Bus Standard carries 256 KiB per message, headers included, and the outbox
 * document counts in the 2 MiB batch.
 */
export const MAX_OUTGOING_MESSAGE_BYTES = 192 * 1024;
/** Service Bus limits MessageId, CorrelationId and Subject to 128 characters. */
const MAX_PROPERTY_CHARS = 128;
/** Entity names as Service Bus accepts them (src/topology.ts ENTITY_NAME). */
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

export const outboxDocumentId = (messageId: string): string => `outbox-${messageId}`;

export interface OutboxSource {
  consumer: string;
  /** The incoming message's marker key (markerKey). */
  key: string;
  messageId: string;
  correlationId: string | undefined;
  /**
   * The topics this consumer may publish to (src/topology.json `publishers`: the Bicep grants the
   * app Azure Service Bus Data Sender on those only); undefined: not checked.
   */
  topics?: readonly string[];
}

/**
 * The outbox document for one `tx.publish`, validated: anything Service Bus would refuse, or that
 * could never fit, is poison (`invalid-outgoing-message`): it would fail the same way on every delivery.
 */
export function buildOutboxDocument(
  message: OutgoingMessage,
  position: number,
  source: OutboxSource,
  partitionKey: string,
  now: Date,
): OutboxDocument {
  const problem =
    outgoingProblem(message) ??
    (source.topics === undefined || source.topics.includes(message.topic)
      ? undefined
      : `the topic ${echo(message.topic)} does not list ${source.consumer} among its publishers (src/topology.json), ` +
        'so the app may not send to it.');
  if (problem !== undefined) {
    throw new PoisonMessageError('invalid-outgoing-message', `tx.publish: ${problem}`);
  }
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
      message.correlationId ?? (source.correlationId ?? source.messageId).slice(0, MAX_PROPERTY_CHARS),
    applicationProperties: message.applicationProperties,
  };
  return {
    id: outboxDocumentId(messageId),
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
    message: JSON.stringify({ ...outgoing, partitionKey }),
  };
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
    const wrong = entries.find(
      ([key, value]) =>
        key.length > MAX_PROPERTY_CHARS ||
        !['string', 'number', 'boolean'].includes(typeof value) ||
        (typeof value === 'string' && value.length > 1024),
    );
    if (wrong)
      return `the application property ${echo(wrong[0])} must be a string (up to 1024), number or boolean.`;
  }
  if (body === undefined) return 'the body is undefined; publish a JSON value.';
  const sent = { subject, correlationId, applicationProperties, body };
  if (jsonBytesBound(sent) > MAX_OUTGOING_MESSAGE_BYTES) {
    let bytes: number;
    try {
      bytes = Buffer.byteLength(JSON.stringify(sent));
    } catch (error) {
      return `the body cannot be written as JSON (${bounded((error as Error).message)}).`;
    }
    if (bytes > MAX_OUTGOING_MESSAGE_BYTES) {
      return `the message takes ${bytes} bytes as JSON (body and properties); at most ${MAX_OUTGOING_MESSAGE_BYTES}.`;
    }
  }
  return undefined;
}

/** A value for an error message: bounded text, or its type. */
function echo(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(bounded(value)) : typeof value;
}

/** What the relay sends for an outbox document, and the partition to mark it in. */
export interface OutboxEntry {
  message: OutboxMessage;
  /** From the JSON text, which the trigger's rewriting of date-like strings does not reach. */
  partitionKey: string;
}

/**
 * The message an outbox document holds, checked again as `tx.publish` checks it, or undefined when
 * it holds none the relay can send (a document not written by `tx.publish`).
 */
export function outboxEntryOf(document: OutboxDocument): OutboxEntry | undefined {
  const text = (value: unknown): value is string => typeof value === 'string' && value.length > 0;
  if (typeof document.message !== 'string') return undefined;
  let stored: (Partial<OutboxMessage> & { partitionKey?: unknown }) | null;
  try {
    stored = JSON.parse(document.message) as (Partial<OutboxMessage> & { partitionKey?: unknown }) | null;
  } catch {
    return undefined;
  }
  if (typeof stored !== 'object' || stored === null) return undefined;
  const { messageId, topic, subject, body, correlationId, applicationProperties, partitionKey } = stored;
  if (!text(messageId) || !text(partitionKey) || document.id !== outboxDocumentId(messageId))
    return undefined;
  const checked = { topic, subject, body, correlationId, applicationProperties } as OutgoingMessage;
  if (outgoingProblem(checked) !== undefined) return undefined;
  return {
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
  };
}

/** The outbox documents among changes (a change feed page holds every kind of document). */
export function isOutboxDocument(document: unknown): document is OutboxDocument {
  const candidate = document as Partial<OutboxDocument> | null;
  return typeof candidate === 'object' && candidate !== null && candidate.type === OUTBOX_TYPE;
}
