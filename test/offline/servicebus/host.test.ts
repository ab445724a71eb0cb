import { loadFunctionApp } from '../../../offline/functions/worker';
import { Broker } from '../../../offline/servicebus/broker';
import { scaledClock } from '../../../offline/servicebus/clock';
import { FunctionsHost } from '../../../offline/servicebus/host';
import type { Topology } from '../../../src/topology';
import { onDelivery, PROBE_FUNCTION, received } from '../../support/probeFunction';

const topology: Topology = {
  topics: [{ name: 'events', subscriptions: [{ name: 'sub', consumer: 'c', subjects: ['S'] }] }],
};

interface Seen {
  body: unknown;
  metadata: Record<string, unknown> | undefined;
}

/** The host model over the probe function (topic `events`, subscription `sub`), loaded through the worker path. */
async function hostWith(
  handler: (seen: Seen) => Promise<void>,
  faults = {},
): Promise<{ broker: Broker; host: FunctionsHost; seen: Seen[] }> {
  const clock = scaledClock(250);
  const broker = new Broker({ topology, clock, maxDeliveryCount: 3 });
  const seen: Seen[] = [];
  received.length = 0;
  onDelivery(async ({ message, context }) => {
    const entry = { body: message, metadata: context.triggerMetadata };
    seen.push(entry);
    await handler(entry);
  });
  const app = await loadFunctionApp(PROBE_FUNCTION);
  return {
    broker,
    host: new FunctionsHost(broker, app.serviceBus, { clock, faults, random: () => 0 }),
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
});
