import type { Container } from '@azure/cosmos';
import type { ScheduleRecord } from '@idempotent-consumers/devkit';
import {
  type Marker,
  MARKER_TYPE,
  OUTBOX_TYPE,
  type OutboxDocument,
  outgoingMessageId,
  RETRY_PROPERTIES,
  RETRY_SUBJECT,
  SUSPECTED_PRODUCER_DUPLICATE,
} from '@idempotent-consumers/inbox/internal';
import { type Broker, type BrokerMessage, type DeliveryRecord } from '@idempotent-consumers/local-azure';

import { topology } from '../../src/topology';
import {
  type Backorder,
  type Invoice,
  type InvoiceStatus,
  invoiceStatusProjector,
  type Product,
  SAMPLE_EVENTS,
  type Shipment,
  shipmentPlanner,
  stockReserver,
  SUBJECTS,
  type UnappliedPayment,
} from '../src';
import { type PublishRecord } from './publisher';
import type { TopicOutage } from './run';
import type { Workload, WorkloadEvent } from './workload';

/**
 * The claims of the template, checked after a run against the stored state and the broker:
 *   effects      every valid message's effect is applied exactly once
 *   settled      every message ends completed or dead-lettered: none lost, none left locked; every
 *                delayed-retry copy scheduled is enqueued and settles too
 *   dead-letters the dead-letter queue holds only poison or exhausted messages, each with a reason;
 *                a delayed-retry copy only when it is the last of its policy (its retries spent)
 *   markers      the markers are exactly the (consumer, MessageId) pairs that were processed
 *   duplicates   duplicates injected = dropped by the broker + absorbed by the inbox
 *   outbox       every event a committed batch staged is published, and applied downstream once
 *                (where a subscription takes it); none is left pending; none is published for a
 *                batch that did not commit
 *   topics       while a topic refused the outbox's sends, the other topics' events were each sent
 *                within OUTBOX_SWEEP_AGE + OUTBOX_SWEEP_INTERVAL (and the relay's poll) of their
 *                commit: one topic does not hold back another's
 *   reminted     every copy the producer sent under a fresh MessageId, completed after another copy
 *                of its event applied it, was absorbed as a suspected producer duplicate (100 %
 *                detected); no other delivery was taken for one; no event applied under two MessageIds
 *
 * A delayed-retry copy (packages/inbox/src/delayedRetry.ts) counts as its original: its MessageId maps to the
 * original's by its inboxRetryOf property. Copies are not duplicates anyone injected: they are left
 * out of the `duplicates` equation (the broker's drops of a copy scheduled again included) and
 * counted apart (Accounting.delayedRetries).
 */
export interface Invariant {
  name: 'effects' | 'settled' | 'dead-letters' | 'markers' | 'duplicates' | 'outbox' | 'topics' | 'reminted';
  ok: boolean;
  /** What was checked, or the first problems found. */
  detail: string;
}

export interface Accounting {
  uniqueEvents: number;
  sends: number;
  injectedDuplicates: number;
  droppedByBroker: number;
  absorbedByInbox: number;
  completedCopies: number;
  deadLettered: {
    total: number;
    poison: number;
    /** Valid messages dead-lettered once their deliveries ran out, retriesSpent included. */
    exhausted: number;
    /** Of those, the last delayed-retry copies: their policy's retries were spent. */
    retriesSpent: number;
    byReason: Record<string, number>;
  };
  /**
   * The delayed-retry copies the handlers scheduled (src/topology.json delayedRetry): taken by the
   * topic (`scheduled`; those its duplicate detection dropped, scheduled again by a redelivery, are
   * `droppedAsDuplicate`), then each settled by processing (`processed`: applied or found a
   * duplicate), by scheduling the next copy (`retried`), or dead-lettered.
   */
  delayedRetries: {
    scheduled: number;
    droppedAsDuplicate: number;
    processed: number;
    retried: number;
    deadLettered: number;
  };
  /** Copies the producer sent under a fresh MessageId (WorkloadOptions.remintIds). */
  reminted: {
    /** Re-minted sends. */
    sends: number;
    /** Copies (re-minted, or the event's own when a re-minted one applied it first) completed after another copy applied their event. */
    absorbable: number;
    /** Of those, absorbed as suspected producer duplicates. */
    detected: number;
    /** Deliveries named suspected producer duplicates that were not such copies (distinct events). */
    falsePositives: number;
  };
  effects: {
    payments: number;
    unappliedPayments: number;
    reservations: number;
    backorders: number;
    statusVersions: number;
    shipments: number;
  };
  outbox: {
    /** Events the committed batches staged (one per reservation or backorder). */
    staged: number;
    /** Sends by the relay and the sweeper, resends included, and how many the broker dropped. */
    sends: number;
    resends: number;
    droppedResends: number;
    /** Resends Service Bus accepted and discarded: no subscription takes their subject. */
    discardedResends: number;
    /** Staged events whose first send was the relay's, the sweeper's, or none. */
    firstSentBy: { relay: number; sweeper: number; none: number };
    /**
     * Model ms from each staged event's commit (its marker's `_ts`, so to the second, rounded down)
     * to its first send: the median, the 99th percentile and the longest; undefined with none sent.
     */
    commitToSend: { p50: number; p99: number; max: number } | undefined;
  };
}

/** What the `topics` invariant needs to know of the run (model times, epoch ms). */
export interface TopicTiming {
  /** When each topic refused the outbox's sends. */
  topicOutages: readonly TopicOutage[];
  /** OUTBOX_SWEEP_AGE: when a pending document becomes the sweeper's. */
  sweepAgeSeconds: number;
  /** The sweeper's runs, in order. */
  sweeps: readonly SweepRecord[];
  /** The last error of each relay page that failed. */
  relayErrors: readonly string[];
  /** The delayed-retry copies the app scheduled on the broker. */
  scheduled?: readonly ScheduleRecord[];
}

