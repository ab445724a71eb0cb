// The Service Bus triggers npm start runs (packages/local-azure/src/host/serviceBusTriggers.ts), over AMQP with the real
// @azure/service-bus receiver against the local peer, invoking a fixture app through the worker path.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  ServiceBusTriggers,
  type TriggerDelivery,
  type TriggerSettings,
  triggerSettings,
} from '../../src/host/serviceBusTriggers';
import { loadFunctionApp, type ServiceBusFunction } from '../../src/host/worker';
import { PAYMENTS, TOPIC, usePeer } from '../../src/testing/peer';
import { seen } from './fixtureApp';

const peer = usePeer({ maxDeliveryCount: 3, lockDurationMs: 5_000 });
let consumer: ServiceBusFunction;
let deliveries: TriggerDelivery[];
let triggers: ServiceBusTriggers | undefined;

const SETTINGS: TriggerSettings = {
  maxConcurrentCalls: 2,
  prefetchCount: 0,
  autoCompleteMessages: true,
  maxAutoLockRenewalMs: 60_000,
  functionTimeoutMs: 60_000,
};

beforeAll(async () => {
  const app = await loadFunctionApp([join(__dirname, 'fixtureApp.ts')]);
  const found = app.serviceBus.find((f) => f.name === 'fixture-consumer');
  if (!found) throw new Error('The fixture app did not register its trigger.');
  consumer = found;
});

beforeEach(() => {
  Object.assign(seen, { running: 0, maxRunning: 0, bodies: [] });
  deliveries = [];
});

afterEach(async () => {
  await triggers?.stop();
  triggers = undefined;
});

function run(settings: Partial<TriggerSettings> = {}): void {
  triggers = new ServiceBusTriggers(
    peer.client,
    [consumer],
    { ...SETTINGS, ...settings },
    (delivery) => deliveries.push(delivery),
    (_name, error) => {
      throw error;
    },
  );
  triggers.start();
}

async function send(...bodies: string[]): Promise<void> {
  const sender = peer.client.createSender(TOPIC);
  await sender.sendMessages(
    bodies.map((body, i) => ({ body, subject: 'PaymentReceived', messageId: `m-${i}-${body}` })),
  );
  await sender.close();
}

const subscription = () => peer.peer.broker.subscription(TOPIC, PAYMENTS);

