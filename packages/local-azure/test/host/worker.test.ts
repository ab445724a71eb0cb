import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { app } from '@azure/functions';
// eslint-disable-next-line house/boundaries -- loads the app's function files: this part moves to the app's tests
import { appFunctions, appTopology, PROJECT_ROOT } from '@idempotent-consumers/devkit';
// eslint-disable-next-line house/boundaries -- as above
import { functionNameOf, toDelivery } from '@idempotent-consumers/inbox/internal';

import { loadFunctionApp, loggedOutcome, type ServiceBusDelivery } from '../../src/host/worker';
import { useLocalStack } from '../../src/testing/localStack';
import { onDelivery, PROBE_FUNCTION, type Received, received } from '../support/probeFunction';

// The app reads the Cosmos DB account when it starts (src/app.ts, checkWriteRegions): a local one,
// with one write region, as the Bicep deploys it.
useLocalStack();

const topology = appTopology();

/**
 * functions/<name>.ts, in the order the worker loads them: one per subscription, the purge timer,
 * the outbox relay (change feed) and its sweeper (timer).
 */
const APP_FUNCTIONS = [
  ...topology.topics.flatMap((t) => t.subscriptions.map((s) => functionNameOf(s.name))),
  'outbox-relay',
  'outbox-sweeper',
  'purge-expired-markers',
].sort();

/** Runs `code` in a fresh Node.js process (sources through tsx, no jest), from the project root. */
function node(code: string): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [require.resolve('tsx/cli'), '-e', code], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, APPLICATIONINSIGHTS_CONNECTION_STRING: '' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve({ stdout, stderr }) : reject(new Error(`exit ${code}: ${stderr}`)),
    );
  });
}

const TEST_MODE = 'WARNING: Failed to detect the Azure Functions runtime';

/** Delivers to the probe function and returns what it received. */
async function probe(delivery: ServiceBusDelivery): Promise<Received> {
  received.length = 0;
  const result = await (await loadFunctionApp(PROBE_FUNCTION)).invokeServiceBus('probe', delivery);
  expect(result.error).toBeUndefined();
  return received[0]!;
}

afterEach(() => onDelivery(() => Promise.resolve()));

describe('loading the app through the worker path', () => {
  it('registers every function with the binding metadata the host reads, without a test-mode warning', async () => {
    const loaded = await loadFunctionApp(appFunctions());
    // This file also registers the probe functions; the app's are those loaded from functions/.
    const registered = loaded.functions.filter(
      (f) => f.metadata.directory === join(PROJECT_ROOT, 'functions'),
    );
    const triggers = Object.fromEntries(
      registered.map((f) => [f.name, Object.values(f.metadata.bindings)] as const),
    );
    const subscriptions = topology.topics.flatMap((topic) =>
      topic.subscriptions.map((subscription) => ({
        type: 'serviceBusTrigger',
        direction: 'in',
        connection: 'ServiceBusConnection',
        topicName: topic.name,
        subscriptionName: subscription.name,
      })),
    );

    expect(loaded.warnings).toEqual([]);
    expect(Object.keys(triggers).sort()).toEqual(APP_FUNCTIONS);
    expect(triggers['purge-expired-markers']).toEqual([
      expect.objectContaining({
        type: 'timerTrigger',
        direction: 'in',
        schedule: '0 */5 * * * *',
        runOnStartup: false,
      }),
    ]);
    expect(triggers['outbox-sweeper']).toEqual([
      expect.objectContaining({ type: 'timerTrigger', schedule: '0 * * * * *', runOnStartup: false }),
    ]);
    expect(triggers['outbox-relay']).toEqual([
      expect.objectContaining({
        type: 'cosmosDBTrigger',
        direction: 'in',
        connection: 'CosmosDBConnection',
        databaseName: 'app',
        containerName: 'state',
        leaseContainerName: 'leases',
        createLeaseContainerIfNotExists: false,
        startFromBeginning: true,
        maxItemsPerInvocation: 100,
      }),
    ]);
    // The relay's retry policy is function metadata the host reads (RpcFunctionMetadata.retryOptions).
    expect(registered.find((f) => f.name === 'outbox-relay')?.metadata.retryOptions).toEqual(
      expect.objectContaining({ strategy: 'exponentialBackoff', maxRetryCount: 8 }),
    );
    const others = [triggers['purge-expired-markers'], triggers['outbox-sweeper'], triggers['outbox-relay']];
    const serviceBusTriggers = Object.values(triggers).filter((bindings) => !others.includes(bindings));
    expect(serviceBusTriggers).toHaveLength(subscriptions.length);
    expect(serviceBusTriggers).toEqual(
      expect.arrayContaining(
        subscriptions.map((subscription): unknown[] => [expect.objectContaining(subscription)]),
      ),
    );
    for (const f of registered) expect(f.metadata.scriptFile).toBe(`${f.name}.ts`);
  });

  it('in a plain Node.js process, registers the functions; without the worker, the library says it is in test mode', async () => {
    const withWorker = await node(
      `require('./packages/local-azure/src/host/worker.ts').loadFunctionApp(require('./packages/devkit/src/cli/project.ts').appFunctions()).then((app) =>
         console.log(JSON.stringify({ names: app.functions.map((f) => f.name), warnings: app.warnings })))`,
    );
    const withoutWorker = await node(`require('./functions/purge-expired-markers.ts')`);

    expect(JSON.parse(withWorker.stdout)).toEqual({ names: APP_FUNCTIONS, warnings: [] });
    expect(withWorker.stderr).not.toContain(TEST_MODE);
    expect(withoutWorker.stderr).toContain(TEST_MODE);
    expect(withoutWorker.stderr).toContain('Skipping call to register function "purge-expired-markers"');
  });

  it('reports the warnings of a library that settled on test mode before the worker module was there', async () => {
    const { stdout } = await node(
      `require('@azure/functions').app.timer('early', { schedule: '0 0 * * * *', handler: () => undefined });
       require('./packages/local-azure/src/host/worker.ts').loadFunctionApp(require('./packages/devkit/src/cli/project.ts').appFunctions()).then((app) =>
         console.log(JSON.stringify({ names: app.functions.map((f) => f.name), warnings: app.warnings })))`,
    );
    const loaded = JSON.parse(stdout) as { names: string[]; warnings: string[] };

    expect(loaded.names).toEqual([]);
    expect(loaded.warnings).toContain(
      `WARNING: Skipping call to register function "${APP_FUNCTIONS[0]}" because the "@azure/functions" package is in test mode.`,
    );
  });
});

