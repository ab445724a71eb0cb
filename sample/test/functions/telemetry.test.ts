import {
  InboxTelemetry,
  METRIC_NAMES,
  type OutboxMessage,
  processDelivery,
} from '@idempotent-consumers/inbox/internal';
import { delivery, dependencies, testConsumer } from '@idempotent-consumers/inbox/testing';
import { MetricsSink, useLocalStack } from '@idempotent-consumers/local-azure';

import { inboxRuntime } from '../../../src/app';
import { deliver, runTimer } from '../../../test/support/deliveries';
import { type Invoice, invoicePartition, type Product, productPartition } from '../../src';

/** The metrics the app emits, read through an in-memory OpenTelemetry reader. */
const stack = useLocalStack();
let sink: MetricsSink;
beforeAll(async () => {
  sink = MetricsSink.register(); // before the first delivery builds the app's instruments
  await stack.container.items.create<Invoice>({
    id: 'INV-T',
    partitionKey: invoicePartition('INV-T'),
    type: 'invoice',
    currency: 'EUR',
    totalMinor: 100_000,
    paidMinor: 0,
    status: 'Open',
  });
  await stack.container.items.create<Product>({
    id: 'SKU-T',
    partitionKey: productPartition('SKU-T'),
    type: 'product',
    stock: 1,
    reserved: 0,
  });
});
afterAll(async () => {
  await sink.stop();
});

const payments = { consumer: 'billing.payment-applier' };
const pay = (paymentId: string, amount = 1): object => ({
  paymentId,
  invoiceId: 'INV-T',
  amount,
  currency: 'EUR',
});
const messages = (outcome: string, consumer = payments.consumer): Promise<number> =>
  sink.value(METRIC_NAMES.messages, { consumer, outcome });

