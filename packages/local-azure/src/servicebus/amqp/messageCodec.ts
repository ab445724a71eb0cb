import { message as amqpMessage, types } from 'rhea';

import type { ApplicationProperties, BrokerMessage, OutgoingMessage } from '../broker';
import { CONDITIONS, PeerError } from './errors';

/**
 * Between AMQP messages and the broker model's messages. Only the fields the model keeps cross:
 * message-id, subject, correlation-id, content-type, to, reply-to, reply-to-group-id, group-id,
 * the partition key, application-properties, header ttl, and a body of one data section (what
 * @azure/service-bus sends for any body), and the scheduled enqueue time.
 * Anything the model would silently drop in a way that changes behaviour (an amqp-value body) is
 * refused instead.
 */

/** message-format of a batch: one AMQP message whose data sections are encoded messages. */
export const BATCH_FORMAT = 0x80013700;

const ANNOTATIONS = {
  enqueuedTime: 'x-opt-enqueued-time',
  sequenceNumber: 'x-opt-sequence-number',
  lockedUntil: 'x-opt-locked-until',
  scheduledEnqueueTime: 'x-opt-scheduled-enqueue-time',
  partitionKey: 'x-opt-partition-key',
} as const;

/** Service Bus's limit on SessionId, ReplyToSessionId and PartitionKey. */
const MAX_SESSION_ID_LENGTH = 128;

/** Application properties Service Bus adds to a dead-lettered message, and the SDK reads back. */
export const DEAD_LETTER_PROPERTIES = {
  reason: 'DeadLetterReason',
  description: 'DeadLetterErrorDescription',
} as const;

type Fields = Record<string, unknown>;

/** The messages in one transfer: one, or the contents of a batch. */
export function decodeTransfer(payload: Buffer, format: number): OutgoingMessage[] {
  if (format === 0) return [toOutgoingMessage(decode(payload))];
  if (format !== BATCH_FORMAT)
    throw new PeerError(CONDITIONS.notImplemented, `Message format ${format} is not supported.`);
  const envelope = decode(payload);
  const section = envelope.body as { typecode?: number; content?: unknown; multiple?: boolean } | undefined;
  if (section?.typecode !== 0x75)
    throw new PeerError(CONDITIONS.decodeError, 'A batch must carry its messages as data sections.');
  const parts = section.multiple ? (section.content as unknown[]) : [section.content];
  return parts.map((part) => {
    if (!Buffer.isBuffer(part)) throw new PeerError(CONDITIONS.decodeError, 'A batch entry is not binary.');
    return decodeMessage(part);
  });
}

/** One encoded message (a scheduled message in a $management request), its properties typed. */
export function decodeMessage(payload: Buffer): OutgoingMessage {
  return toOutgoingMessage(decode(payload), typedApplicationProperties(payload));
}

const ENCODED = Symbol('the encoded message');

/**
 * rhea decodes a message of format 0 before the link sees it and keeps its bytes nowhere, and its
 * decoding keeps a number's value, not its AMQP type (an int and a uint are both a number). So that
 * the peer can send application properties back as they came, rhea's decode is wrapped, once per
 * process, to keep the bytes on the decoded message under a symbol (not enumerable: invisible to
 * anything else in the process that uses rhea, such as @azure/service-bus).
 */
export function keepEncodedMessages(): void {
  const module = amqpMessage as unknown as { decode(buffer: Buffer): object; [ENCODED]?: true };
  if (module[ENCODED]) return;
  const decode = module.decode.bind(module);
  module.decode = (buffer: Buffer): object => {
    const decoded = decode(buffer);
    Object.defineProperty(decoded, ENCODED, { value: buffer });
    return decoded;
  };
  module[ENCODED] = true;
}

/** A message of format 0 as the peer received it: decoded, its typed properties read from its bytes. */
export function toReceivedMessage(decoded: Fields): OutgoingMessage {
  const encoded = (decoded as { [ENCODED]?: Buffer })[ENCODED];
  return toOutgoingMessage(decoded, encoded === undefined ? undefined : typedApplicationProperties(encoded));
}