/** One run of the outbox sweeper. */
export interface SweepRecord {
  startedAt: number;
  endedAt: number;
  sent: number;
  /** The topics whose send failed in the run (it went on with the others). */
  failedTopics: readonly string[];
  /** It ran to its end: no Cosmos DB failure, and not capped by OUTBOX_SWEEP_MAX_ITEMS. */
  complete: boolean;
}

export interface Verification {
  invariants: Invariant[];
  accounting: Accounting;
}

const consumerOf = (kind: WorkloadEvent['kind']): string | undefined =>
  kind === 'poison' ? undefined : SAMPLE_EVENTS[kind].consumer;

/** An event the stock reserver's committed batch staged: what the relay must publish, once. */
interface StagedEvent {
  messageId: string;
  subject: string;
  orderId: string;
  /** When its batch committed (the marker's `_ts`, epoch seconds): a slow write commits late. */
  committedAtSeconds: number;
}

/** A document's last write, epoch seconds (a marker is written once: its commit). */
const writtenAt = (document: object): number => (document as { _ts?: number })._ts ?? 0;

export async function verify(
  workload: Workload,
  container: Container,
  broker: Broker,
  deliveries: readonly DeliveryRecord[],
  published: readonly PublishRecord[],
  timing: TopicTiming = { topicOutages: [], sweepAgeSeconds: 0, sweeps: [], relayErrors: [] },
): Promise<Verification> {
  const facts = await factsOf(workload, container, broker, deliveries, published, timing.scheduled ?? []);
  const markers = checkMarkers(facts);
  const effects = checkEffects(facts);
  const settled = checkSettled(facts);
  const deadLetters = checkDeadLetters(facts);
  const delayedRetries = delayedRetriesOf(facts);
  const duplicates = checkDuplicates(facts);
  const outbox = checkOutbox(facts);
  const topics = topicsInvariant(facts.outboxDocuments, facts.stagedAll, published, timing);
  const reminted = checkReminted(facts);
  return {
    invariants: [
      invariant('effects', effects),
      invariant('settled', settled),
      invariant('dead-letters', deadLetters),
      invariant('markers', markers),
      invariant('duplicates', duplicates),
      invariant('outbox', outbox),
      invariant('topics', topics),
      invariant('reminted', reminted),
    ],
    accounting: {
      uniqueEvents: workload.events.length,
      sends: workload.sends.length,
      injectedDuplicates: duplicates.injectedDuplicates,
      droppedByBroker: duplicates.droppedByBroker,
      absorbedByInbox: duplicates.absorbedByInbox,
      completedCopies: facts.completed.length,
      deadLettered: {
        total: facts.deadLetters.length,
        poison: deadLetters.poison,
        exhausted: deadLetters.exhausted,
        retriesSpent: deadLetters.retriesSpent,
        byReason: deadLetters.byReason,
      },
      delayedRetries,
      reminted: {
        sends: facts.workload.reminted.size,
        absorbable: reminted.absorbable,
        detected: reminted.detected,
        falsePositives: reminted.falsePositives,
      },
      effects: { ...effects.counts, shipments: outbox.shipments },
      outbox: {
        staged: facts.stagedAll.size,
        sends: published.length,
        resends: duplicates.relayResends,
        droppedResends: published.filter((p) => !p.accepted).length,
        discardedResends: duplicates.discardedResends,
        ...firstSends(facts.stagedAll, published),
      },
    },
  };
}

/** Who first sent each staged event, and how long after its commit (Accounting['outbox']). */
function firstSends(
  staged: ReadonlyMap<string, StagedEvent>,
  published: readonly PublishRecord[],
): Pick<Accounting['outbox'], 'firstSentBy' | 'commitToSend'> {
  const first = new Map<string, PublishRecord>();
  for (const send of published) if (!first.has(send.messageId)) first.set(send.messageId, send);
  const firstSentBy = { relay: 0, sweeper: 0, none: 0 };
  const waits: number[] = [];
  for (const event of staged.values()) {
    const send = first.get(event.messageId);
    if (send === undefined) {
      firstSentBy.none++;
      continue;
    }
    if (send.sentBy === 'sweeper') firstSentBy.sweeper++;
    else firstSentBy.relay++;
    waits.push(Math.max(0, send.at - event.committedAtSeconds * 1000));
  }
  waits.sort((a, b) => a - b);
  const at = (share: number): number =>
    waits[Math.min(waits.length - 1, Math.ceil(share * waits.length) - 1)]!;
  return {
    firstSentBy,
    commitToSend: waits.length === 0 ? undefined : { p50: at(0.5), p99: at(0.99), max: waits.at(-1)! },
  };
}

/** What an invariant check finds: its problems, or what it checked when there are none. */
interface Check {
  problems: string[];
  checked: string;
}

const invariant = (name: Invariant['name'], { problems, checked }: Check): Invariant => ({
  name,
  ok: problems.length === 0,
  detail:
    problems.length === 0 ? checked : `${problems.length} problem(s): ${problems.slice(0, 5).join('; ')}`,
});

