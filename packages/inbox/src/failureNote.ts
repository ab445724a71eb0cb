import type { Consumer } from './consumer';
import type { Delivery } from './delivery';
import { bounded, PoisonMessageError } from './errors';
import { markerLocation, type ProcessDependencies } from './process';

/**
 * Why a message's last delivery failed, kept next to where its marker would be. Service Bus
 * dead-letters a message whose deliveries ran out as `MaxDeliveryCountExceeded`, whatever the
 * cause, and the Node.js trigger cannot dead-letter with a reason of its own
 * (docs/poison-on-first-delivery.md). So on the last delivery the host makes, a consumer whose
 * handler rejected the message (`PoisonMessageError` once the message was read: a handler's
 * rejection, too many writes, a batch the store refused) or failed with an unexpected error writes
 * this note; `npm run dead-letters` reads it to say what a resubmit would do. A message the
 * consumer cannot read needs no note (the tool reads it the same way), and a failure of the store
 * itself (transient, or the breaker open) gets none: the note would fail the same way.
 *
 * The note is not part of the inbox's guarantee: it is written after the failure, outside any
 * batch, best effort, and expires with the Cosmos DB TTL after INBOX_RETENTION, as long as the
 * marker it stands in for would have been kept.
 */
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing)
export const FAILURE_NOTE_TYPE = 'inbox-failure-note';

export type FailureNote = {
  /** The marker's id with `inbox-failure-` for `inbox-`: one note per marker key, the last failure's. */
  id: string;
  partitionKey: string;
  type: typeof FAILURE_NOTE_TYPE;
  consumer: string;
  messageId: string;
  /** The failed message's, so that a resubmit with another body under the same MessageId is told apart. */
  payloadHash: string;
  /** The PoisonMessageError's reason, or `failed` for any other error. */
  reason: string;
  /** The error's name and the first line of its message, bounded: the consumer's words, never the body. */
  error: string;
  deliveryCount: number;
  failedAt: string;
  /** Seconds: INBOX_RETENTION (the container has TTL on, per item). */
  ttl: number;
};

export function failureNoteId(markerId: string): string {
  return `inbox-failure-${markerId.slice('inbox-'.length)}`;
}

/**
 * The note for a failed delivery, or undefined when none is kept: a versioned consumer (no marker,
 * nothing to stand in for) or a message its consumer cannot read.
 */
export function failureNote(
  consumer: Consumer,
  delivery: Delivery,
  error: unknown,
  deps: Pick<ProcessDependencies, 'settings' | 'now'>,
): FailureNote | undefined {
  // Stryker disable next-line ConditionalExpression: equivalent: a versioned consumer has no partitionKey, so markerLocation throws and no note is kept all the same
  if (consumer.kind !== 'inbox') return undefined;
  let location;
  try {
    location = markerLocation(consumer, delivery);
  } catch {
    // It cannot read the message (poison: markerLocation says so for any failure), and neither can a note.
    return undefined;
  }
  const { name, message } = error instanceof Error ? error : { name: typeof error, message: String(error) };
  return {
    id: failureNoteId(location.id),
    partitionKey: location.partitionKey,
    type: FAILURE_NOTE_TYPE,
    consumer: consumer.name,
    messageId: delivery.messageId!,
    payloadHash: location.payloadHash,
    reason: error instanceof PoisonMessageError ? error.reason : 'failed',
    error: bounded(`${name}: ${message.split('\n', 1)[0]}`, 300),
    deliveryCount: delivery.deliveryCount,
    failedAt: deps.now().toISOString(),
    ttl: deps.settings.inbox.retentionSeconds,
  };
}
