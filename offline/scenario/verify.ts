import type { Container } from '@azure/cosmos';

import { type Marker, MARKER_TYPE } from '../../src/inbox/internal';
import type { Backorder, Invoice, InvoiceStatus, Product, UnappliedPayment } from '../../src/sample';
import { invoiceStatusProjector, SAMPLE_EVENTS } from '../../src/sample';
import type { Broker, BrokerMessage } from '../servicebus/broker';
import type { DeliveryRecord } from '../servicebus/host';
import type { Workload, WorkloadEvent } from './workload';

/**
 * The claims of the template, checked after a run against the stored state and the broker:
 *   effects      every valid message's effect is applied exactly once
 *   settled      every message ends completed or dead-lettered: none lost, none left locked
 *   dead-letters the dead-letter queue holds only poison or exhausted messages, each with a reason
 *   markers      the markers are exactly the (consumer, MessageId) pairs that were processed
 *   duplicates   duplicates injected = dropped by the broker + absorbed by the inbox
 */
export interface Invariant {
  name: 'effects' | 'settled' | 'dead-letters' | 'markers' | 'duplicates';
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
  deadLettered: { total: number; poison: number; exhausted: number; byReason: Record<string, number> };
  effects: {
    payments: number;
    unappliedPayments: number;
    reservations: number;
    backorders: number;
    statusVersions: number;
  };
}

export interface Verification {
  invariants: Invariant[];
  accounting: Accounting;
}

const consumerOf = (kind: WorkloadEvent['kind']): string | undefined =>
  kind === 'poison' ? undefined : SAMPLE_EVENTS[kind].consumer;