/** What the checks read, gathered once: the stored documents, the broker's queues and the events staged. */
interface Facts {
  workload: Workload;
  broker: Broker;
  deliveries: readonly DeliveryRecord[];
  published: readonly PublishRecord[];
  ofType: <T>(type: string) => T[];
  markers: Marker[];
  /** Markers by `consumer|messageId`, the first of each; `markerKeys` repeats are in `duplicateMarkers`. */
  markerKeys: Map<string, Marker>;
  duplicateMarkers: string[];
  eventsById: Map<string, WorkloadEvent>;
  subscriptions: Broker['subscriptions'];
  completed: BrokerMessage[];
  deadLetters: BrokerMessage[];
  completedIds: Set<string | undefined>;
  /** The events the stock reserver's committed batches staged. */
  staged: Map<string, StagedEvent>;
  /** The ShipmentPlanned the shipment planner's committed batches staged. */
  planned: Map<string, StagedEvent>;
  stagedAll: Map<string, StagedEvent>;
  outboxDocuments: OutboxDocument[];
  /**
   * The marker of the consumer that applied a workload event, if one did: under the event's
   * MessageId, or one the producer re-minted for it.
   */
  applied: (event: WorkloadEvent) => Marker | undefined;
  /** The MessageIds an event was sent under: its own, then those the producer re-minted. */
  idsOf: (event: WorkloadEvent) => string[];
  /** The event's own MessageId for any MessageId it was sent under (a delayed copy's too); others unchanged. */
  eventIdOf: (messageId: string | undefined) => string | undefined;
  /** The original MessageId of a delayed copy's (by its inboxRetryOf); any other unchanged. */
  originalOf: (messageId: string | undefined) => string | undefined;
  /** The delayed copies that settled, by their own MessageId, and those the app scheduled. */
  retryCopies: Map<string, RetryCopy[]>;
  scheduled: readonly ScheduleRecord[];
  /** Broker sequence numbers of the messages a delivery completed by scheduling a delayed copy. */
  completedByRetry: Set<number>;
}

/** A delayed-retry copy as it settled: which copy of which original, and how. */
interface RetryCopy {
  message: BrokerMessage;
  original: string;
  attempt: number;
  for: string;
  settlement: 'completed' | 'dead-lettered';
}

/** The original MessageId, attempt and subscription of a delayed copy; undefined for any other message. */
function retryFamilyOf(
  message: BrokerMessage,
): { original: string; attempt: number; for: string } | undefined {
  if (message.subject !== RETRY_SUBJECT) return undefined;
  const properties = message.applicationProperties ?? {};
  const original = properties[RETRY_PROPERTIES.of];
  const attempt = properties[RETRY_PROPERTIES.attempt];
  const target = properties[RETRY_PROPERTIES.for];
  if (typeof original !== 'string' || typeof attempt !== 'number' || typeof target !== 'string')
    return undefined;
  return { original, attempt, for: target };
}

/**
 * The original MessageId of each delayed copy the broker settled (completed or dead-lettered), by
 * the copy's own MessageId: what a delivery of the copy counts as (causes.ts too).
 */
export function retryOriginals(broker: Broker): Map<string, string> {
  const originals = new Map<string, string>();
  for (const subscription of broker.subscriptions)
    for (const message of [...subscription.entity.completed, ...subscription.deadLetterQueue.peek()]) {
      const family = retryFamilyOf(message);
      if (family !== undefined) originals.set(message.messageId ?? '', family.original);
    }
  return originals;
}

/** The delayed-retry attempts each subscription's policy allows (src/topology.json). */
const retryAttemptsOf = new Map(
  topology.topics.flatMap((t) =>
    t.subscriptions.flatMap((s) => (s.delayedRetry === undefined ? [] : [[s.name, s.delayedRetry.attempts]])),
  ) as [string, number][],
);

async function factsOf(
  workload: Workload,
  container: Container,
  broker: Broker,
  deliveries: readonly DeliveryRecord[],
  published: readonly PublishRecord[],
  scheduled: readonly ScheduleRecord[],
): Promise<Facts> {
  const { resources: documents } = await container.items
    .query<Record<string, unknown>>('SELECT * FROM c')
    .fetchAll();
  const ofType = <T>(type: string): T[] => documents.filter((d) => d.type === type) as T[];
  const markers = ofType<Marker>(MARKER_TYPE);
  const eventsById = new Map(workload.events.map((e) => [e.messageId, e]));
  const remintedOf = new Map<string, string[]>();
  for (const [remintedId, eventId] of workload.reminted) {
    remintedOf.set(eventId, [...(remintedOf.get(eventId) ?? []), remintedId]);
    const event = eventsById.get(eventId);
    if (event) eventsById.set(remintedId, event);
  }
  const idsOf = (event: WorkloadEvent): string[] => [
    event.messageId,
    ...(remintedOf.get(event.messageId) ?? []),
  ];
  const subscriptions = broker.subscriptions;
  const completed = subscriptions.flatMap((s) => s.entity.completed);
  const deadLetters = subscriptions.flatMap((s) => s.deadLetterQueue.peek());
  const retryCopies = new Map<string, RetryCopy[]>();
  for (const [settlement, messages] of [
    ['completed', completed],
    ['dead-lettered', deadLetters],
  ] as const) {
    for (const message of messages) {
      const family = retryFamilyOf(message);
      if (family === undefined) continue;
      const id = message.messageId ?? '';
      retryCopies.set(id, [...(retryCopies.get(id) ?? []), { message, ...family, settlement }]);
    }
  }
  const originalOf = (messageId: string | undefined): string | undefined =>
    retryCopies.get(messageId ?? '')?.[0]?.original ?? messageId;
  const completedByRetry = new Set(
    deliveries
      .filter((d) => d.settlement === 'completed' && d.outcome === 'retried')
      .map((d) => d.sequenceNumber),
  );
  const markerKeys = new Map<string, Marker>();
  const duplicateMarkers: string[] = [];
  for (const marker of markers) {
    const key = `${marker.consumer}|${marker.messageId}`;
    if (markerKeys.has(key)) duplicateMarkers.push(key);
    else markerKeys.set(key, marker);
  }
  const staged = stagedByStockReserver(markers, eventsById);
  const planned = stagedByShipmentPlanner(markers);
  return {
    workload,
    broker,
    deliveries,
    published,
    ofType,
    markers,
    markerKeys,
    duplicateMarkers,
    eventsById,
    subscriptions,
    completed,
    deadLetters,
    // Completed by processing, as the original: a delivery that scheduled a delayed copy completed
    // its message without applying it.
    completedIds: new Set(
      completed.filter((m) => !completedByRetry.has(m.sequenceNumber)).map((m) => originalOf(m.messageId)),
    ),
    staged,
    planned,
    stagedAll: new Map([...staged, ...planned]),
    outboxDocuments: ofType<OutboxDocument>(OUTBOX_TYPE),
    applied: (event) =>
      idsOf(event)
        .map((id) => markerKeys.get(`${consumerOf(event.kind)}|${id}`))
        .find((marker) => marker !== undefined),
    idsOf,
    eventIdOf: (messageId) => {
      const original = originalOf(messageId);
      return workload.reminted.get(original ?? '') ?? original;
    },
    originalOf,
    retryCopies,
    scheduled,
    completedByRetry,
  };
}