/**
 * `fields` decoded by rhea (which keeps a number's value, not its AMQP type); `wire`, when the
 * encoded message was at hand, its application properties typed, to send back as they came.
 */
export function toOutgoingMessage(fields: Fields, wire?: Record<string, unknown>): OutgoingMessage {
  const annotations = (fields.message_annotations ?? {}) as Fields;
  const scheduledEnqueueTime = timestamp(annotations[ANNOTATIONS.scheduledEnqueueTime]);
  const messageId = identifier(fields.message_id, 'message-id');
  const correlationId = identifier(fields.correlation_id, 'correlation-id');
  return {
    ...(messageId === undefined ? {} : { messageId }),
    ...(typeof fields.subject === 'string' ? { subject: fields.subject } : {}),
    ...(correlationId === undefined ? {} : { correlationId }),
    ...(typeof fields.content_type === 'string' ? { contentType: fields.content_type } : {}),
    ...(fields.application_properties === undefined
      ? {}
      : {
          applicationProperties: decodeApplicationProperties(
            fields.application_properties,
            wire !== undefined,
          ),
        }),
    ...(wire === undefined ? {} : { wireProperties: wire }),
    ...systemProperties(fields, annotations),
    ...(typeof fields.ttl === 'number' && fields.ttl > 0 ? { timeToLiveMs: fields.ttl } : {}),
    ...(scheduledEnqueueTime === undefined ? {} : { scheduledEnqueueTime }),
    body: bodyOf(fields.body),
  };
}

export interface DeliveryState {
  /** Set when the message goes out under a lock (receive); absent for a peek. */
  lockedUntil?: number;
  /** A peek that asked for no body (`omit-message-body`): the message goes without one. */
  omitBody?: boolean;
}

/** A broker message as Service Bus puts it on the wire, encoded. */
export function encodeMessage(message: BrokerMessage, state: DeliveryState = {}): Buffer {
  const locked = state.lockedUntil !== undefined;
  const deadLetter = message.deadLetter;
  const properties: Record<string, unknown> = {
    ...wireOrModel(message),
    ...(deadLetter?.reason ? { [DEAD_LETTER_PROPERTIES.reason]: deadLetter.reason } : {}),
    ...(deadLetter?.description ? { [DEAD_LETTER_PROPERTIES.description]: deadLetter.description } : {}),
  };
  const encoded = amqpMessage.encode({
    // Deliveries that ended unsettled, as the model counts them: 0 on the first receive, and in a
    // peek of a message locked on its first delivery. @azure/service-bus exposes the header as it is.
    delivery_count: message.deliveryCount,
    ...(message.timeToLiveMs === undefined ? {} : { ttl: message.timeToLiveMs }),
    ...(message.messageId === undefined ? {} : { message_id: message.messageId }),
    ...(message.subject === undefined ? {} : { subject: message.subject }),
    ...(message.correlationId === undefined ? {} : { correlation_id: message.correlationId }),
    ...(message.contentType === undefined ? {} : { content_type: message.contentType }),
    ...(message.to === undefined ? {} : { to: message.to }),
    ...(message.replyTo === undefined ? {} : { reply_to: message.replyTo }),
    ...(message.replyToSessionId === undefined ? {} : { reply_to_group_id: message.replyToSessionId }),
    ...(message.sessionId === undefined ? {} : { group_id: message.sessionId }),
    ...(Object.keys(properties).length === 0 ? {} : { application_properties: properties }),
    message_annotations: {
      ...(message.partitionKey === undefined ? {} : { [ANNOTATIONS.partitionKey]: message.partitionKey }),
      [ANNOTATIONS.enqueuedTime]: new Date(message.enqueuedAt),
      [ANNOTATIONS.sequenceNumber]: types.wrap_long(message.sequenceNumber),
      ...(locked ? { [ANNOTATIONS.lockedUntil]: new Date(state.lockedUntil!) } : {}),
      ...(message.scheduledEnqueueTime === undefined
        ? {}
        : { [ANNOTATIONS.scheduledEnqueueTime]: new Date(message.scheduledEnqueueTime) }),
    },
    ...(state.omitBody === true
      ? {}
      : { body: dataSection(Buffer.isBuffer(message.body) ? message.body : Buffer.from(message.body)) }),
  });
  // rhea writes an amqp-value null section for a message without a body; a message whose body was
  // omitted has no body section at all (the SDK then reads its body as undefined).
  return state.omitBody === true && encoded.subarray(-4).equals(NULL_VALUE_SECTION)
    ? encoded.subarray(0, -4)
    : encoded;
}

