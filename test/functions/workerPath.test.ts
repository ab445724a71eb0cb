import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { appFunctions, PROJECT_ROOT } from '@idempotent-consumers/devkit';
import { functionNameOf } from '@idempotent-consumers/inbox/internal';
import { loadFunctionApp, useLocalStack } from '@idempotent-consumers/local-azure';

import { topology } from '../../src/topology';

// The app reads the Cosmos DB account when it starts (src/app.ts, checkWriteRegions): a local one,
// with one write region, as the Bicep deploys it.
useLocalStack();

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
      `require('@idempotent-consumers/local-azure').loadFunctionApp(require('@idempotent-consumers/devkit').appFunctions()).then((app) =>
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
       require('@idempotent-consumers/local-azure').loadFunctionApp(require('@idempotent-consumers/devkit').appFunctions()).then((app) =>
         console.log(JSON.stringify({ names: app.functions.map((f) => f.name), warnings: app.warnings })))`,
    );
    const loaded = JSON.parse(stdout) as { names: string[]; warnings: string[] };

    expect(loaded.names).toEqual([]);
    expect(loaded.warnings).toContain(
      `WARNING: Skipping call to register function "${APP_FUNCTIONS[0]}" because the "@azure/functions" package is in test mode.`,
    );
  });
});