/** Waits until `done`, sampling the subscription's locked messages meanwhile; returns the most seen. */
async function until(done: () => boolean): Promise<number> {
  let mostLocked = 0;
  while (!done()) {
    mostLocked = Math.max(mostLocked, subscription().entity.lockedCount);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return mostLocked;
}

describe('host.json settings', () => {
  it("reads the project's host.json", () => {
    const hostJson = JSON.parse(
      readFileSync(join(__dirname, '..', '..', '..', '..', 'host.json'), 'utf8'),
    ) as {
      functionTimeout: string;
      extensions: { serviceBus: { maxConcurrentCalls: number; prefetchCount: number } };
    };
    const settings = triggerSettings(hostJson);
    expect(settings.maxConcurrentCalls).toBe(hostJson.extensions.serviceBus.maxConcurrentCalls);
    expect(settings.prefetchCount).toBe(hostJson.extensions.serviceBus.prefetchCount);
    expect(settings.autoCompleteMessages).toBe(true);
    expect(settings.maxAutoLockRenewalMs).toBe(300_000);
    expect(settings.functionTimeoutMs).toBe(300_000);
  });

  it("takes the extension's defaults for what host.json leaves out", () => {
    const settings = triggerSettings({ version: '2.0' });
    expect(settings).toMatchObject({
      prefetchCount: 0,
      autoCompleteMessages: true,
      maxAutoLockRenewalMs: 300_000,
    });
    expect(settings.maxConcurrentCalls % 16).toBe(0);
  });

  it('refuses values the host would not take', () => {
    expect(() => triggerSettings({ extensions: { serviceBus: { maxConcurrentCalls: 0 } } })).toThrow(
      /maxConcurrentCalls/,
    );
    expect(() => triggerSettings({ extensions: { serviceBus: { prefetchCount: '5' } } })).toThrow(
      /prefetchCount/,
    );
    expect(() => triggerSettings({ functionTimeout: 'five minutes' })).toThrow(/functionTimeout/);
    expect(() => triggerSettings({ extensions: { serviceBus: { autoCompleteMessages: 'yes' } } })).toThrow(
      /autoCompleteMessages/,
    );
  });
});

describe('deliveries', () => {
  it("runs each in the trace of its message's Diagnostic-Id, or in a trace of its own, and reports it", async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const sender = peer.client.createSender(TOPIC);
    await sender.sendMessages([
      {
        body: 'traced',
        subject: 'PaymentReceived',
        messageId: 'traced',
        applicationProperties: { 'Diagnostic-Id': `00-${traceId}-b7ad6b7169203331-01` },
      },
      { body: 'untraced', subject: 'PaymentReceived', messageId: 'untraced' },
      {
        body: 'malformed',
        subject: 'PaymentReceived',
        messageId: 'malformed',
        applicationProperties: { 'Diagnostic-Id': 'not a traceparent' },
      },
    ]);
    await sender.close();
    run();
    await until(() => deliveries.length === 3);

    const traceOf = (messageId: string): string | undefined =>
      deliveries.find((d) => d.messageId === messageId)?.traceId;
    expect(traceOf('traced')).toBe(traceId);
    for (const own of [traceOf('untraced'), traceOf('malformed')]) {
      expect(own).toMatch(/^[0-9a-f]{32}$/);
      expect(own).not.toBe(traceId);
    }
    expect(traceOf('untraced')).not.toBe(traceOf('malformed'));
  });

  it('runs at most maxConcurrentCalls at once and completes what returns', async () => {
    await send(...Array.from({ length: 8 }, () => 'slow'));
    run();
    const mostLocked = await until(() => deliveries.length === 8);
    expect(deliveries.map((d) => d.settlement)).toEqual(Array(8).fill('completed'));
    expect(seen.maxRunning).toBe(2);
    expect(mostLocked).toBeLessThanOrEqual(2);
    expect(subscription().entity.activeCount).toBe(0);
  });

  it('with prefetchCount, holds that many more messages locked but still runs maxConcurrentCalls at once', async () => {
    await send(...Array.from({ length: 8 }, () => 'slow'));
    run({ maxConcurrentCalls: 1, prefetchCount: 3 });
    const mostLocked = await until(() => deliveries.length === 8);
    expect(seen.maxRunning).toBe(1);
    expect(mostLocked).toBeGreaterThan(1);
    expect(mostLocked).toBeLessThanOrEqual(4);
  });

  it('abandons what throws, counting deliveries, until Service Bus dead-letters it', async () => {
    await send('throw');
    run();
    await until(() => subscription().deadLetterQueue.activeCount === 1 && deliveries.length === 3);
    expect(deliveries.map((d) => [d.deliveryCount, d.settlement])).toEqual([
      [1, 'abandoned'],
      [2, 'abandoned'],
      [3, 'abandoned'],
    ]);
    expect(deliveries[0]?.error?.message).toBe('the fixture was told to throw');
    expect(subscription().deadLetterQueue.peek()[0]?.deadLetter?.reason).toBe('MaxDeliveryCountExceeded');
  });

  it('abandons an invocation that outlasts functionTimeout', async () => {
    await send('hang');
    run({ functionTimeoutMs: 200 });
    await until(() => deliveries.length >= 2);
    expect(deliveries.slice(0, 2).map((d) => [d.deliveryCount, d.settlement])).toEqual([
      [1, 'timed-out'],
      [2, 'timed-out'],
    ]);
  });

  it('without autoCompleteMessages, leaves a message the function does not settle locked', async () => {
    await send('ok');
    run({ autoCompleteMessages: false });
    await until(() => deliveries.length === 1);
    expect(deliveries[0]?.settlement).toBe('left-locked');
    expect(subscription().entity.activeCount).toBe(1);
    expect(subscription().entity.lockedCount).toBe(1);
  });
});
