import {
  defineInboxConsumer,
  type Delivery,
  markerId,
  processDelivery,
  type ProcessDependencies,
} from '@idempotent-consumers/inbox/internal';

import { type Invoice, invoicePartition, paymentApplier, PaymentReceived, toMinorUnits } from '../src';

/**
 * Six ways to apply "add this payment to its invoice" from an at-least-once queue, side by side.
 * Each returns what it did and how many Cosmos DB requests it made; throwing means "give the
 * message back" (the bench redelivers it, as Service Bus would). All write to `dependencies.container`,
 * built once per run as the app builds its dependencies once per process.
 */
export interface StrategyResult {
  applied: boolean;
  requests: number;
}

export interface Strategy {
  key: 'a' | 'b' | 'c' | 'd' | 'e' | 'f';
  name: string;
  /** It publishes one message per payment applied, through the outbox: the bench then measures the relay. */
  publishes?: true;
  handle(delivery: Delivery, dependencies: ProcessDependencies): Promise<StrategyResult>;
}

/**
 * A strategy broke what it exists to show. The bench stops on it rather than redeliver the message,
 * as it does for an error the strategy gives back on purpose.
 */
export class BenchInvariantError extends Error {}

const CONSUMER = 'bench.payment-applier';

function parse(delivery: Delivery): {
  messageId: string;
  invoiceId: string;
  amountMinor: number;
  partitionKey: string;
} {
  const payment = PaymentReceived.parse(delivery.body);
  return {
    messageId: delivery.messageId ?? '',
    invoiceId: payment.invoiceId,
    amountMinor: toMinorUnits(payment.amount),
    partitionKey: invoicePartition(payment.invoiceId),
  };
}

/** (a) What people write first: apply the delta; every redelivery applies it again. */
const naive: Strategy = {
  key: 'a',
  name: 'naive write, no deduplication',
  async handle(delivery, { container }) {
    const { invoiceId, amountMinor, partitionKey } = parse(delivery);
    await container
      .item(invoiceId, partitionKey)
      .patch([{ op: 'incr', path: '/paidMinor', value: amountMinor }]);
    return { applied: true, requests: 1 };
  },
};

/**
 * (b) Check, then write: look for a marker, apply the delta, write the marker. Two deliveries of
 * one message that overlap both pass the check; a crash between the two writes loses the marker.
 */
const checkThenWrite: Strategy = {
  key: 'b',
  name: 'check-then-write (read marker, write effect, write marker)',
  async handle(delivery, { container }) {
    const { messageId, invoiceId, amountMinor, partitionKey } = parse(delivery);
    const id = markerId(CONSUMER, messageId);
    const existing = await container.item(id, partitionKey).read();
    if (existing.resource) return { applied: false, requests: 1 };
    await container
      .item(invoiceId, partitionKey)
      .patch([{ op: 'incr', path: '/paidMinor', value: amountMinor }]);
    await container.items.upsert({ id, partitionKey, type: 'bench-marker', messageId });
    return { applied: true, requests: 3 };
  },
};

/**
 * (c) A separate idempotency record around the work, as AWS Lambda Powertools does it: create the
 * record IN_PROGRESS (fails if it exists), do the work, mark it COMPLETED. A duplicate reads the
 * record: COMPLETED → skip; IN_PROGRESS → "try later" (the message is given back).
 */
const idempotencyRecord: Strategy = {
  key: 'c',
  name: 'idempotency record around the work (Powertools style)',
  async handle(delivery, { container }) {
    const { messageId, invoiceId, amountMinor, partitionKey } = parse(delivery);
    const id = `record-${markerId(CONSUMER, messageId)}`;
    try {
      await container.items.create({ id, partitionKey, type: 'bench-record', status: 'IN_PROGRESS' });
    } catch (error) {
      if ((error as { code?: number }).code !== 409) throw error;
      const { resource } = await container.item(id, partitionKey).read<{ status: string }>();
      if (resource?.status === 'COMPLETED') return { applied: false, requests: 2 };
      throw new Error('IdempotencyAlreadyInProgressError: another delivery holds the record; try later');
    }
    await container
      .item(invoiceId, partitionKey)
      .patch([{ op: 'incr', path: '/paidMinor', value: amountMinor }]);
    await container.item(id, partitionKey).patch([{ op: 'set', path: '/status', value: 'COMPLETED' }]);
    return { applied: true, requests: 3 };
  },
};

