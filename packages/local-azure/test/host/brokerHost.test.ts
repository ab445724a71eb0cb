import { FunctionsHost, type HostOptions } from '../../src/host/brokerHost';
import { loadFunctionApp } from '../../src/host/worker';
import type { BrokerTopology } from '../../src/servicebus/broker';
import { Broker } from '../../src/servicebus/broker';
import { type ScaledClock, scaledClock } from '../../src/servicebus/clock';
import { onProbeDelivery, PROBE_FUNCTION, probeDeliveries } from '../../src/testing/probe';

const topology: BrokerTopology = {
  topics: [{ name: 'events', subscriptions: [{ name: 'sub', subjects: ['S'] }] }],
};

interface Seen {
  body: unknown;
  metadata: Record<string, unknown> | undefined;
  /** Model time the invocation started. */
  at: number;
}

let clock: ScaledClock;
/** Waits in model time without keeping the process alive (the handler a timed-out host gave up on runs on). */
const modelDelay = (ms: number): Promise<void> => new Promise((resolve) => clock.after(ms, resolve));

/** The host model over the probe function (topic `events`, subscription `sub`), loaded through the worker path. */
async function hostWith(
  handler: (seen: Seen) => Promise<void>,
  faults = {},
  options: Partial<HostOptions> & { scale?: number } = {},
): Promise<{ broker: Broker; host: FunctionsHost; seen: Seen[] }> {
  clock = scaledClock(options.scale ?? 250);
  const broker = new Broker({ topology, clock, maxDeliveryCount: 3 });
  const seen: Seen[] = [];
  probeDeliveries.length = 0;
  onProbeDelivery(async ({ message, context }) => {
    const entry = { body: message, metadata: context.triggerMetadata, at: clock.now() };
    seen.push(entry);
    await handler(entry);
  });
  const app = await loadFunctionApp(PROBE_FUNCTION);
  return {
    broker,
    host: new FunctionsHost(broker, app.serviceBus, { clock, faults, random: () => 0, ...options }),
    seen,
  };
}

describe('FunctionsHost (model)', () => {
  it('hands the handler the JSON-parsed body and JSON-parsed, camelCased metadata', async () => {
    const { broker, host, seen } = await hostWith(() => Promise.resolve());
    host.start();

    broker.topic('events').send({
      messageId: '12345',
      subject: 'S',
      body: '{"amount": 5}',
      applicationProperties: { tenant: 't1' },
    });
    broker.topic('events').send({ messageId: 'plain-text', subject: 'S', body: 'not json' });
    await host.drained();
    await host.stop();

    expect(seen[0]?.body).toEqual({ amount: 5 });
    expect(seen[0]?.metadata).toMatchObject({
      messageId: 12345,
      deliveryCount: 1,
      subject: 'S',
      applicationProperties: { tenant: 't1' },
    });
    expect(seen[1]?.body).toBe('not json');
    expect(seen[1]?.metadata?.messageId).toBe('plain-text');
  });

  it('completes on return and abandons on throw, until the message is dead-lettered', async () => {
    const { broker, host } = await hostWith(async ({ body }) => {
      if (body === 'fail') throw new Error('boom');
      await Promise.resolve();
    });
    host.start();

    broker.topic('events').send({ messageId: 'ok', subject: 'S', body: 'fine' });
    broker.topic('events').send({ messageId: 'bad', subject: 'S', body: 'fail' });
    await host.drained();
    await host.stop();
    const subscription = broker.subscription('events', 'sub');

    expect(subscription.entity.completed.map((m) => m.messageId)).toEqual(['ok']);
    expect(host.deliveries.filter((d) => d.messageId === 'bad').map((d) => d.settlement)).toEqual([
      'abandoned',
      'abandoned',
      'abandoned',
    ]);
    expect(subscription.deadLetterQueue.peek()[0]?.deadLetter?.description).toContain('Error: boom');
  });

  it('crashing after the handler returned leaves the message to come back when its lock runs out', async () => {
    const { broker, host, seen } = await hostWith(() => Promise.resolve(), { crashAfterCommit: 1 });
    host.start();

    broker.topic('events').send({ messageId: 'm', subject: 'S', body: '1' });
    while (seen.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    await host.stop();

    expect(seen.map((s) => s.metadata?.deliveryCount)).toEqual([1, 2]);
    expect(host.deliveries[0]?.settlement).toBe('crashed');
  });

  it('renews the lock while the handler runs, up to maxAutoLockRenewalDuration', async () => {
    // Lock PT1M; the handler takes 3 minutes on its first delivery.
    const slowFirst = async ({ metadata }: Seen): Promise<void> => {
      if (metadata?.deliveryCount === 1) await modelDelay(180_000);
    };
    const renewed = await hostWith(
      slowFirst,
      {},
      { maxAutoLockRenewalMs: 300_000, functionTimeoutMs: 3_600_000 },
    );
    renewed.host.start();
    renewed.broker.topic('events').send({ messageId: 'm', subject: 'S', body: '1' });
    await renewed.host.drained();
    await renewed.host.stop();
    expect(renewed.host.deliveries.map((d) => d.settlement)).toEqual(['completed']);

    // Renewal stops after 1 minute: the lock runs out while the handler still runs; another
    // delivery starts concurrently, and the first one's completion finds its lock gone.
    const lapsed = await hostWith(
      slowFirst,
      {},
      { maxAutoLockRenewalMs: 60_000, functionTimeoutMs: 3_600_000 },
    );
    lapsed.host.start();
    lapsed.broker.topic('events').send({ messageId: 'm', subject: 'S', body: '1' });
    while (lapsed.host.deliveries.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    await lapsed.host.stop();
    expect(lapsed.host.deliveries.map((d) => [d.deliveryCount, d.settlement])).toEqual([
      [2, 'completed'],
      [1, 'lock-lost'],
    ]);
  });

  it('gives up an invocation that outlasts functionTimeout: abandoned, and at once delivered again', async () => {
    const { broker, host, seen } = await hostWith(
      async ({ metadata }) => {
        if (metadata?.deliveryCount === 1) await modelDelay(600_000);
      },
      {},
      { maxAutoLockRenewalMs: 300_000, functionTimeoutMs: 90_000, scale: 50 },
    );
    host.start();
    broker.topic('events').send({ messageId: 'm', subject: 'S', body: '1' });
    await host.drained();
    await host.stop();

    expect(host.deliveries.map((d) => [d.deliveryCount, d.settlement])).toEqual([
      [1, 'timed-out'],
      [2, 'completed'],
    ]);
    // Redelivered at once after the abandon, not when the first lock (renewed, PT1M) would have run out.
    const [first, second] = seen;
    expect((second?.at ?? Infinity) - (first?.at ?? 0)).toBeLessThan(90_000 + 60_000);
    // Given up long before the handler (10 minutes) would have returned.
    expect(host.deliveries[0]?.settledAt).toBeLessThan((first?.at ?? 0) + 600_000);
  });
});
