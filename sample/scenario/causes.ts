import { DUPLICATE_CAUSES, SUSPECTED_PRODUCER_DUPLICATE } from '@idempotent-consumers/inbox/internal';
import { type DeliveryRecord } from '@idempotent-consumers/local-azure';

/**
 * Duplicate causes in a scenario run (issue 24): for each duplicate an inbox consumer absorbed, the
 * cause the run injected, from what the run did (the host's record of deliveries, the outbox's
 * record of sends, the producer's late resends), against the cause the inbox named on the
 * delivery's log line (packages/inbox/src/duplicateCause.ts). The table must be diagonal. The injected cause
 * is not the library's rules run again: it comes from facts the inbox cannot see (which broker
 * message a delivery was, which delivery wrote the marker and whether it was still running, who
 * sent each copy).
 */
export interface CauseTable {
  /** Injected cause → named cause → duplicates; inbox consumers only. */
  counts: Record<string, Record<string, number>>;
  /** Duplicates in the table. */
  duplicates: number;
  /** Every duplicate named as injected. */
  diagonal: boolean;
  /**
   * Of the injected lock_overlap, those whose deliveries did not run alongside: the one that wrote
   * the marker had ended (a batch that committed and lost its response, abandoned and at once
   * redelivered) but took the marker in the model millisecond this one began. The virtual clock
   * stands still while work runs, so the two share a millisecond; the inbox's rule (at or after)
   * and the injected cause, by the marker's time on the model clock, both call that an overlap.
   */
  touching: number;
  /** The duplicates named otherwise (at most 20): function, MessageId, DeliveryCount, the two causes. */
  offDiagonal: string[];
  /**
   * Duplicates of versioned consumers, left out: they keep no marker, so the rules can date none
   * of them (docs/monitor.md#why-duplicates: `redelivery` above DeliveryCount 1, else `unknown`), and a
   * stale version arriving late counts as a duplicate too.
   */
  versioned: number;
}

/** An inbox marker as the run left it: who wrote it (its delivery's DeliveryCount) and when. */
export interface MarkerWrite {
  function: string;
  messageId: string;
  deliveryCount: number;
  /**
   * The marker's processedAt, model epoch ms: taken just before its batch, in whole milliseconds
   * (as a Date keeps it) where the model's times may have fractions: compared with those floored.
   */
  processedAt: number;
}

export interface CauseFacts {
  /** The host's deliveries (FunctionsHost.deliveries). */
  deliveries: readonly DeliveryRecord[];
  /** The run's inbox markers: which delivery applied each message. */
  markers: readonly MarkerWrite[];
  /** The functions of inbox consumers (the others are versioned). */
  inboxFunctions: ReadonlySet<string>;
  /** MessageIds the outbox relay or the sweeper sent (BrokerPublisher.sends). */
  relayed: ReadonlySet<string>;
  /** MessageIds the producer sent again after the duplicate window (the workload's `late` sends). */
  lateResends: ReadonlySet<string>;
  /**
   * For each MessageId of an event the producer also sent under a fresh one (re-minted), the event's
   * other MessageIds; absent for the rest.
   */
  otherIdsOfEvent?: ReadonlyMap<string, readonly string[]>;
  /** The broker messages that were delayed-retry copies (brokerMessageKey of their deliveries). */
  retryCopies?: ReadonlySet<string>;
}

/** Which broker message a delivery was: its subscription and sequence number. */
export const brokerMessageKey = (d: Pick<DeliveryRecord, 'subscription' | 'sequenceNumber'>): string =>
  `${d.subscription}\u0000${d.sequenceNumber}`;

/** The outcome a delivery logged, a timed-out one's when it finally returned included. */
const outcomeOf = (d: DeliveryRecord): string | undefined => d.outcome ?? d.afterTimeout?.outcome;
const causeOf = (d: DeliveryRecord): string | undefined => d.cause ?? d.afterTimeout?.cause;

/**
 * The delivery that wrote the message's marker: the one of the marker's DeliveryCount that was
 * running when the marker was taken, and was not itself a duplicate. Not always one that logged
 * `processed`: a batch that committed and lost its response logs `retried`, and a handler given up
 * at functionTimeout logs its outcome when it finally returns.
 */
function committer(
  marker: MarkerWrite | undefined,
  byMessage: readonly DeliveryRecord[],
): DeliveryRecord | undefined {
  if (marker === undefined) return undefined;
  return byMessage.find(
    (e) =>
      e.deliveryCount === marker.deliveryCount &&
      outcomeOf(e) !== 'duplicate' &&
      Math.floor(e.startedAt) <= marker.processedAt &&
      marker.processedAt <= e.endedAt,
  );
}

