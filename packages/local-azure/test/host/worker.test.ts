import { app } from '@azure/functions';

import { loadFunctionApp, loggedOutcome, type ServiceBusDelivery } from '../../src/host/worker';
import {
  onProbeDelivery,
  PROBE_FUNCTION,
  probeDeliveries,
  type ProbeDelivery,
} from '../../src/testing/probe';

/** Delivers to the probe function and returns what it probeDeliveries. */
async function probe(delivery: ServiceBusDelivery): Promise<ProbeDelivery> {
  probeDeliveries.length = 0;
  const result = await (await loadFunctionApp(PROBE_FUNCTION)).invokeServiceBus('probe', delivery);
  expect(result.error).toBeUndefined();
  return probeDeliveries[0]!;
}

afterEach(() => onProbeDelivery(() => Promise.resolve()));

// What the library makes of these values is the library's test: packages/inbox/test/delivery.test.ts.
describe('a Service Bus delivery, as the host sends it', () => {
  it('parses a JSON body and leaves other text as a string, bytes included', async () => {
    const json = await probe({ body: '{"amount":5,"TenantId":"t"}' });
    const text = await probe({ body: 'not { json' });
    const bytes = await probe({ body: Buffer.from('{"amount":6}') });

    expect(json.message).toEqual({ amount: 5, TenantId: 't' });
    expect(text.message).toBe('not { json');
    expect(bytes.message).toEqual({ amount: 6 });
  });

  it('camelCases metadata keys, nested ones included: an application property TenantId arrives as tenantId', async () => {
    const { context } = await probe({
      body: '{}',
      applicationProperties: { TenantId: 'contoso', Attempt: 2 },
    });

    expect(context.triggerMetadata?.applicationProperties).toEqual({ tenantId: 'contoso', attempt: 2 });
    expect(context.triggerMetadata?.userProperties).toEqual({ tenantId: 'contoso', attempt: 2 });
  });

  it('sends numbers as JSON: DeliveryCount and SequenceNumber arrive as numbers', async () => {
    const { context } = await probe({ body: '{}', deliveryCount: 3, sequenceNumber: 42 });

    expect(context.triggerMetadata?.deliveryCount).toBe(3);
    expect(context.triggerMetadata?.sequenceNumber).toBe(42);
  });

  it('JSON-parses text metadata: a MessageId "1e3" arrives as the number 1000', async () => {
    const { context } = await probe({ body: '{}', messageId: '1e3' });

    expect(context.triggerMetadata?.messageId).toBe(1000);
  });

  it('sends the UTC times without a zone designator, as Json.NET writes DateTimeOffset.DateTime', async () => {
    const { context } = await probe({ body: '{}', enqueuedTimeUtc: new Date('2026-11-29T10:00:00.120Z') });

    expect(context.triggerMetadata?.enqueuedTimeUtc).toBe('2026-11-29T10:00:00.12');
    expect(context.triggerMetadata?.enqueuedTime).toBe('2026-11-29T10:00:00.12+00:00');
    expect(context.triggerMetadata?.expiresAtUtc).toBe('9999-12-31T23:59:59.9999999');
  });

  it("lets a JSON body's top-level properties shadow the broker's metadata, names compared ignoring case", async () => {
    const { context } = await probe({
      body: '{"messageId":"from-the-body","DeliveryCount":7,"paid":true}',
      messageId: 'from-the-broker',
      deliveryCount: 1,
    });

    expect(context.triggerMetadata).toMatchObject({
      messageId: 'from-the-body',
      deliveryCount: 7,
      paid: 'True',
    });
  });

  it('runs the function between the invocation hooks and reports a throw as a failure', async () => {
    const seen: string[] = [];
    const pre = app.hook.preInvocation((context) => {
      seen.push(`pre ${context.invocationContext.functionName}`);
      context.inputs = ['replaced by the hook'];
    });
    const post = app.hook.postInvocation((context) => {
      seen.push(`post ${String(context.error)}`);
    });
    onProbeDelivery(({ context }) => {
      context.warn('about to fail');
      return Promise.reject(new Error('boom'));
    });

    try {
      probeDeliveries.length = 0;
      const result = await (await loadFunctionApp(PROBE_FUNCTION)).invokeServiceBus('probe', { body: '{}' });

      expect(probeDeliveries[0]?.message).toBe('replaced by the hook');
      expect(seen).toEqual(['pre probe', 'post Error: boom']);
      expect(result.error?.message).toBe('boom');
      expect(result.response.result).toMatchObject({ status: 'failure', exception: { message: 'boom' } });
      expect(result.logs).toContainEqual({ level: 'warning', category: 'user', text: 'about to fail' });
    } finally {
      pre.dispose();
      post.dispose();
    }
  });
});

describe('a timer run, as the host sends it', () => {
  it("hands the function the extension's TimerInfo, camelCased, and no trigger metadata", async () => {
    probeDeliveries.length = 0;
    const loaded = await loadFunctionApp(PROBE_FUNCTION);

    const result = await loaded.invokeTimer('probeTimer', {
      isPastDue: true,
      scheduleStatus: {
        last: new Date('2026-11-29T09:55:00Z'),
        next: new Date('2026-11-29T10:05:00Z'),
        lastUpdated: new Date('2026-11-29T09:55:00.5Z'),
      },
    });

    expect(result.error).toBeUndefined();
    expect(probeDeliveries[0]?.message).toEqual({
      schedule: { adjustForDST: true },
      scheduleStatus: {
        last: '2026-11-29T09:55:00+00:00',
        next: '2026-11-29T10:05:00+00:00',
        lastUpdated: '2026-11-29T09:55:00.5+00:00',
      },
      isPastDue: true,
    });
    expect(probeDeliveries[0]?.context.triggerMetadata).toBeUndefined();
    expect(loaded.timers).toContainEqual({
      name: 'probeTimer',
      schedule: '0 */5 * * * *',
      runOnStartup: false,
    });
  });
});

describe('loggedOutcome', () => {
  it('reads the last outcome an inbox consumer logged, or nothing when it logged none', () => {
    expect(
      loggedOutcome([
        { level: 'information', category: 'user', text: 'Processed {"outcome":"processed"}' },
        { level: 'information', category: 'user', text: 'Again {"outcome":"duplicate"}' },
      ]),
    ).toBe('duplicate');
    expect(loggedOutcome([{ level: 'debug', category: 'system', text: 'probeDeliveries' }])).toBeUndefined();
  });
});
