/**
 * Why a duplicate reached the inbox. Service Bus logs nothing about the duplicates it lets through
 * (nor those it drops), so the inbox names one cause for each duplicate it absorbs, from facts it
 * holds when it sees the duplicate: this delivery (its DeliveryCount, the marks the resubmit tool
 * and the outbox relay put in its application properties) and the stored marker (when the first
 * delivery wrote it). docs/monitor.md#why-duplicates says how to read each cause and where it can be wrong.
 */
export const DUPLICATE_CAUSES = [
  'lock_overlap',
  'redelivery',
  'dead_letter_resubmit',
  'delayed_retry',
  'relay_resend',
  'resend_after_window',
  'unknown',
] as const;
export type DuplicateCause = (typeof DUPLICATE_CAUSES)[number];

/**
 * The cause of a message whose event key (the consumer's `eventKey` option, ./eventKey.ts) its
 * consumer had applied under another MessageId: a producer that re-minted the id, suspected, not
 * proven (the consumer declares what makes two messages one event). Decided by the batch, not by
 * duplicateCause's rules: a `duplicate` when the consumer absorbs it, a `processed` or
 * `alternative` when it only flags it.
 */
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads (packages/devkit/src/build/README.md#mutation-testing); packages/inbox/test/eventKey.test.ts pins the name
export const SUSPECTED_PRODUCER_DUPLICATE = 'suspected_producer_duplicate';
/** The `cause` of a delivery: why a duplicate came, or a suspected producer duplicate. */
export type DeliveryCause = DuplicateCause | typeof SUSPECTED_PRODUCER_DUPLICATE;

/**
 * The application property `npm run dead-letters -- resubmit` sets on each copy it sends: when it
 * resent it (ISO-8601 UTC). Only its presence is read here.
 */
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads (packages/devkit/src/build/README.md#mutation-testing); packages/inbox/test/duplicateCause.test.ts pins the name
export const RESUBMITTED_AT_PROPERTY = 'inboxResubmittedAt';

/**
 * The application property the outbox relay sets on every message it sends: who sent it (`relay`
 * for the change feed, `sweeper` for the timer's resend). Only its presence is read here.
 */
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads (packages/devkit/src/build/README.md#mutation-testing); packages/inbox/test/duplicateCause.test.ts pins the name
export const OUTBOX_SENT_BY_PROPERTY = 'outboxSentBy';

export interface DuplicateFacts {
  /** This delivery's DeliveryCount: 1 on the first delivery of the message the broker holds. */
  deliveryCount: number;
  /** This delivery's application properties (where the tool's and the relay's marks are). */
  applicationProperties: Readonly<Record<string, unknown>>;
  /** This delivery is of a delayed-retry copy (Delivery.retry: known by its properties and MessageId). */
  delayedRetryCopy: boolean;
  /**
   * When the delivery that applied the message wrote its marker (the marker's processedAt), by
   * that instance's clock; undefined when no marker was read (a versioned consumer, or an outbox
   * document found where the marker was purged).
   */
  markerWrittenAt: Date | undefined;
  /**
   * This delivery read no marker when it began (a redelivery reads first) and met one at its batch
   * (409): the marker was written while it ran. Seen, not timed: no clock is compared.
   */
  markerAppearedDuringDelivery: boolean;
  /** When this delivery's processing began, by this instance's clock. */
  deliveryStartedAt: Date;
  /** Now, by this instance's clock. */
  now: Date;
  /** The topics' duplicate detection window (SERVICEBUS_DUPLICATE_WINDOW). */
  duplicateWindowSeconds: number;
}

/** The one cause of an absorbed duplicate; the first rule that holds decides. */
export function duplicateCause(facts: DuplicateFacts): DuplicateCause {
  const { deliveryCount, applicationProperties, markerWrittenAt, deliveryStartedAt, now } = facts;
  // The marker was written after this delivery began: another delivery of the message was still
  // running when this one started, so its lock had expired under it (this delivery may be the
  // redelivery, or the first one that lost the race). Seen directly when a redelivery's first read
  // found no marker and its batch met one; otherwise by the marker's processedAt, which is taken
  // just before the batch, so it can only be early, never late. Checked first: whatever sent the
  // message, two deliveries ran at once, and that means the lock is shorter than the handler.
  // "The marker is younger than one lock duration" would not do: after a lost completion the
  // redelivery also comes within one lock duration of the commit, with no overlap at all.
  if (facts.markerAppearedDuringDelivery) return 'lock_overlap';
  if (markerWrittenAt !== undefined && markerWrittenAt.getTime() >= deliveryStartedAt.getTime())
    return 'lock_overlap';
  // The broker delivered this message before (a lost or failed completion, an abandon, a lock that
  // expired after the commit), and the first delivery had committed before this one began.
  if (deliveryCount > 1) return 'redelivery';
  // A first delivery, so a new send with a MessageId this consumer has applied. The resubmit tool
  // marks its copies; it keeps every other property, the relay's mark included, so it goes first.
  if (applicationProperties[RESUBMITTED_AT_PROPERTY] !== undefined) return 'dead_letter_resubmit';
  // A delayed-retry copy (./delayedRetry.ts) whose original, or an earlier copy, applied the
  // message after scheduling it: a completion lost after the copy was scheduled, or a redelivery
  // that succeeded. A copy carries its original's properties, the relay's mark among them, so it
  // goes before relay_resend.
  if (facts.delayedRetryCopy) return 'delayed_retry';
  // The outbox sends each document's message under one MessageId, and the inbox of the consumer
  // that published it stops a second publish: a second arrival is the relay or the sweeper
  // sending the document again (a crash before the mark, a lost checkpoint, a sweeper resend).
  if (applicationProperties[OUTBOX_SENT_BY_PROPERTY] !== undefined) return 'relay_resend';
  // A producer sent the same MessageId again after the broker's window forgot the first: the
  // broker could not drop it.
  if (
    markerWrittenAt !== undefined &&
    now.getTime() - markerWrittenAt.getTime() >= facts.duplicateWindowSeconds * 1000
  )
    return 'resend_after_window';
  // A new send inside the window, which the broker should have dropped (duplicate detection off,
  // another topic carrying the same MessageId to this consumer), or no marker to date it.
  return 'unknown';
}
