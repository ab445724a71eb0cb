import type { Connection } from 'rhea';

import { logUnexpected } from '../../localHttp';
import { MessageLockLostError, MessageNotFoundError } from '../broker';
import { RuleError } from '../rules';
import { SessionCannotBeLockedError, SessionIdRequiredError, SessionLockLostError } from '../sessions';

/**
 * The AMQP error conditions the peer answers with. @azure/service-bus turns a condition into a
 * ServiceBusError code (amqp:not-found → MessagingEntityNotFound, com.microsoft:message-lock-lost →
 * MessageLockLost, amqp:link:message-size-exceeded → MessageSizeExceeded), so the condition, not the description, is what callers branch on.
 */
export const CONDITIONS = {
  notFound: 'amqp:not-found',
  unauthorizedAccess: 'amqp:unauthorized-access',
  notAllowed: 'amqp:not-allowed',
  notImplemented: 'amqp:not-implemented',
  decodeError: 'amqp:decode-error',
  invalidField: 'amqp:invalid-field',
  internalError: 'amqp:internal-error',
  messageLockLost: 'com.microsoft:message-lock-lost',
  messageNotFound: 'com.microsoft:message-not-found',
  messageSizeExceeded: 'amqp:link:message-size-exceeded',
  deadLetter: 'com.microsoft:dead-letter',
  /** The SDK's SessionLockLost: the session lock ran out, or another receiver holds the session now. */
  sessionLockLost: 'com.microsoft:session-lock-lost',
  /** The SDK's SessionCannotBeLocked: another receiver holds the session. */
  sessionCannotBeLocked: 'com.microsoft:session-cannot-be-locked',
  /** The SDK's ServiceTimeout: acceptNextSession found no session within its timeout. */
  timeout: 'com.microsoft:timeout',
  entityAlreadyExists: 'com.microsoft:entity-already-exists',
  resourceLimitExceeded: 'amqp:resource-limit-exceeded',
} as const;
export type Condition = (typeof CONDITIONS)[keyof typeof CONDITIONS];

/** The HTTP-like status a $management or $cbs response carries for each condition. */
export const STATUS_OF: Readonly<Record<Condition, number>> = {
  [CONDITIONS.notFound]: 404,
  [CONDITIONS.unauthorizedAccess]: 401,
  [CONDITIONS.notAllowed]: 403,
  [CONDITIONS.notImplemented]: 501,
  [CONDITIONS.decodeError]: 400,
  [CONDITIONS.invalidField]: 400,
  [CONDITIONS.internalError]: 500,
  [CONDITIONS.messageLockLost]: 410,
  [CONDITIONS.messageNotFound]: 404,
  [CONDITIONS.messageSizeExceeded]: 413,
  [CONDITIONS.deadLetter]: 400,
  [CONDITIONS.sessionLockLost]: 410,
  [CONDITIONS.sessionCannotBeLocked]: 410,
  [CONDITIONS.timeout]: 408,
  [CONDITIONS.entityAlreadyExists]: 409,
  [CONDITIONS.resourceLimitExceeded]: 403,
};

/** A request the peer refuses; it travels back to the client as an AMQP error, never as a crash. */
export class PeerError extends Error {
  constructor(
    readonly condition: Condition,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'PeerError';
  }

  /** The error as an AMQP `error` field: { condition, description }. */
  toAmqp(): { condition: Condition; description: string } {
    return { condition: this.condition, description: this.message };
  }
}

/** Any failure as a PeerError: unexpected ones become amqp:internal-error, keeping the cause. */
export function asPeerError(error: unknown): PeerError {
  if (error instanceof PeerError) return error;
  if (error instanceof MessageLockLostError)
    return new PeerError(CONDITIONS.messageLockLost, error.message, { cause: error });
  if (error instanceof MessageNotFoundError)
    return new PeerError(CONDITIONS.messageNotFound, error.message, { cause: error });
  if (error instanceof SessionLockLostError)
    return new PeerError(CONDITIONS.sessionLockLost, error.message, { cause: error });
  if (error instanceof SessionCannotBeLockedError)
    return new PeerError(CONDITIONS.sessionCannotBeLocked, error.message, { cause: error });
  // Service Bus answers it as an InvalidOperationException: amqp:not-allowed.
  if (error instanceof SessionIdRequiredError)
    return new PeerError(CONDITIONS.notAllowed, error.message, { cause: error });
  if (error instanceof RuleError)
    return new PeerError(RULE_CONDITIONS[error.code], error.message, { cause: error });
  const message = error instanceof Error ? error.message : String(error);
  return new PeerError(CONDITIONS.internalError, message, { cause: error });
}

const RULE_CONDITIONS: Readonly<Record<RuleError['code'], Condition>> = {
  invalid: CONDITIONS.invalidField,
  exists: CONDITIONS.entityAlreadyExists,
  'not-found': CONDITIONS.notFound,
  unsupported: CONDITIONS.notImplemented,
  quota: CONDITIONS.resourceLimitExceeded,
};

/**
 * Runs what the peer does for a connection: an unexpected failure closes that connection with
 * amqp:internal-error, logged without what the client sent, and never ends the process. Outside the
 * handling of a frame (a timer, a wait that ended) nothing else would catch it; inside, rhea would
 * close the connection too, but as a frame it could not read.
 */
export function closeOnFailure(connection: Connection, run: () => void): void {
  try {
    run();
  } catch (error) {
    logUnexpected('local Service Bus peer', error);
    connection.close(
      new PeerError(
        CONDITIONS.internalError,
        'The local peer failed on this connection; its log says where.',
      ).toAmqp(),
    );
  }
}