/**
 * The shipped payment applier without its opt-in event key, so that (d) measures the marker and the
 * patch alone, as (e) and (f) do (the event key adds a document to the batch: about 5 RU a message,
 * packages/inbox/README.md#producers-that-re-mint-messageids).
 */
const markerAndPatch = { ...paymentApplier, eventKey: undefined };

/** (d) This template: the inbox marker and the `incr` patch in one transactional batch (the shipped payment applier). */
const inboxPatch: Strategy = {
  key: 'd',
  name: 'inbox marker + patch in one batch (this template)',
  async handle(delivery, dependencies) {
    const result = await processDelivery(markerAndPatch, delivery, dependencies);
    return {
      applied: result.outcome === 'processed' || result.outcome === 'alternative',
      requests: result.requests,
    };
  },
};

/** (e) This template's read-modify-write: read the invoice, then marker + ETag-guarded replace in one batch. */
const readModifyWrite = defineInboxConsumer({
  name: paymentApplier.name,
  schema: PaymentReceived,
  partitionKey: (payment) => invoicePartition(payment.invoiceId),
  async handle(payment, tx) {
    const current = await tx.read<Invoice>(payment.invoiceId);
    if (!current) throw new Error(`Invoice ${payment.invoiceId} does not exist.`);
    const invoice = current.document;
    tx.replace(
      { ...invoice, paidMinor: invoice.paidMinor + toMinorUnits(payment.amount) },
      { ifMatch: current.etag },
    );
  },
});

const inboxReplace: Strategy = {
  key: 'e',
  name: 'inbox marker + read + ETag replace in one batch (this template)',
  async handle(delivery, dependencies) {
    const result = await processDelivery(readModifyWrite, delivery, dependencies);
    return { applied: result.outcome === 'processed', requests: result.requests };
  },
};

/**
 * (f) The payment applier of (d), publishing what it did: `PaymentApplied` goes into the outbox in
 * the same transactional batch as the marker and the patch (every payment the bench sends applies).
 */
const publishingApplier = defineInboxConsumer({
  name: paymentApplier.name,
  schema: PaymentReceived,
  partitionKey: (payment) => invoicePartition(payment.invoiceId),
  async handle(payment, tx, delivery) {
    await paymentApplier.handle(payment, tx, delivery);
    tx.publish({
      topic: 'business-events',
      subject: 'PaymentApplied',
      name: 'payment-applied',
      body: {
        paymentId: payment.paymentId,
        invoiceId: payment.invoiceId,
        amountMinor: toMinorUnits(payment.amount),
        currency: payment.currency,
      },
    });
  },
});

const inboxPatchOutbox: Strategy = {
  key: 'f',
  name: 'inbox marker + patch + outbox message in one batch (this template)',
  publishes: true,
  async handle(delivery, dependencies) {
    const result = await processDelivery(publishingApplier, delivery, dependencies);
    // The outbox adds an operation to the batch, not a request: a delivery that applies the payment
    // makes one request, its batch, with the message in it (a redelivery reads its marker first).
    const expected = delivery.deliveryCount > 1 ? 2 : 1;
    if (
      result.outcome === 'processed' &&
      (result.attempts !== 1 || result.requests !== expected || result.published !== 1)
    ) {
      throw new BenchInvariantError(
        `(f) applied ${delivery.messageId} with ${result.attempts} batches, ${result.requests} requests and ` +
          `${result.published} messages published; expected one batch holding one message, ${expected} requests.`,
      );
    }
    return { applied: result.outcome === 'processed', requests: result.requests };
  },
};

export const STRATEGIES: readonly Strategy[] = [
  naive,
  checkThenWrite,
  idempotencyRecord,
  inboxPatch,
  inboxReplace,
  inboxPatchOutbox,
];

/** A first (or repeated) delivery of a PaymentReceived body, as the trigger adapter would make it. */
export function paymentDelivery(body: object, messageId: string, deliveryCount: number): Delivery {
  return {
    body,
    messageId,
    messageIdIsLossy: false,
    deliveryCount,
    enqueuedTimeUtc: new Date(),
    subject: 'PaymentReceived',
    correlationId: undefined,
    applicationProperties: {},
  };
}

/** An open invoice no payment can complete: every payment the bench sends applies to it. */
export function openInvoice(id: string): Invoice {
  return {
    id,
    partitionKey: invoicePartition(id),
    type: 'invoice',
    currency: 'EUR',
    totalMinor: Number.MAX_SAFE_INTEGER,
    paidMinor: 0,
    status: 'Open',
  };
}
