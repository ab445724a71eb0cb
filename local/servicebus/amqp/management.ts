import { types } from 'rhea';

import type { Entity, Topic } from '../broker';
import { CONDITIONS, PeerError } from './errors';
import { lockTokenOfUuid } from './lockTokens';
import { decodeApplicationProperties, decodeMessage, encodeMessage } from './messageCodec';
import type { ManagementRequest, ManagementResponse } from './requestResponse';

/**
 * The $management operations the clients use on a subscription or its dead-letter queue:
 *   com.microsoft:peek-message         peekMessages (from-sequence-number, message-count, omit-message-body)
 *   com.microsoft:renew-lock           renewMessageLock, and the receivers' auto lock renewal
 *   com.microsoft:update-disposition   settling when the receive link is gone, and settling a
 *                                      message received by sequence number (completed, abandoned,
 *                                      suspended = dead-lettered, defered = deferred, as spelled)
 *   com.microsoft:receive-by-sequence-number   receiving deferred messages (peek-lock, or
 *                                      receiveAndDelete when receiver-settle-mode is 0)
 * and on a topic (handleTopicRequest): schedule-message and cancel-scheduled-message. Everything
 * else (sessions, rules) is answered amqp:not-implemented.
 */
export const OPERATIONS = {
  peek: 'com.microsoft:peek-message',
  renewLock: 'com.microsoft:renew-lock',
  updateDisposition: 'com.microsoft:update-disposition',
  receiveBySequenceNumber: 'com.microsoft:receive-by-sequence-number',
} as const;

/** The $management operations of a topic: a sender's ScheduleMessages and CancelScheduledMessages. */
export const TOPIC_OPERATIONS = {
  schedule: 'com.microsoft:schedule-message',
  cancelScheduled: 'com.microsoft:cancel-scheduled-message',
} as const;

/** Service Bus takes at most this many messages (or sequence numbers) in one request. */
const MAX_PER_REQUEST = 4500;

export function handleTopicRequest(topic: Topic, request: ManagementRequest): ManagementResponse {
  switch (request.operation) {
    case TOPIC_OPERATIONS.schedule: {
      const sequenceNumbers = entries(request.body.messages, 'messages').map((entry) => {
        const bytes = (entry as { message?: unknown } | null)?.message;
        if (!Buffer.isBuffer(bytes))
          throw new PeerError(CONDITIONS.invalidField, 'Each of messages must carry its encoded message.');
        const message = decodeMessage(bytes);
        if (message.scheduledEnqueueTime === undefined)
          throw new PeerError(
            CONDITIONS.invalidField,
            'A message to schedule must carry x-opt-scheduled-enqueue-time.',
          );
        return topic.send(message).sequenceNumber!;
      });
      return {
        statusCode: 200,
        body: { 'sequence-numbers': types.wrap_array(sequenceNumbers, 0x81, undefined) },
      };
    }
    case TOPIC_OPERATIONS.cancelScheduled:
      for (const value of entries(request.body['sequence-numbers'], 'sequence-numbers'))
        topic.cancelScheduled(integer(value, 'sequence-numbers'));
      return { statusCode: 200 };
    default:
      throw new PeerError(
        CONDITIONS.notImplemented,
        `The local peer does not implement '${request.operation ?? '(no operation)'}' on a topic.`,
      );
  }
}

function entries(value: unknown, field: string): unknown[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_PER_REQUEST)
    throw new PeerError(
      CONDITIONS.invalidField,
      `${field} must be an array of 1 to ${MAX_PER_REQUEST} entries.`,
    );
  return value;
}

export function handleManagementRequest(entity: Entity, request: ManagementRequest): ManagementResponse {
  if (!Object.values<string | undefined>(OPERATIONS).includes(request.operation))
    throw new PeerError(
      CONDITIONS.notImplemented,
      `The local peer does not implement '${request.operation ?? '(no operation)'}' here.`,
    );
  switch (request.operation) {
    case OPERATIONS.peek:
      return peek(entity, request.body);
    case OPERATIONS.renewLock:
      return {
        statusCode: 200,
        // An AMQP array of timestamps, as Service Bus answers (the .NET client reads a DateTime[]).
        body: {
          expirations: types.wrap_array(
            lockTokens(request.body).map((token) => entity.renewLock(token)),
            0x83,
            undefined,
          ),
        },
      };
    case OPERATIONS.receiveBySequenceNumber:
      return receiveBySequenceNumber(entity, request.body);
    default:
      return updateDisposition(entity, request.body);
  }
}

function receiveBySequenceNumber(entity: Entity, body: Record<string, unknown>): ManagementResponse {
  const receiveAndDelete = body['receiver-settle-mode'] === 0;
  const messages = entries(body['sequence-numbers'], 'sequence-numbers').map((value) => {
    const locked = entity.receiveDeferred(integer(value, 'sequence-numbers'));
    if (receiveAndDelete) return { message: encodeMessage(entity.complete(locked.lockToken)) };
    return {
      message: encodeMessage(locked.message, { lockedUntil: locked.lockedUntil }),
      'lock-token': types.wrap_uuid(Buffer.from(locked.lockToken.replace(/-/g, ''), 'hex')),
    };
  });
  return { statusCode: 200, body: { messages } };
}

function peek(entity: Entity, body: Record<string, unknown>): ManagementResponse {
  const from = integer(body['from-sequence-number'], 'from-sequence-number');
  const count = integer(body['message-count'], 'message-count');
  const messages = entity
    .peek()
    .filter((message) => message.sequenceNumber >= from)
    .sort((a, b) => a.sequenceNumber - b.sequenceNumber)
    .slice(0, Math.max(0, count));
  // No message is 204, which the SDK reads as "nothing more to peek".
  if (messages.length === 0) return { statusCode: 204, statusDescription: 'No messages to peek.' };
  // peekMessages({ omitMessageBody: true }): the messages without their bodies.
  const omitBody = body['omit-message-body'] === true;
  return {
    statusCode: 200,
    body: { messages: messages.map((message) => ({ message: encodeMessage(message, { omitBody }) })) },
  };
}

function updateDisposition(entity: Entity, body: Record<string, unknown>): ManagementResponse {
  const status = body['disposition-status'];
  const modify = body['properties-to-modify'];
  const propertiesToModify = modify === undefined ? undefined : decodeApplicationProperties(modify);
  for (const token of lockTokens(body)) {
    switch (status) {
      case 'completed':
        entity.complete(token);
        break;
      case 'abandoned':
        entity.abandon(token, undefined, propertiesToModify);
        break;
      case 'defered':
        entity.defer(token, propertiesToModify);
        break;
      case 'suspended':
        entity.deadLetter(
          token,
          text(body['deadletter-reason']),
          text(body['deadletter-description']),
          propertiesToModify,
        );
        break;
      default:
        throw new PeerError(
          CONDITIONS.notImplemented,
          `disposition-status '${String(status)}' is not implemented by the local peer.`,
        );
    }
  }
  return { statusCode: 200 };
}

function lockTokens(body: Record<string, unknown>): string[] {
  const tokens = body['lock-tokens'];
  if (!Array.isArray(tokens) || tokens.length === 0)
    throw new PeerError(CONDITIONS.invalidField, 'lock-tokens must be a non-empty array of uuids.');
  return tokens.map(lockTokenOfUuid);
}

function integer(value: unknown, field: string): number {
  // The AMQP long arrives as a number, or as 8 bytes when it is beyond 2^53.
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  if (Buffer.isBuffer(value) && value.length === 8) return Number(value.readBigInt64BE());
  throw new PeerError(CONDITIONS.invalidField, `${field} must be an integer.`);
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}