/**
 * The events the stock reserver's committed batches staged: one per reservation marker, named by
 * the branch that committed (see sample/src/stockReserver.ts), with the MessageId the outbox derives.
 */
function stagedByStockReserver(
  markers: readonly Marker[],
  eventsById: ReadonlyMap<string, WorkloadEvent>,
): Map<string, StagedEvent> {
  const staged = new Map<string, StagedEvent>();
  for (const marker of markers) {
    if (marker.consumer !== stockReserver.name) continue;
    const backorder = marker.alternative === 'backorder';
    const messageId = outgoingMessageId(
      stockReserver.name,
      marker.messageId,
      marker.partitionKey,
      backorder ? 'backorder-created' : 'stock-reserved',
    );
    staged.set(messageId, {
      messageId,
      subject: backorder ? SUBJECTS.backorderCreated : SUBJECTS.stockReserved,
      orderId: eventsById.get(marker.messageId)?.order?.orderId ?? '',
      committedAtSeconds: writtenAt(marker),
    });
  }
  return staged;
}

/**
 * The events the shipment planner's committed batches staged: one ShipmentPlanned per shipment it
 * planned (not for an order already planned), on a topic no subscription here reads.
 */
function stagedByShipmentPlanner(markers: readonly Marker[]): Map<string, StagedEvent> {
  const planned = new Map<string, StagedEvent>();
  for (const marker of markers) {
    if (marker.consumer !== shipmentPlanner.name || marker.alternative !== undefined) continue;
    const messageId = outgoingMessageId(
      shipmentPlanner.name,
      marker.messageId,
      marker.partitionKey,
      'shipment-planned',
    );
    planned.set(messageId, {
      messageId,
      subject: SUBJECTS.shipmentPlanned,
      orderId: '',
      committedAtSeconds: writtenAt(marker),
    });
  }
  return planned;
}

/** markers: exactly the processed (consumer, MessageId) pairs. */
function checkMarkers({
  workload,
  markers,
  markerKeys,
  duplicateMarkers,
  eventsById,
  completedIds,
  staged,
  applied,
  idsOf,
}: Facts): Check {
  const problems = duplicateMarkers.map((key) => `two markers for ${key}`);
  for (const marker of markers) {
    const key = `${marker.consumer}|${marker.messageId}`;
    const valid =
      marker.consumer === shipmentPlanner.name
        ? staged.has(marker.messageId)
        : consumerOf(eventsById.get(marker.messageId)?.kind ?? 'poison') === marker.consumer;
    if (!valid) problems.push(`a marker for ${key}, which is not a valid message of that consumer`);
  }
  for (const event of workload.events) {
    const consumer = consumerOf(event.kind);
    if (consumer === undefined || consumer === invoiceStatusProjector.name) continue; // poison; versioned: no marker
    // A copy the producer re-minted may have applied the event first: its marker is the event's.
    if (idsOf(event).some((id) => completedIds.has(id)) && applied(event) === undefined) {
      problems.push(`no marker for ${consumer}|${event.messageId}, although the message completed`);
    }
  }
  for (const event of staged.values()) {
    if (completedIds.has(event.messageId) && !markerKeys.has(`${shipmentPlanner.name}|${event.messageId}`)) {
      problems.push(
        `no marker for ${shipmentPlanner.name}|${event.messageId}, although the message completed`,
      );
    }
  }
  return { problems, checked: `${markers.length} markers, one per processed (consumer, MessageId)` };
}

/** effects: every valid message's effect applied exactly once. */
function checkEffects(facts: Facts): Check & {
  counts: Omit<Accounting['effects'], 'shipments'>;
} {
  const payments = checkPayments(facts);
  const stock = checkStock(facts);
  const statuses = checkStatuses(facts);
  return {
    problems: [...payments.problems, ...stock.problems, ...statuses.problems],
    checked: `${payments.applied} payments, ${stock.reservations} reservations, ${stock.backorders} backorders, ${statuses.projected} status projections as expected`,
    counts: {
      payments: payments.applied,
      unappliedPayments: payments.unapplied,
      reservations: stock.reservations,
      backorders: stock.backorders,
      statusVersions: statuses.projected,
    },
  };
}

