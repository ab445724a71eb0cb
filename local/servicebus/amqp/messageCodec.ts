import { message as amqpMessage, types } from 'rhea';

import type { ApplicationProperties, BrokerMessage, OutgoingMessage } from '../broker';
import { CONDITIONS, PeerError } from './errors';

/**
 * Between AMQP messages and the broker model's messages. Only the fields the model keeps cross:
 * message-id, subject, correlation-id, content-type, application-properties, header ttl, and a body
 * of one data section (what @azure/service-bus sends for any body). Anything the model would
 * silently drop in a way that changes behaviour (a scheduled enqueue time, an amqp-value body) is
 * refused instead.
 */

/** message-format of a batch: one AMQP message whose data sections are encoded messages. */
export const BATCH_FORMAT = 0x80013700;

const ANNOTATIONS = {
  enqueuedTime: 'x-opt-enqueued-time',
  sequenceNumber: 'x-opt-sequence-number',
  lockedUntil: 'x-opt-locked-until',
  scheduledEnqueueTime: 'x-opt-scheduled-enqueue-time',
} as const;

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
    return toOutgoingMessage(decode(part));
  });
}

export function toOutgoingMessage(fields: Fields): OutgoingMessage {
  const annotations = (fields.message_annotations ?? {}) as Fields;
  if (annotations[ANNOTATIONS.scheduledEnqueueTime] !== undefined)
    throw new PeerError(
      CONDITIONS.notImplemented,
      'Scheduled messages are not implemented by the local peer.',
    );
  const messageId = identifier(fields.message_id, 'message-id');
  const correlationId = identifier(fields.correlation_id, 'correlation-id');
  return {
    ...(messageId === undefined ? {} : { messageId }),
    ...(typeof fields.subject === 'string' ? { subject: fields.subject } : {}),
    ...(correlationId === undefined ? {} : { correlationId }),
    ...(typeof fields.content_type === 'string' ? { contentType: fields.content_type } : {}),
    ...(fields.application_properties === undefined
      ? {}
      : { applicationProperties: decodeApplicationProperties(fields.application_properties) }),
    ...(typeof fields.ttl === 'number' && fields.ttl > 0 ? { timeToLiveMs: fields.ttl } : {}),
    body: bodyOf(fields.body),
  };
}

export interface DeliveryState {
  /** Set when the message goes out under a lock (receive); absent for a peek. */
  lockedUntil?: number;
}

/** A broker message as Service Bus puts it on the wire, encoded. */
export function encodeMessage(message: BrokerMessage, state: DeliveryState = {}): Buffer {
  const locked = state.lockedUntil !== undefined;
  const deadLetter = message.deadLetter;
  const properties: ApplicationProperties = {
    ...message.applicationProperties,
    ...(deadLetter?.reason ? { [DEAD_LETTER_PROPERTIES.reason]: deadLetter.reason } : {}),
    ...(deadLetter?.description ? { [DEAD_LETTER_PROPERTIES.description]: deadLetter.description } : {}),
  };
  return amqpMessage.encode({
    // Deliveries that ended unsettled, as the model counts them: 0 on the first receive, and in a
    // peek of a message locked on its first delivery. @azure/service-bus exposes the header as it is.
    delivery_count: message.deliveryCount,
    ...(message.timeToLiveMs === undefined ? {} : { ttl: message.timeToLiveMs }),
    ...(message.messageId === undefined ? {} : { message_id: message.messageId }),
    ...(message.subject === undefined ? {} : { subject: message.subject }),
    ...(message.correlationId === undefined ? {} : { correlation_id: message.correlationId }),
    ...(message.contentType === undefined ? {} : { content_type: message.contentType }),
    ...(Object.keys(properties).length === 0 ? {} : { application_properties: properties }),
    message_annotations: {
      [ANNOTATIONS.enqueuedTime]: new Date(message.enqueuedAt),
      [ANNOTATIONS.sequenceNumber]: types.wrap_long(message.sequenceNumber),
      ...(locked ? { [ANNOTATIONS.lockedUntil]: new Date(state.lockedUntil!) } : {}),
    },
    body: dataSection(Buffer.isBuffer(message.body) ? message.body : Buffer.from(message.body)),
  });
}

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

/** Service Bus ids are strings; a numeric or uuid id is kept as its text. */
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

/** Application properties, or the properties an abandon modifies, as the model keeps them. */
export function decodeApplicationProperties(value: unknown): ApplicationProperties {
  if (typeof value !== 'object' || value === null)
    throw new PeerError(CONDITIONS.decodeError, 'application-properties must be a map.');
  const result: ApplicationProperties = {};
  for (const [key, property] of Object.entries(value as Fields)) {
    if (
      typeof property !== 'string' &&
      typeof property !== 'number' &&
      typeof property !== 'boolean' &&
      !(property instanceof Date)
    ) {
      throw new PeerError(
        CONDITIONS.notImplemented,
        `Application property '${key}' is not a string, number, boolean or timestamp; the local peer models only those.`,
      );
    }
    result[key] = property;
  }
  return result;
}
