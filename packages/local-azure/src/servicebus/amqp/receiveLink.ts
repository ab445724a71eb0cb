import { type EventContext, message as amqpMessage, type Sender } from 'rhea';

import type { Entity, LockedMessage } from '../broker';
import { type SessionLease, SessionLockLostError } from '../sessions';
import { asPeerError, closeOnFailure } from './errors';
import { deliveryTagOf, lockTokenOfDeliveryTag } from './lockTokens';
import { DEAD_LETTER_PROPERTIES, decodeApplicationProperties, encodeMessage } from './messageCodec';

/**
 * A receiver's link, seen from the peer (an AMQP sender): it locks a message only as it hands it
 * out, one for every unit of credit the client grants, and applies the client's outcome when the
 * client settles:
 *   accepted                        → complete
 *   released                        → available again, the delivery not counted (the receiver
 *                                     never had it: the .NET client releases what arrives on credit
 *                                     left after a receive timed out; Service Bus does not count it)
 *   modified                        → abandon (the delivery counts, delivery-failed set or not: the
 *                                     SDKs' abandonMessage sends modified without it, and Service
 *                                     Bus counts an abandon); the modified outcome's
 *                                     message-annotations are the properties to modify
 *   modified undeliverable-here     → defer (received again only by sequence number)
 *   rejected com.microsoft:dead-letter (info DeadLetterReason, DeadLetterErrorDescription, and the
 *            properties to modify) → dead-letter
 * In receiveAndDelete a message is completed as it is sent, and the transfer goes settled: there is
 * nothing to settle. In peek-lock (rcv-settle-mode second) the client waits for the peer to settle the
 * delivery: settled without error = done; settled with a rejected state and an error = the SDK throws
 * (com.microsoft:message-lock-lost when the lock had run out).
 * A session receiver's link (sessionLink.ts) takes only its session's messages, and settles only
 * while it holds the session: once the session lock is lost, the link is detached with
 * com.microsoft:session-lock-lost.
 */
export function serveReceiveLink(
  sender: Sender,
  entity: Entity,
  receiveAndDelete = false,
  lease?: SessionLease,
): { stop: () => void } {
  let waiting: AbortController | undefined;

  const offer = (locked: LockedMessage): void => {
    if (receiveAndDelete) {
      // Gone from the entity as it is handed out; the transfer goes pre-settled (the link's mode).
      sender.send(encodeMessage(entity.complete(locked.lockToken)), deliveryTagOf(locked.lockToken), 0);
      return;
    }
    sender.send(
      encodeMessage(locked.message, { lockedUntil: locked.lockedUntil }),
      deliveryTagOf(locked.lockToken),
      0,
    );
  };

  // Locks only within the credit the receiver granted: a message locked for a link that cannot take
  // it would stay invisible to other receivers for a whole lock. rhea lowers its `credit` only when
  // it writes a transfer, so the credit left is the receiver's limit (rhea's delivery count + credit,
  // which a flow sets) minus the deliveries this link handed out, written or not.
  let handedOut = 0;
  const creditLeft = (): number => {
    const link = sender as unknown as { credit: number; delivery_count: number };
    // A drain advances rhea's delivery count over the credit nobody used.
    handedOut = Math.max(handedOut, link.delivery_count);
    return link.credit + link.delivery_count - handedOut;
  };
  const canLock = (): boolean => sender.is_open() && sender.sendable() && creditLeft() > 0;

  const fill = (): void => {
    while (canLock()) {
      const locked = lease ? lease.receive() : entity.receive();
      if (!locked) break;
      offer(locked);
      handedOut++;
    }
    if (lease && !lease.held) {
      stopWaiting();
      sender.close(asPeerError(new SessionLockLostError(lease.sessionId)).toAmqp());
      return;
    }
    if (canLock() && !waiting) {
      const controller = new AbortController();
      waiting = controller;
      void entity.changed(controller.signal).then(() =>
        closeOnFailure(sender.connection, () => {
          if (waiting !== controller) return;
          waiting = undefined;
          fill();
        }),
      );
    }
  };

  const stopWaiting = (): void => {
    waiting?.abort();
    waiting = undefined;
  };

  // A failure of the peer's own while handing out closes the connection as internal-error (rhea
  // would call it a frame it could not read).
  sender.on('sendable', () => closeOnFailure(sender.connection, fill));
  sender.on('sender_draining', () =>
    closeOnFailure(sender.connection, () => {
      stopWaiting();
      fill();
      sender.set_drained(true);
    }),
  );
  sender.on('sender_close', stopWaiting);

  const settle = (context: EventContext, kind: OutcomeKind, apply: Settlement): void =>
    settleDelivery(context, kind, (lockToken, state) => {
      lease?.assertHeld();
      apply(lockToken, state);
    });

  sender.on('accepted', (context: EventContext) =>
    settle(context, 'accepted', (lockToken) => void entity.complete(lockToken)),
  );
  sender.on('released', (context: EventContext) =>
    settle(context, 'released', (lockToken) => entity.release(lockToken)),
  );
  sender.on('modified', (context: EventContext) =>
    settle(context, 'modified', (lockToken, state) => {
      // abandonMessage and deferMessage send the properties to modify as the outcome's
      // message-annotations; a deferral is the modified outcome with undeliverable-here.
      const modify = state.message_annotations;
      const properties = modify === undefined ? undefined : decodeApplicationProperties(modify);
      if (state.undeliverable_here === true) entity.defer(lockToken, properties);
      else entity.abandon(lockToken, undefined, properties);
    }),
  );
  sender.on('rejected', (context: EventContext) =>
    settle(context, 'rejected', (lockToken, state) => {
      const error = (state.error ?? {}) as { condition?: unknown; description?: unknown; info?: unknown };
      const info = (error.info ?? {}) as Record<string, unknown>;
      // Service Bus dead-letters any rejected message; the SDK's own rejection carries the reason.
      const reason = text(info[DEAD_LETTER_PROPERTIES.reason]) ?? text(error.condition) ?? '';
      const description = text(info[DEAD_LETTER_PROPERTIES.description]) ?? text(error.description) ?? '';
      // The rest of the info is the properties to modify (deadLetterMessage's other options).
      const modify = Object.fromEntries(
        Object.entries(info).filter(
          ([key]) => key !== DEAD_LETTER_PROPERTIES.reason && key !== DEAD_LETTER_PROPERTIES.description,
        ),
      );
      const properties = Object.keys(modify).length === 0 ? undefined : decodeApplicationProperties(modify);
      entity.deadLetter(lockToken, reason, description, properties);
    }),
  );

  return { stop: stopWaiting };
}

type Outcome = Record<string, unknown>;
type OutcomeKind = 'accepted' | 'released' | 'modified' | 'rejected';

type Settlement = (lockToken: string, state: Outcome) => void;

/**
 * Settles with the client's own outcome when it was applied (without an error, which the SDK would
 * throw), or with rejected + the error when it was not.
 */
function settleDelivery(context: EventContext, kind: OutcomeKind, apply: Settlement): void {
  const delivery = context.delivery!;
  try {
    apply(lockTokenOfDeliveryTag(delivery.tag), delivery.remote_state ?? {});
    delivery.update(true, outcomes[kind]().described());
  } catch (error) {
    delivery.update(true, outcomes.rejected({ error: asPeerError(error).toAmqp() }).described());
  }
}

/** rhea builds outcomes, but its typings do not declare the builders. */
const outcomes = amqpMessage as unknown as Record<
  OutcomeKind,
  (fields?: { error: { condition: string; description: string } }) => { described(): unknown }
>;

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