/** Invoice totals equal the sum of the distinct payments applied; unapplied ones are recorded. */
function checkPayments({ workload, applied, ofType }: Facts): {
  problems: string[];
  applied: number;
  unapplied: number;
} {
  const problems: string[] = [];
  const expectedPaid = new Map<string, number>();
  const expectedUnapplied = new Set<string>();
  let payments = 0;
  for (const event of workload.events) {
    const marker = event.payment && applied(event);
    if (!event.payment || !marker) continue;
    if (marker.alternative === 'unapplied-payment') expectedUnapplied.add(event.payment.paymentId);
    else {
      payments++;
      expectedPaid.set(
        event.payment.invoiceId,
        (expectedPaid.get(event.payment.invoiceId) ?? 0) + event.payment.amountMinor,
      );
    }
  }
  for (const invoice of ofType<Invoice>('invoice')) {
    const expected = expectedPaid.get(invoice.id) ?? 0;
    if (invoice.paidMinor !== expected)
      problems.push(`invoice ${invoice.id}: paid ${invoice.paidMinor}, expected ${expected}`);
    const shouldBePaid = invoice.paidMinor >= invoice.totalMinor;
    if ((invoice.status === 'Paid') !== shouldBePaid) {
      problems.push(
        `invoice ${invoice.id}: status ${invoice.status} with paid ${invoice.paidMinor} of ${invoice.totalMinor}`,
      );
    }
  }
  const unapplied = ofType<UnappliedPayment>('unapplied-payment');
  if (
    unapplied.length !== expectedUnapplied.size ||
    unapplied.some((u) => !expectedUnapplied.has(u.paymentId))
  ) {
    problems.push(`${unapplied.length} unapplied payments stored, ${expectedUnapplied.size} expected`);
  }

  return { problems, applied: payments, unapplied: unapplied.length };
}

/** Stock + reserved is conserved and never below zero; a backorder for each order that could not reserve. */
function checkStock({ workload, applied, ofType }: Facts): {
  problems: string[];
  reservations: number;
  backorders: number;
} {
  const problems: string[] = [];
  const initialStock = new Map(workload.products.map((p) => [p.id, p.stock]));
  const expectedReserved = new Map<string, number>();
  const expectedBackorders = new Set<string>();
  let reservations = 0;
  for (const event of workload.events) {
    const marker = event.order && applied(event);
    if (!event.order || !marker) continue;
    if (marker.alternative === 'backorder') expectedBackorders.add(event.order.orderId);
    else {
      reservations++;
      expectedReserved.set(
        event.order.productId,
        (expectedReserved.get(event.order.productId) ?? 0) + event.order.quantity,
      );
    }
  }
  for (const product of ofType<Product>('product')) {
    const initial = initialStock.get(product.id) ?? 0;
    if (product.stock < 0) problems.push(`product ${product.id}: stock ${product.stock} is below zero`);
    if (product.stock + product.reserved !== initial) {
      problems.push(
        `product ${product.id}: stock ${product.stock} + reserved ${product.reserved} ≠ ${initial}`,
      );
    }
    if (product.reserved !== (expectedReserved.get(product.id) ?? 0)) {
      problems.push(
        `product ${product.id}: reserved ${product.reserved}, expected ${expectedReserved.get(product.id) ?? 0}`,
      );
    }
  }
  const backorders = ofType<Backorder>('backorder');
  if (
    backorders.length !== expectedBackorders.size ||
    backorders.some((b) => !expectedBackorders.has(b.orderId))
  ) {
    problems.push(`${backorders.length} backorders stored, ${expectedBackorders.size} expected`);
  }

  return { problems, reservations, backorders: backorders.length };
}

/** Each invoice's projected status is its newest completed version. */
function checkStatuses({ workload, completedIds, ofType }: Facts): { problems: string[]; projected: number } {
  const problems: string[] = [];
  const statusEvents = workload.events.filter((e) => e.status !== undefined);
  const statuses = ofType<InvoiceStatus>('invoice-status');
  for (const invoiceId of new Set(statusEvents.map((e) => e.status?.invoiceId))) {
    const mine = statusEvents.filter((e) => e.status?.invoiceId === invoiceId);
    const completedVersions = mine
      .filter((e) => completedIds.has(e.messageId))
      .map((e) => e.status?.version ?? 0);
    const stored = statuses.find((s) => s.invoiceId === invoiceId);
    const newestCompleted = Math.max(0, ...completedVersions);
    if (newestCompleted > 0 && (stored?.version ?? 0) < newestCompleted) {
      problems.push(
        `invoice ${String(invoiceId)}: status version ${stored?.version ?? 'none'}, but version ${newestCompleted} completed`,
      );
    }
    const source = mine.find((e) => e.status?.version === stored?.version);
    if (stored && source?.status?.status !== stored.status)
      problems.push(`invoice ${String(invoiceId)}: status does not match version ${stored.version}`);
  }
  return { problems, projected: statuses.length };
}