describe('telemetry', () => {
  it('counts each outcome under its consumer', async () => {
    await deliver('billing-payment-applier', pay('T1'), { messageId: 't-1' });
    await deliver('billing-payment-applier', pay('T1'), { messageId: 't-1', deliveryCount: 2 });
    await deliver('billing-payment-applier', pay('T1', 5), { messageId: 't-1' });
    await deliver('billing-payment-applier', 'not json', { messageId: 't-poison' });
    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });
    await deliver('billing-payment-applier', pay('T2'), { messageId: 't-2' });
    await deliver(
      'inventory-stock-reserver',
      { orderId: 'O-T1', productId: 'SKU-T', quantity: 5 },
      { messageId: 't-order' },
    );

    expect({
      processed: await messages('processed'),
      duplicate: await messages('duplicate'),
      payload_mismatch: await messages('payload_mismatch'),
      poison: await messages('poison'),
      retried: await messages('retried'),
      alternative: await messages('alternative', 'inventory.stock-reserver'),
      paymentsAsAlternative: await messages('alternative'),
    }).toEqual({
      processed: 1,
      duplicate: 1,
      payload_mismatch: 1,
      poison: 1,
      retried: 1,
      alternative: 1,
      paymentsAsAlternative: 0,
    });
  });

  it('records request charge and duration for processed deliveries', async () => {
    const chargesBefore = await sink.value(METRIC_NAMES.requestCharge, { ...payments, outcome: 'processed' });
    const durationsBefore = await sink.value(METRIC_NAMES.duration, { ...payments, outcome: 'processed' });

    await deliver('billing-payment-applier', pay('T3'), { messageId: 't-3' });

    expect(await sink.value(METRIC_NAMES.requestCharge, { ...payments, outcome: 'processed' })).toBe(
      chargesBefore + 1,
    );
    expect(await sink.value(METRIC_NAMES.duration, { ...payments, outcome: 'processed' })).toBe(
      durationsBefore + 1,
    );
  });

  it('reports purge counts and the inbox size as gauges', async () => {
    const markersNow = (
      await stack.container.items
        .query<number>('SELECT VALUE COUNT(1) FROM c WHERE c.type = "inbox-marker"')
        .fetchAll()
    ).resources[0];

    const run = await runTimer('purge-expired-markers');

    expect(run.error).toBeUndefined();
    expect(await sink.value(METRIC_NAMES.markers)).toBe(markersNow);
    expect(await sink.value(METRIC_NAMES.expiredMarkers)).toBe(0);
    expect(await sink.value(METRIC_NAMES.purgedMarkers)).toBe(0);
  });

  it('counts ETag conflict retries per consumer', async () => {
    const telemetry = new InboxTelemetry();
    await stack.container.items.create({ id: 'doc', partitionKey: 'account:etag', value: 0 });
    let runs = 0;
    const conflicting = testConsumer(async (_message, tx) => {
      const current = await tx.read<{ id: string; value: number }>('doc');
      if (++runs === 1)
        await stack.container.items.upsert({ id: 'doc', partitionKey: 'account:etag', value: 50 });
      tx.replace({ ...current!.document, value: current!.document.value + 1 }, { ifMatch: current!.etag });
    });

    await processDelivery(
      conflicting,
      delivery({ accountId: 'etag', amount: 1 }),
      dependencies(stack.container, { onEtagRetry: (consumer) => telemetry.etagRetry(consumer) }),
    );

    expect(await sink.value(METRIC_NAMES.etagRetries, { consumer: 'test.consumer' })).toBe(1);
  });

  it('counts outbox sends by source, and reports what is pending and how old, from each sweeper run', async () => {
    const publishing = testConsumer((message, tx) => {
      tx.publish({ topic: 'business-events', subject: 'Audited', body: { amount: message.amount } });
    });
    const pendingBefore = (
      await stack.container.items
        .query<number>('SELECT VALUE COUNT(1) FROM c WHERE c.type = "outbox" AND c.status = "pending"')
        .fetchAll()
    ).resources[0] as number;
    const now = Date.now();
    // Two committed ten minutes ago (past OUTBOX_SWEEP_AGE), one just now.
    for (const [messageId, at] of [
      ['o-1', now - 600_000],
      ['o-2', now - 600_000],
      ['o-3', now],
    ] as const) {
      await processDelivery(
        publishing,
        delivery({ accountId: 'outbox-metrics', amount: 1 }, { messageId }),
        dependencies(stack.container, { now: () => new Date(at) }),
      );
    }
    const sent: OutboxMessage[] = [];
    const runtime = inboxRuntime();
    const { publisher } = runtime;
    runtime.publisher = {
      send: (_topic, messages) => Promise.resolve((sent.push(...messages), [])),
      close: () => Promise.resolve(),
    };
    try {
      const run = await runTimer('outbox-sweeper');

      expect(run.error).toBeUndefined();
      expect(sent).toHaveLength(2);
      expect(await sink.value(METRIC_NAMES.outboxSent, { source: 'sweeper' })).toBe(2);
      expect(await sink.value(METRIC_NAMES.outboxPending)).toBe(pendingBefore + 3);
      expect(await sink.value(METRIC_NAMES.outboxOldestPendingAge)).toBeGreaterThanOrEqual(600);
      expect(run.logs.map((line) => line.text).join('\n')).toContain('Resent 2 outbox messages');
    } finally {
      runtime.publisher = publisher;
    }
  });

  it('keeps reporting what is pending while the sweeper cannot send, and fails the run', async () => {
    const publishing = testConsumer((_message, tx) => {
      tx.publish({ topic: 'business-events', subject: 'Audited', body: {} });
    });
    await processDelivery(
      publishing,
      delivery({ accountId: 'outbox-outage', amount: 1 }, { messageId: 'o-outage' }),
      dependencies(stack.container, { now: () => new Date(Date.now() - 3_600_000) }),
    );
    const pending = (
      await stack.container.items
        .query<number>('SELECT VALUE COUNT(1) FROM c WHERE c.type = "outbox" AND c.status = "pending"')
        .fetchAll()
    ).resources[0] as number;
    const runtime = inboxRuntime();
    const { publisher } = runtime;
    runtime.publisher = {
      send: () => Promise.reject(new Error('ServiceBusError: ServiceCommunicationProblem')),
      close: () => Promise.resolve(),
    };
    try {
      const run = await runTimer('outbox-sweeper');

      expect(run.error?.message).toContain('ServiceCommunicationProblem');
      expect(run.logs.map((line) => line.text).join('\n')).toContain(
        'Outbox sweeper: topic business-events failed its messages',
      );
      expect(
        await sink.value(METRIC_NAMES.outboxSendFailures, { topic: 'business-events', source: 'sweeper' }),
      ).toBe(1);
      expect(await sink.value(METRIC_NAMES.outboxPending)).toBe(pending);
      expect(await sink.value(METRIC_NAMES.outboxOldestPendingAge)).toBeGreaterThanOrEqual(3_600);
    } finally {
      runtime.publisher = publisher;
    }
  });
});