/**
 * What the run did to make this delivery a duplicate:
 * - lock_overlap: the delivery that wrote the marker was running while this one ran, in the host's
 *   order of starts and ends: the slow handler, given up at functionTimeout while its write was on
 *   its way, and the redelivery that ran meanwhile. Or, the one case no clock decides, it had
 *   ended but took its marker in the model millisecond this one began (CauseTable.touching);
 * - redelivery: else, the host had delivered this broker message before (a lost completion, a
 *   crash after the commit, an abandon);
 * - delayed_retry: else, this broker message was a delayed-retry copy of the message;
 * - relay_resend / resend_after_window: else, this is the first delivery of a later copy of a
 *   message this consumer had been delivered before, and the outbox sent it (the relay or the
 *   sweeper) / the producer sent it again after the window;
 * - unknown: none of these (the run injected nothing that explains it).
 * Before them all, suspected_producer_duplicate: this MessageId has no marker, and another MessageId
 * of the same event, which the producer re-minted (or whose copy this is), has one.
 */
function injectedCause(
  d: DeliveryRecord,
  facts: CauseFacts,
  byMessage: readonly DeliveryRecord[],
  marker: MarkerWrite | undefined,
  markers: ReadonlyMap<string, MarkerWrite>,
): { cause: string; touching?: boolean } {
  const otherIds = facts.otherIdsOfEvent?.get(d.messageId ?? '') ?? [];
  if (marker === undefined && otherIds.some((id) => markers.has(`${d.function}\u0000${id}`)))
    return { cause: SUSPECTED_PRODUCER_DUPLICATE };
  const applier = committer(marker, byMessage);
  if (marker !== undefined && applier !== undefined && applier !== d) {
    // The two ran alongside, in the host's order of starts and ends (not by timestamps).
    if (applier.startOrder < d.endOrder && applier.endOrder > d.startOrder) return { cause: 'lock_overlap' };
    // The applier had ended before this one began, but took its marker in the model millisecond
    // this one began: no clock can order the two (the virtual clock stands still while work runs).
    if (marker.processedAt === Math.floor(d.startedAt)) return { cause: 'lock_overlap', touching: true };
  }
  const sameBrokerMessage = byMessage.filter(
    (e) => e !== d && e.subscription === d.subscription && e.sequenceNumber === d.sequenceNumber,
  );
  if (sameBrokerMessage.some((e) => e.startOrder < d.startOrder)) return { cause: 'redelivery' };
  if (facts.retryCopies?.has(brokerMessageKey(d))) return { cause: 'delayed_retry' };
  const resentCopy = byMessage.some((e) => e.sequenceNumber < d.sequenceNumber);
  if (resentCopy && d.messageId !== undefined) {
    if (facts.relayed.has(d.messageId)) return { cause: 'relay_resend' };
    if (facts.lateResends.has(d.messageId)) return { cause: 'resend_after_window' };
  }
  return { cause: 'unknown' };
}

/** The table of injected against named causes, over the run's absorbed duplicates. */
export function duplicateCauses(facts: CauseFacts): CauseTable {
  // Deliveries of one message to one function: every broker copy, every delivery of each.
  const byMessage = new Map<string, DeliveryRecord[]>();
  const markers = new Map(facts.markers.map((m) => [`${m.function}\u0000${m.messageId}`, m]));
  for (const d of facts.deliveries) {
    const key = `${d.function}\u0000${d.messageId ?? ''}`;
    byMessage.set(key, [...(byMessage.get(key) ?? []), d]);
  }
  const counts: Record<string, Record<string, number>> = {};
  const offDiagonal: string[] = [];
  let duplicates = 0;
  let versioned = 0;
  let touching = 0;
  for (const d of facts.deliveries) {
    if (outcomeOf(d) !== 'duplicate') continue;
    if (!facts.inboxFunctions.has(d.function)) {
      versioned++;
      continue;
    }
    duplicates++;
    const key = `${d.function}\u0000${d.messageId ?? ''}`;
    const { cause: injected, touching: touched = false } = injectedCause(
      d,
      facts,
      byMessage.get(key) ?? [],
      markers.get(key),
      markers,
    );
    if (touched) touching++;
    const named = causeOf(d) ?? 'none';
    const row = (counts[injected] ??= {});
    row[named] = (row[named] ?? 0) + 1;
    if (named !== injected && offDiagonal.length < 20)
      offDiagonal.push(
        `${d.function} ${String(d.messageId).slice(0, 64)} #${d.deliveryCount}: injected ${injected}, named ${named}`,
      );
  }
  const diagonal = Object.entries(counts).every(([injected, row]) =>
    Object.keys(row).every((named) => named === injected),
  );
  return { counts, duplicates, diagonal, touching, offDiagonal, versioned };
}

/** The causes a table mentions, injected or named, in the order of DUPLICATE_CAUSES (others last). */
export function causesIn(table: CauseTable): string[] {
  const seen = new Set<string>();
  for (const [injected, row] of Object.entries(table.counts)) {
    seen.add(injected);
    for (const named of Object.keys(row)) seen.add(named);
  }
  const known: readonly string[] = DUPLICATE_CAUSES;
  return [
    ...known.filter((cause) => seen.has(cause)),
    ...[...seen].filter((cause) => !known.includes(cause)),
  ];
}