/** settled: every message ends completed or dead-lettered: none lost, none left locked. */
function checkSettled({
  workload,
  broker,
  subscriptions,
  completed,
  deadLetters,
  staged,
  originalOf,
  retryCopies,
  scheduled,
}: Facts): Check {
  const problems: string[] = [];
  for (const subscription of subscriptions) {
    const left = subscription.entity.peek();
    if (left.length > 0)
      problems.push(
        `${subscription.name}: ${left.length} messages left (${subscription.entity.lockedCount} locked)`,
      );
  }
  const copies = new Map<string, number>();
  for (const message of [...completed, ...deadLetters]) {
    const id = originalOf(message.messageId) ?? '';
    copies.set(id, (copies.get(id) ?? 0) + 1);
  }
  // Every delayed copy the topic took was enqueued (none still scheduled) and settled, once.
  for (const topic of broker.topics.values())
    if (topic.scheduledCount > 0)
      problems.push(`${topic.name}: ${topic.scheduledCount} delayed copies still scheduled`);
  const taken = scheduled.filter((s) => s.accepted);
  // The same copy may be taken twice: scheduled again after the duplicate window (for a late resend
  // of its original, which failed too), it is a message of its own.
  const takenTimes = new Map<string, number>();
  for (const { messageId } of taken) takenTimes.set(messageId, (takenTimes.get(messageId) ?? 0) + 1);
  for (const [messageId, times] of takenTimes) {
    const settled = retryCopies.get(messageId)?.length ?? 0;
    if (settled !== times)
      problems.push(`delayed copy ${messageId} scheduled ${times} times, settled ${settled} times`);
  }
  const settledCopies = [...retryCopies.values()].reduce((n, list) => n + list.length, 0);
  if (settledCopies !== taken.length)
    problems.push(`${taken.length} delayed copies scheduled, but ${settledCopies} settled`);
  const acceptedCopies = subscriptions.reduce((sum, s) => sum + s.entity.enqueued, 0);
  if (completed.length + deadLetters.length !== acceptedCopies) {
    problems.push(
      `${acceptedCopies} copies enqueued, but ${completed.length} completed + ${deadLetters.length} dead-lettered`,
    );
  }
  for (const { messageId } of [...workload.events, ...staged.values()]) {
    if (!copies.has(messageId)) problems.push(`${messageId} was neither completed nor dead-lettered`);
  }
  return {
    problems,
    checked:
      `${acceptedCopies} copies: ${completed.length} completed, ${deadLetters.length} dead-lettered, none left` +
      (taken.length === 0 ? '' : `; ${taken.length} delayed-retry copies scheduled, each settled`),
  };
}

/**
 * dead letters: only poison or exhausted messages, each with its reason. Service Bus's own reason is
 * MaxDeliveryCountExceeded (or TTLExpiredException); the app's reason for a poison message is in its
 * log lines, one per delivery, which must all say poison. A valid message may be exhausted by
 * faults, but must never have been taken for poison.
 */
function checkDeadLetters({
  workload,
  deliveries,
  deadLetters,
  completed,
  eventsById,
  originalOf,
  retryCopies,
}: Facts): Check & {
  poison: number;
  exhausted: number;
  retriesSpent: number;
  byReason: Record<string, number>;
} {
  const problems: string[] = [];
  const byReason: Record<string, number> = {};
  const outcomesOf = new Map<string, (string | undefined)[]>();
  for (const record of deliveries) {
    if (record.settlement === 'crashed' && record.outcome === undefined) continue; // the handler never ran
    // A delayed copy's deliveries are its original's.
    const id = originalOf(record.messageId) ?? '';
    outcomesOf.set(id, [...(outcomesOf.get(id) ?? []), record.outcome]);
  }
  let poisonDeadLettered = 0;
  let exhausted = 0;
  let retriesSpent = 0;
  for (const message of deadLetters) {
    const reason = message.deadLetter?.reason ?? '(none)';
    byReason[reason] = (byReason[reason] ?? 0) + 1;
    if (
      !['MaxDeliveryCountExceeded', 'TTLExpiredException'].includes(reason) ||
      !message.deadLetter?.description
    ) {
      problems.push(`${message.messageId} was dead-lettered without a reason and description`);
    }
    const copy = retryCopies.get(message.messageId ?? '')?.[0];
    if (eventsById.get(originalOf(message.messageId) ?? '')?.kind === 'poison') poisonDeadLettered++;
    else exhausted++;
    // The policy's last copy dead-lettered: its retries are spent. An earlier copy is dead-lettered
    // only when its deliveries ran out on something a delay does not cover (a Cosmos DB outage
    // longer than the breaker rides out, crashes): it counts as exhausted like any message, and
    // the outage target judges it so.
    if (copy !== undefined && copy.attempt === retryAttemptsOf.get(copy.for)) retriesSpent++;
  }
  for (const event of workload.events) {
    const outcomes = outcomesOf.get(event.messageId) ?? [];
    if (event.kind === 'poison' && outcomes.some((outcome) => outcome !== 'poison')) {
      problems.push(
        `poison ${event.messageId} was not logged as poison on every delivery (${outcomes.join(', ')})`,
      );
    }
    if (event.kind !== 'poison' && outcomes.includes('poison')) {
      problems.push(`valid message ${event.messageId} was taken for poison`);
    }
  }
  for (const message of completed) {
    if (eventsById.get(originalOf(message.messageId) ?? '')?.kind === 'poison')
      problems.push(`poison ${message.messageId} was completed`);
  }
  return {
    problems,
    checked:
      `${poisonDeadLettered} poison and ${exhausted} exhausted` +
      (retriesSpent === 0 ? '' : ` (${retriesSpent} the last delayed-retry copy, its retries spent)`) +
      ', each with its reason',
    poison: poisonDeadLettered,
    exhausted,
    retriesSpent,
    byReason,
  };
}

/**
 * duplicates: injected = dropped by the broker + absorbed by the inbox + discarded. Extra copies come
 * from the producer's resends and from the relay's (a retried page, a send whose acknowledgement was
 * lost, the sweeper): each is dropped by the broker or absorbed by an inbox, or, taken by no
 * subscription, discarded by Service Bus.
 */