/** An amqp-value section holding null: descriptor 0x00 0x53 0x77 (amqp:value:*), then null (0x40). */
const NULL_VALUE_SECTION = Buffer.from([0x00, 0x53, 0x77, 0x40]);

/** rhea types its section builders as `any`. */
const dataSection = amqpMessage.data_section as (data: Buffer) => unknown;

function decode(payload: Buffer): Fields {
  try {
    return amqpMessage.decode(payload);
  } catch (error) {
    throw new PeerError(CONDITIONS.decodeError, 'The message could not be decoded as AMQP.', {
      cause: error,
    });
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Text when the bytes are UTF-8 (JSON, as producers send it), so the host model sees a string. */
function bodyOf(body: unknown): string | Buffer {
  const section = body as { typecode?: number; content?: unknown; multiple?: boolean } | undefined;
  if (section?.typecode !== 0x75 || section.multiple || !Buffer.isBuffer(section.content)) {
    throw new PeerError(
      CONDITIONS.notImplemented,
      'The local peer keeps a body of one AMQP data section (what @azure/service-bus sends); amqp-value and amqp-sequence bodies are not implemented.',
    );
  }
  try {
    return utf8.decode(section.content);
  } catch {
    return section.content;
  }
}

/** An AMQP timestamp, as rhea decodes it (a Date), in ms; undefined when absent. */
function timestamp(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (value instanceof Date && Number.isFinite(value.getTime())) return value.getTime();
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  throw new PeerError(CONDITIONS.invalidField, 'x-opt-scheduled-enqueue-time must be a timestamp.');
}

/** Service Bus ids are strings; a numeric or uuid id is kept as its text. */
/**
 * To, ReplyTo, ReplyToSessionId, SessionId and PartitionKey, carried as sent. Service Bus refuses
 * session ids and partition keys over 128 characters, and a PartitionKey that differs from the
 * SessionId of the same message; so does the peer.
 */
function systemProperties(
  fields: Fields,
  annotations: Fields,
): Pick<OutgoingMessage, 'to' | 'replyTo' | 'replyToSessionId' | 'sessionId' | 'partitionKey'> {
  const text = (value: unknown, field: string, max?: number): string | undefined => {
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string')
      throw new PeerError(CONDITIONS.invalidField, `The ${field} must be a string.`);
    if (max !== undefined && value.length > max)
      throw new PeerError(
        CONDITIONS.invalidField,
        `The ${field} is ${value.length} characters long; Service Bus allows ${max}.`,
      );
    return value;
  };
  const sessionId = text(fields.group_id, 'group-id (SessionId)', MAX_SESSION_ID_LENGTH);
  const partitionKey = text(annotations[ANNOTATIONS.partitionKey], 'PartitionKey', MAX_SESSION_ID_LENGTH);
  if (sessionId !== undefined && partitionKey !== undefined && sessionId !== partitionKey)
    throw new PeerError(
      CONDITIONS.invalidField,
      'The PartitionKey of a message with a SessionId must be the SessionId, as Service Bus requires.',
    );
  const fieldsOf = {
    to: text(fields.to, 'to'),
    replyTo: text(fields.reply_to, 'reply-to'),
    replyToSessionId: text(
      fields.reply_to_group_id,
      'reply-to-group-id (ReplyToSessionId)',
      MAX_SESSION_ID_LENGTH,
    ),
    sessionId,
    partitionKey,
  };
  return Object.fromEntries(Object.entries(fieldsOf).filter(([, value]) => value !== undefined));
}

function identifier(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return String(value);
  if (Buffer.isBuffer(value) && value.length === 16) {
    const hex = value.toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
  throw new PeerError(CONDITIONS.invalidField, `The ${field} has a type the local peer does not model.`);
}

/**
 * The application properties of an encoded message as rhea's typed values (`Typed`: an int stays
 * an int, a described value keeps its descriptor), undefined when it has none.
 */
function typedApplicationProperties(payload: Buffer): Record<string, unknown> | undefined {
  // rhea's types module has the Reader its decoder uses; its typings leave it out.
  const Reader = (
    types as unknown as { Reader: new (buffer: Buffer) => { remaining(): number; read(): TypedValue } }
  ).Reader;
  const reader = new Reader(payload);
  try {
    while (reader.remaining()) {
      const section = reader.read();
      const descriptor = section.descriptor?.value;
      if (descriptor !== 0x74 && descriptor !== 'amqp:application-properties:map') continue;
      const entries = section.value as TypedValue[];
      const result: Record<string, unknown> = {};
      for (let i = 0; i + 1 < entries.length; i += 2) result[String(entries[i]!.value)] = entries[i + 1];
      return result;
    }
  } catch {
    // decode() has read this message already; a part it could read is a part this can.
  }
  return undefined;
}

interface TypedValue {
  value: unknown;
  descriptor?: { value: unknown };
}

/**
 * What goes back on the wire for each property: the value as it came (typed) while the model's
 * value is still the one it decodes to; the model's when abandon changed it or nothing came typed.
 */
function wireOrModel(message: BrokerMessage): Record<string, unknown> {
  const model = message.applicationProperties ?? {};
  const wire = message.wireProperties ?? {};
  const result: Record<string, unknown> = {};
  for (const [key, typed] of Object.entries(wire)) {
    // A value the model left out (a described type, a uuid, bytes) or still holds as it came.
    if (!(key in model) || sameValue(types.unwrap(typed, true), model[key])) result[key] = typed;
  }
  for (const [key, value] of Object.entries(model)) if (!(key in result)) result[key] = value;
  return result;
}

/** The property types the model keeps: what JavaScript has (a Date is an AMQP timestamp). */
function isModelled(property: unknown): property is string | number | boolean | Date {
  return (
    typeof property === 'string' ||
    typeof property === 'number' ||
    typeof property === 'boolean' ||
    property instanceof Date
  );
}

function sameValue(a: unknown, b: unknown): boolean {
  return a instanceof Date && b instanceof Date ? a.getTime() === b.getTime() : a === b;
}

/**
 * Application properties, or the properties an abandon modifies, as the model keeps them. With
 * `typedWire` (the encoded message's typed properties are kept beside), a value of another type
 * (the .NET client's DateTimeOffset, TimeSpan, Uri as described types, a Guid as a uuid, bytes) is
 * left to those and out of the model; otherwise it is refused.
 */
export function decodeApplicationProperties(value: unknown, typedWire = false): ApplicationProperties {
  if (typeof value !== 'object' || value === null)
    throw new PeerError(CONDITIONS.decodeError, 'application-properties must be a map.');
  const result: ApplicationProperties = {};
  for (const [key, property] of Object.entries(value as Fields)) {
    if (typedWire && !isModelled(property)) continue;
    if (!isModelled(property)) {
      throw new PeerError(
        CONDITIONS.notImplemented,
        `Application property '${key}' is not a string, number, boolean or timestamp; the local peer models only those.`,
      );
    }
    result[key] = property;
  }
  return result;
}