describe('a Service Bus delivery, as the host sends it and the library converts it', () => {
  it('parses a JSON body and leaves other text as a string, bytes included', async () => {
    const json = await probe({ body: '{"amount":5,"TenantId":"t"}' });
    const text = await probe({ body: 'not { json' });
    const bytes = await probe({ body: Buffer.from('{"amount":6}') });

    expect(json.message).toEqual({ amount: 5, TenantId: 't' });
    expect(text.message).toBe('not { json');
    expect(bytes.message).toEqual({ amount: 6 });
  });

  it('camelCases metadata keys, nested ones included: an application property TenantId arrives as tenantId', async () => {
    const { message, context } = await probe({
      body: '{}',
      applicationProperties: { TenantId: 'contoso', Attempt: 2 },
    });

    expect(context.triggerMetadata?.applicationProperties).toEqual({ tenantId: 'contoso', attempt: 2 });
    expect(context.triggerMetadata?.userProperties).toEqual({ tenantId: 'contoso', attempt: 2 });
    expect(toDelivery(message, context).applicationProperties).toEqual({ tenantId: 'contoso', attempt: 2 });
  });

  it('sends numbers as JSON: DeliveryCount and SequenceNumber arrive as numbers', async () => {
    const { context } = await probe({ body: '{}', deliveryCount: 3, sequenceNumber: 42 });

    expect(context.triggerMetadata?.deliveryCount).toBe(3);
    expect(context.triggerMetadata?.sequenceNumber).toBe(42);
  });

  it('JSON-parses text metadata: a MessageId "1e3" arrives as the number 1000', async () => {
    const { message, context } = await probe({ body: '{}', messageId: '1e3' });

    expect(context.triggerMetadata?.messageId).toBe(1000);
    expect(toDelivery(message, context).messageId).toBe('1000');
  });

  it('sends the UTC times without a zone designator, as Json.NET writes DateTimeOffset.DateTime', async () => {
    const { context } = await probe({ body: '{}', enqueuedTimeUtc: new Date('2026-11-29T10:00:00.120Z') });

    expect(context.triggerMetadata?.enqueuedTimeUtc).toBe('2026-11-29T10:00:00.12');
    expect(context.triggerMetadata?.enqueuedTime).toBe('2026-11-29T10:00:00.12+00:00');
    expect(context.triggerMetadata?.expiresAtUtc).toBe('9999-12-31T23:59:59.9999999');
  });

  it("lets a JSON body's top-level properties shadow the broker's metadata, names compared ignoring case", async () => {
    const { message, context } = await probe({
      body: '{"messageId":"from-the-body","DeliveryCount":7,"paid":true}',
      messageId: 'from-the-broker',
      deliveryCount: 1,
    });

    expect(context.triggerMetadata).toMatchObject({
      messageId: 'from-the-body',
      deliveryCount: 7,
      paid: 'True',
    });
    // The adapter does not take them for the broker's: such a message is poison (see sample/test/functions/deliveryFailures.test.ts).
    expect(toDelivery(message, context)).toMatchObject({
      messageId: undefined,
      shadowedByBody: ['messageId', 'deliveryCount'],
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
    onDelivery(({ context }) => {
      context.warn('about to fail');
      return Promise.reject(new Error('boom'));
    });

    try {
      received.length = 0;
      const result = await (await loadFunctionApp(PROBE_FUNCTION)).invokeServiceBus('probe', { body: '{}' });

      expect(received[0]?.message).toBe('replaced by the hook');
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
    received.length = 0;
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
    expect(received[0]?.message).toEqual({
      schedule: { adjustForDST: true },
      scheduleStatus: {
        last: '2026-11-29T09:55:00+00:00',
        next: '2026-11-29T10:05:00+00:00',
        lastUpdated: '2026-11-29T09:55:00.5+00:00',
      },
      isPastDue: true,
    });
    expect(received[0]?.context.triggerMetadata).toBeUndefined();
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
    expect(loggedOutcome([{ level: 'debug', category: 'system', text: 'received' }])).toBeUndefined();
  });
});