export async function verify(
  workload: Workload,
  container: Container,
  broker: Broker,
  deliveries: readonly DeliveryRecord[],
): Promise<Verification> {
  const { resources: documents } = await container.items
    .query<Record<string, unknown>>('SELECT * FROM c')
    .fetchAll();
  const ofType = <T>(type: string): T[] => documents.filter((d) => d.type === type) as T[];
  const markers = ofType<Marker>(MARKER_TYPE);
  const eventsById = new Map(workload.events.map((e) => [e.messageId, e]));

  const subscriptions = broker.subscriptions;
  const completed = subscriptions.flatMap((s) => s.entity.completed);
  const deadLetters = subscriptions.flatMap((s) => s.deadLetterQueue.peek());
  const completedIds = new Set(completed.map((m) => m.messageId));

  // ── markers: exactly the processed (consumer, MessageId) pairs ───────────────────────────────
  const markerProblems: string[] = [];
  const markerKeys = new Map<string, Marker>();
  for (const marker of markers) {
    const key = `${marker.consumer}|${marker.messageId}`;
    if (markerKeys.has(key)) markerProblems.push(`two markers for ${key}`);
    markerKeys.set(key, marker);
    const event = eventsById.get(marker.messageId);
    if (!event || consumerOf(event.kind) !== marker.consumer)
      markerProblems.push(`a marker for ${key}, which is not a valid message of that consumer`);
  }
  for (const event of workload.events) {
    const consumer = consumerOf(event.kind);
    if (consumer === undefined || consumer === invoiceStatusProjector.name) continue; // poison; versioned: no marker
    if (completedIds.has(event.messageId) && !markerKeys.has(`${consumer}|${event.messageId}`)) {
      markerProblems.push(`no marker for ${consumer}|${event.messageId}, although the message completed`);
    }
  }
  const applied = (event: WorkloadEvent): Marker | undefined =>
    markerKeys.get(`${consumerOf(event.kind)}|${event.messageId}`);

  // ── effects: exactly once ─────────────────────────────────────────────────────────────────────
  const effectProblems: string[] = [];
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
      effectProblems.push(`invoice ${invoice.id}: paid ${invoice.paidMinor}, expected ${expected}`);
    const shouldBePaid = invoice.paidMinor >= invoice.totalMinor;
    if ((invoice.status === 'Paid') !== shouldBePaid) {
      effectProblems.push(
        `invoice ${invoice.id}: status ${invoice.status} with paid ${invoice.paidMinor} of ${invoice.totalMinor}`,
      );
    }
  }
  const unapplied = ofType<UnappliedPayment>('unapplied-payment');
  if (
    unapplied.length !== expectedUnapplied.size ||
    unapplied.some((u) => !expectedUnapplied.has(u.paymentId))
  ) {
    effectProblems.push(`${unapplied.length} unapplied payments stored, ${expectedUnapplied.size} expected`);
  }

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
    if (product.stock < 0) effectProblems.push(`product ${product.id}: stock ${product.stock} is below zero`);
    if (product.stock + product.reserved !== initial) {
      effectProblems.push(
        `product ${product.id}: stock ${product.stock} + reserved ${product.reserved} ≠ ${initial}`,
      );
    }
    if (product.reserved !== (expectedReserved.get(product.id) ?? 0)) {
      effectProblems.push(
        `product ${product.id}: reserved ${product.reserved}, expected ${expectedReserved.get(product.id) ?? 0}`,
      );
    }
  }
  const backorders = ofType<Backorder>('backorder');
  if (
    backorders.length !== expectedBackorders.size ||
    backorders.some((b) => !expectedBackorders.has(b.orderId))
  ) {
    effectProblems.push(`${backorders.length} backorders stored, ${expectedBackorders.size} expected`);
  }

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
      effectProblems.push(
        `invoice ${String(invoiceId)}: status version ${stored?.version ?? 'none'}, but version ${newestCompleted} completed`,
      );
    }
    const source = mine.find((e) => e.status?.version === stored?.version);
    if (stored && source?.status?.status !== stored.status)
      effectProblems.push(`invoice ${String(invoiceId)}: status does not match version ${stored.version}`);
  }

  // ── settled: none lost, none left locked ─────────────────────────────────────────────────────
  const settledProblems: string[] = [];
  for (const subscription of subscriptions) {
    const left = subscription.entity.peek();
    if (left.length > 0)
      settledProblems.push(
        `${subscription.name}: ${left.length} messages left (${subscription.entity.lockedCount} locked)`,
      );
  }
  const copies = new Map<string, number>();
  for (const message of [...completed, ...deadLetters])
    copies.set(message.messageId ?? '', (copies.get(message.messageId ?? '') ?? 0) + 1);
  const acceptedCopies = subscriptions.reduce((sum, s) => sum + s.entity.enqueued, 0);
  if (completed.length + deadLetters.length !== acceptedCopies) {
    settledProblems.push(
      `${acceptedCopies} copies enqueued, but ${completed.length} completed + ${deadLetters.length} dead-lettered`,
    );
  }
  for (const event of workload.events) {
    if (!copies.has(event.messageId))
      settledProblems.push(`${event.messageId} was neither completed nor dead-lettered`);
  }

  // ── dead letters: only poison or exhausted, each with its reason ─────────────────────────────
  // Service Bus's own reason is MaxDeliveryCountExceeded (or TTLExpiredException); the app's reason
  // for a poison message is in its log lines, one per delivery, which must all say poison. A valid
  // message may be exhausted by faults, but must never have been taken for poison.
  const deadLetterProblems: string[] = [];
  const byReason: Record<string, number> = {};
  const outcomesOf = new Map<string, (string | undefined)[]>();
  for (const record of deliveries) {
    if (record.settlement === 'crashed' && record.outcome === undefined) continue; // the handler never ran
    outcomesOf.set(record.messageId ?? '', [
      ...(outcomesOf.get(record.messageId ?? '') ?? []),
      record.outcome,
    ]);
  }
  let poisonDeadLettered = 0;
  let exhausted = 0;
  for (const message of deadLetters) {
    const reason = message.deadLetter?.reason ?? '(none)';
    byReason[reason] = (byReason[reason] ?? 0) + 1;
    if (
      !['MaxDeliveryCountExceeded', 'TTLExpiredException'].includes(reason) ||
      !message.deadLetter?.description
    ) {
      deadLetterProblems.push(`${message.messageId} was dead-lettered without a reason and description`);
    }
    if (eventsById.get(message.messageId ?? '')?.kind === 'poison') poisonDeadLettered++;
    else exhausted++;
  }
  for (const event of workload.events) {
    const outcomes = outcomesOf.get(event.messageId) ?? [];
    if (event.kind === 'poison' && outcomes.some((outcome) => outcome !== 'poison')) {
      deadLetterProblems.push(
        `poison ${event.messageId} was not logged as poison on every delivery (${outcomes.join(', ')})`,
      );
    }
    if (event.kind !== 'poison' && outcomes.includes('poison')) {
      deadLetterProblems.push(`valid message ${event.messageId} was taken for poison`);
    }
  }
  for (const message of completed) {
    if (eventsById.get(message.messageId ?? '')?.kind === 'poison')
      deadLetterProblems.push(`poison ${message.messageId} was completed`);
  }

  // ── duplicates: injected = dropped by the broker + absorbed by the inbox ─────────────────────
  const droppedByBroker = [...broker.topics.values()].reduce((sum, t) => sum + t.stats.droppedAsDuplicate, 0);
  const injectedDuplicates = workload.sends.length - workload.events.length;
  const settledValidCopies = [...completed, ...deadLetters].filter(
    (m: BrokerMessage) => eventsById.get(m.messageId ?? '')?.kind !== 'poison',
  );
  const uniqueValid = new Set(settledValidCopies.map((m) => m.messageId)).size;
  const absorbedByInbox = settledValidCopies.length - uniqueValid;
  const duplicateProblems =
    injectedDuplicates === droppedByBroker + absorbedByInbox
      ? []
      : [`${injectedDuplicates} injected ≠ ${droppedByBroker} dropped + ${absorbedByInbox} absorbed`];

  const invariant = (name: Invariant['name'], problems: string[], checked: string): Invariant => ({
    name,
    ok: problems.length === 0,
    detail:
      problems.length === 0 ? checked : `${problems.length} problem(s): ${problems.slice(0, 5).join('; ')}`,
  });
  return {
    invariants: [
      invariant(
        'effects',
        effectProblems,
        `${payments} payments, ${reservations} reservations, ${expectedBackorders.size} backorders, ${statuses.length} status projections as expected`,
      ),
      invariant(
        'settled',
        settledProblems,
        `${acceptedCopies} copies: ${completed.length} completed, ${deadLetters.length} dead-lettered, none left`,
      ),
      invariant(
        'dead-letters',
        deadLetterProblems,
        `${poisonDeadLettered} poison and ${exhausted} exhausted, each with its reason`,
      ),
      invariant(
        'markers',
        markerProblems,
        `${markers.length} markers, one per processed (consumer, MessageId)`,
      ),
      invariant(
        'duplicates',
        duplicateProblems,
        `${injectedDuplicates} injected = ${droppedByBroker} dropped by the broker + ${absorbedByInbox} absorbed by the inbox`,
      ),
    ],
    accounting: {
      uniqueEvents: workload.events.length,
      sends: workload.sends.length,
      injectedDuplicates,
      droppedByBroker,
      absorbedByInbox,
      completedCopies: completed.length,
      deadLettered: { total: deadLetters.length, poison: poisonDeadLettered, exhausted, byReason },
      effects: {
        payments,
        unappliedPayments: unapplied.length,
        reservations,
        backorders: backorders.length,
        statusVersions: statuses.length,
      },
    },
  };
}
