import { types } from 'rhea';

import type { Entity, Topic } from '../broker';
import { MAX_SESSION_ID_LENGTH, type Sessions } from '../sessions';
import { CONDITIONS, PeerError } from './errors';
import { lockTokenOfUuid } from './lockTokens';
import { decodeApplicationProperties, decodeMessage, encodeMessage } from './messageCodec';
import { MAX_MESSAGE_SIZE_BYTES } from './publishLink';
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
 *   com.microsoft:renew-session-lock   a session receiver's renewSessionLock (and its auto renewal):
 *                                      answers the new expiration, a timestamp
 *   com.microsoft:get-session-state, com.microsoft:set-session-state   session state, bytes
 *                                      (null clears it); only while some receiver holds the session
 * A session receiver's peek, receive-by-sequence-number and update-disposition carry its
 * session-id: they see that session's messages, and fail with com.microsoft:session-lock-lost once
 * the session is not held.
 * And on a topic (handleTopicRequest): schedule-message and cancel-scheduled-message. Everything
 * else is answered amqp:not-implemented.
 */
export const OPERATIONS = {
  peek: 'com.microsoft:peek-message',
  renewLock: 'com.microsoft:renew-lock',
  updateDisposition: 'com.microsoft:update-disposition',
  receiveBySequenceNumber: 'com.microsoft:receive-by-sequence-number',
  renewSessionLock: 'com.microsoft:renew-session-lock',
  getSessionState: 'com.microsoft:get-session-state',
  setSessionState: 'com.microsoft:set-session-state',
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
    case OPERATIONS.renewSessionLock:
      // A timestamp, which the SDK reads as the new sessionLockedUntilUtc.
      return {
        statusCode: 200,
        body: { expiration: new Date(sessionsOf(entity).renew(sessionIdOf(request.body)!)) },
      };
    case OPERATIONS.getSessionState:
      return {
        statusCode: 200,
        body: { 'session-state': sessionsOf(entity).state(sessionIdOf(request.body)!) ?? null },
      };
    case OPERATIONS.setSessionState:
      sessionsOf(entity).setState(sessionIdOf(request.body)!, sessionState(request.body['session-state']));
      return { statusCode: 200 };
    default:
      return updateDisposition(entity, request.body);
  }
}

function receiveBySequenceNumber(entity: Entity, body: Record<string, unknown>): ManagementResponse {
  const receiveAndDelete = body['receiver-settle-mode'] === 0;
  // A session receiver's request names its session: only that session's messages, under its lock.
  const sessionId = sessionIdOf(body, false);
  const lease = sessionId === undefined ? undefined : sessionsOf(entity).heldLease(sessionId);
  const messages = entries(body['sequence-numbers'], 'sequence-numbers').map((value) => {
    const sequenceNumber = integer(value, 'sequence-numbers');
    const locked = lease ? lease.receiveDeferred(sequenceNumber) : entity.receiveDeferred(sequenceNumber);
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
  const sessionId = sessionIdOf(body, false);
  const messages = entity
    .peek()
    .filter((message) => sessionId === undefined || message.sessionId === sessionId)
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
  // A message received in a session is settled only while the session is held.
  const sessionId = sessionIdOf(body, false);
  if (sessionId !== undefined && entity.sessions) entity.sessions.heldLease(sessionId);
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

function sessionsOf(entity: Entity): Sessions {
  if (!entity.sessions)
    throw new PeerError(
      CONDITIONS.notAllowed,
      `'${entity.path}' does not require sessions: it has no session locks or session state.`,
    );
  return entity.sessions;
}

/** The request's session-id: required by the session operations, optional on the others. */
function sessionIdOf(body: Record<string, unknown>, required = true): string | undefined {
  const sessionId = body['session-id'];
  if (sessionId === undefined || sessionId === null) {
    if (required) throw new PeerError(CONDITIONS.invalidField, 'session-id is required.');
    return undefined;
  }
  if (typeof sessionId !== 'string' || sessionId.length > MAX_SESSION_ID_LENGTH)
    throw new PeerError(
      CONDITIONS.invalidField,
      `session-id must be a string of at most ${MAX_SESSION_ID_LENGTH} characters.`,
    );
  return sessionId;
}

/** Bytes, or null to clear: Service Bus bounds the state by its message size limit. */
function sessionState(value: unknown): Buffer | undefined {
  if (value === null || value === undefined) return undefined;
  if (!Buffer.isBuffer(value) || value.length > MAX_MESSAGE_SIZE_BYTES)
    throw new PeerError(
      CONDITIONS.invalidField,
      `session-state must be binary of at most ${MAX_MESSAGE_SIZE_BYTES} bytes, or null.`,
    );
  return value;
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