function checkDuplicates({
  workload,
  broker,
  published,
  completed,
  deadLetters,
  eventsById,
  eventIdOf,
  retryCopies,
  scheduled,
}: Facts): Check & {
  injectedDuplicates: number;
  relayResends: number;
  droppedByBroker: number;
  absorbedByInbox: number;
  discardedResends: number;
} {
  // A delayed copy scheduled again (a redelivery of a delivery that had scheduled it) is dropped by
  // the topic too, but nobody injected it.
  const droppedByBroker =
    [...broker.topics.values()].reduce((sum, t) => sum + t.stats.droppedAsDuplicate, 0) -
    scheduled.filter((s) => !s.accepted).length;
  const publishedIds = new Set(published.map((p) => p.messageId));
  const relayResends = published.length - publishedIds.size;
  const injectedDuplicates = workload.sends.length - workload.events.length;
  const settledValidCopies = [...completed, ...deadLetters].filter(
    (m: BrokerMessage) =>
      !retryCopies.has(m.messageId ?? '') && eventsById.get(m.messageId ?? '')?.kind !== 'poison',
  );
  // Copies of one event: a re-minted copy has a MessageId of its own, and counts with its event.
  const uniqueValid = new Set(settledValidCopies.map((m) => eventIdOf(m.messageId))).size;
  const absorbedByInbox = settledValidCopies.length - uniqueValid;
  // A resend no subscription takes (after the duplicate window) is discarded by Service Bus.
  const unrouted = published.filter((p) => p.accepted && p.reached === 0);
  const discardedResends = unrouted.length - new Set(unrouted.map((p) => p.messageId)).size;
  const problems =
    injectedDuplicates + relayResends === droppedByBroker + absorbedByInbox + discardedResends
      ? []
      : [
          `${injectedDuplicates} + ${relayResends} injected ≠ ${droppedByBroker} dropped + ${absorbedByInbox} absorbed + ${discardedResends} discarded`,
        ];
  return {
    problems,
    checked: `${injectedDuplicates} injected by the producer + ${relayResends} resent by the relay = ${droppedByBroker} dropped by the broker + ${absorbedByInbox} absorbed by the inbox`,
    injectedDuplicates,
    relayResends,
    droppedByBroker,
    absorbedByInbox,
    discardedResends,
  };
}

/**
 * reminted: every copy of an event sent under another MessageId than the one that applied it, once
 * completed, was absorbed as a suspected producer duplicate on each delivery that completed it;
 * no delivery of anything else was named one; no event holds markers under two MessageIds.
 */
function checkReminted({ workload, deliveries, markerKeys, idsOf, originalOf }: Facts): Check & {
  absorbable: number;
  detected: number;
  falsePositives: number;
} {
  const problems: string[] = [];
  const suspected = (d: DeliveryRecord): boolean =>
    (d.cause ?? d.afterTimeout?.cause) === SUSPECTED_PRODUCER_DUPLICATE;
  const mayBeSuspected = new Set<string>();
  let absorbable = 0;
  let detected = 0;
  for (const event of workload.events) {
    const ids = idsOf(event);
    if (ids.length < 2) continue;
    const holders = ids.filter((id) => markerKeys.has(`${consumerOf(event.kind)}|${id}`));
    if (holders.length > 1) problems.push(`${event.messageId} applied under ${holders.length} MessageIds`);
    for (const id of ids) {
      if (holders.includes(id)) continue;
      mayBeSuspected.add(id);
      // Its delayed copies' deliveries are its own; one that scheduled a copy applied nothing.
      const completing = deliveries.filter(
        (d) => originalOf(d.messageId) === id && d.settlement === 'completed' && d.outcome !== 'retried',
      );
      if (completing.length === 0) continue; // dead-lettered, or the event never applied
      absorbable++;
      if (completing.every((d) => d.outcome === 'duplicate' && suspected(d))) detected++;
      else
        problems.push(
          `${id}, a copy of ${event.messageId}, completed as ${completing.map((d) => `${d.outcome ?? '-'}/${d.cause ?? '-'}`).join(', ')}`,
        );
    }
  }
  const falsePositives = deliveries.filter(
    (d) => suspected(d) && !mayBeSuspected.has(originalOf(d.messageId) ?? ''),
  );
  for (const d of falsePositives.slice(0, 5))
    problems.push(`${String(d.messageId)} (${d.function}) was taken for a producer duplicate`);
  return {
    problems,
    checked: `${detected} of ${absorbable} re-minted copies absorbed as suspected producer duplicates, no distinct event taken for one`,
    absorbable,
    detected,
    falsePositives: falsePositives.length,
  };
}

/** outbox: published once each, applied downstream once, none pending, none without a commit. */
function checkOutbox({
  published,
  outboxDocuments,
  staged,
  planned,
  stagedAll,
  deadLetters,
  markerKeys,
  ofType,
  originalOf,
}: Facts): Check & {
  shipments: number;
} {
  const publishedIds = new Set(published.map((p) => p.messageId));
  const problems: string[] = [];
  for (const document of outboxDocuments) {
    if (!stagedAll.has(document.messageId))
      problems.push(
        `outbox ${document.messageId} (${document.subject}) without a committed reservation or shipment`,
      );
    if (document.status !== 'dispatched')
      problems.push(`outbox ${document.messageId} left ${document.status}`);
  }
  if (outboxDocuments.length !== stagedAll.size)
    problems.push(
      `${outboxDocuments.length} outbox documents for ${staged.size} committed reservations and ${planned.size} shipments`,
    );
  for (const id of publishedIds) {
    if (!stagedAll.has(id)) problems.push(`published ${id}, which no committed batch staged`);
  }
  for (const event of stagedAll.values()) {
    if (!publishedIds.has(event.messageId))
      problems.push(`${event.subject} ${event.messageId} never published`);
  }
  const deadLetteredIds = new Set(deadLetters.map((m) => originalOf(m.messageId)));
  const shipments = ofType<Shipment>('shipment');
  const shipmentsByOrder = new Map(shipments.map((shipment) => [shipment.orderId, shipment]));
  for (const event of staged.values()) {
    const shipment = shipmentsByOrder.get(event.orderId);
    const plannedFrom = markerKeys.get(`${shipmentPlanner.name}|${event.messageId}`);
    if (!plannedFrom) {
      // A valid message may be exhausted by faults: then it is in the dead-letter queue, not applied.
      if (!deadLetteredIds.has(event.messageId)) problems.push(`${event.messageId} applied by no one`);
      if (shipment) problems.push(`order ${event.orderId}: a shipment without its event applied`);
      continue;
    }
    const expected = event.subject === SUBJECTS.stockReserved ? 'ready' : 'awaiting-stock';
    if (shipment?.status !== expected)
      problems.push(
        `order ${event.orderId}: shipment ${shipment?.status ?? 'missing'}, expected ${expected}`,
      );
  }
  if (shipments.length > staged.size)
    problems.push(`${shipments.length} shipments for ${staged.size} published events`);
  return {
    problems,
    checked: `${stagedAll.size} events staged, each published and dispatched, ${shipments.length} applied downstream once, none without a commit`,
    shipments: shipments.length,
  };
}

/**
 * The `topics` invariant: a topic that refuses costs only its own documents. The relay never asks
 * for a page again because of a refusal, and every event of another topic, committed while a topic
 * refused, was sent by the first sweeper run that found it due (pending for OUTBOX_SWEEP_AGE) and that
 * ran to its end without that event's own topic failing. So it waited at most OUTBOX_SWEEP_AGE and
 * an interval, unless something else (Cosmos DB, its own topic) held it: then the next such run.
 */
function topicsInvariant(
  documents: readonly OutboxDocument[],
  staged: ReadonlyMap<string, StagedEvent>,
  published: readonly PublishRecord[],
  timing: TopicTiming,
): { problems: string[]; checked: string } {
  if (timing.topicOutages.length === 0)
    return { problems: [], checked: 'no topic refused sends in this run' };
  const problems = timing.relayErrors
    .filter((error) => error.includes('UnauthorizedAccess'))
    .map((error) => `a relay page was retried for a topic's refusal (${error.slice(0, 100)})`)
    .slice(0, 3);
  const firstSent = new Map<string, number>();
  for (const send of published) if (!firstSent.has(send.messageId)) firstSent.set(send.messageId, send.at);
  const refusing = (topic: string, at: number): boolean =>
    timing.topicOutages.some(
      (outage) => outage.topic === topic && at >= outage.startMs && at < outage.startMs + outage.durationMs,
    );
  let judged = 0;
  let bySweeper = 0;
  for (const document of documents) {
    const committedMs = document.createdAtEpochSeconds * 1000;
    const others = timing.topicOutages.some(
      (outage) =>
        outage.topic !== document.topic &&
        committedMs >= outage.startMs &&
        committedMs < outage.startMs + outage.durationMs,
    );
    if (!others) continue;
    judged++;
    const sentMs = firstSent.get(document.messageId) ?? Infinity;
    // Due once it is OUTBOX_SWEEP_AGE old by its pendingSince, and only once its batch committed
    // (the commit's second, rounded up): a slow write commits after the handler staged it.
    const committedSeconds = staged.get(document.messageId)?.committedAtSeconds ?? 0;
    const dueMs = Math.max(
      (document.createdAtEpochSeconds + timing.sweepAgeSeconds) * 1000,
      (committedSeconds + 1) * 1000,
    );
    for (const sweep of timing.sweeps) {
      if (sweep.startedAt < dueMs) continue;
      if (sentMs <= sweep.endedAt) break;
      const heldByItself =
        sweep.failedTopics.includes(document.topic) || refusing(document.topic, sweep.startedAt);
      if (sweep.complete && !heldByItself) {
        problems.push(
          `${document.subject} ${document.messageId} on ${document.topic} was still pending after a sweeper run that sent its topic (${Math.round((sweep.endedAt - committedMs) / 1000)} s after its commit)`,
        );
        break;
      }
    }
    if (sentMs > dueMs) bySweeper++;
  }
  const refused = [...new Set(timing.topicOutages.map((o) => o.topic))].join(', ');
  return {
    problems,
    checked: `while ${refused} refused sends, ${judged} events of other topics were each sent by the relay or by the first sweeper run that found them due (${bySweeper} by the sweeper); no relay page was retried for a refusal`,
  };
}

/** The delayed-retry copies: how many the topics took, and how each settled. */
function delayedRetriesOf({ retryCopies, scheduled, completedByRetry }: Facts): Accounting['delayedRetries'] {
  const settled = [...retryCopies.values()].flat();
  const retried = settled.filter(
    (c) => c.settlement === 'completed' && completedByRetry.has(c.message.sequenceNumber),
  ).length;
  const deadLettered = settled.filter((c) => c.settlement === 'dead-lettered').length;
  return {
    scheduled: scheduled.filter((s) => s.accepted).length,
    droppedAsDuplicate: scheduled.filter((s) => !s.accepted).length,
    processed: settled.length - retried - deadLettered,
    retried,
    deadLettered,
  };
}
