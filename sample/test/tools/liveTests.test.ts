import { spawn } from 'node:child_process';

import { appFunctions, PROJECT_ROOT, RETRY_COPIES } from '@idempotent-consumers/devkit';
import { captured } from '@idempotent-consumers/devkit/internal/testing/tools';
import {
  FunctionsHost,
  loadFunctionApp,
  type LocalServiceBus,
  startServiceBus as start,
  useLocalStack,
} from '@idempotent-consumers/local-azure';

import { topology } from '../../../src/topology';
import { endToEnd } from '../../liveTests';

function runScript(
  env: Record<string, string | undefined>,
): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [require.resolve('tsx/cli'), 'sample/liveTests.ts'], {
      cwd: PROJECT_ROOT,
      env,
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout }));
  });
}

describe('npm run test:live without Azure', () => {
  it('skips each part with one line saying why, and exits 0', async () => {
    const { code, stdout } = await runScript({ PATH: process.env.PATH, HOME: process.env.HOME });

    const skips = stdout.split('\n').filter((line) => line.startsWith('skip:'));
    expect(code).toBe(0);
    expect(skips).toHaveLength(2);
    expect(skips[0]).toMatch(/Cosmos DB conformance suite: COSMOS_ENDPOINT and COSMOS_KEY are not set/);
    expect(skips[1]).toMatch(/end-to-end check .*SERVICEBUS_NAMESPACE and COSMOS_ENDPOINT are not set/);
  }, 60_000);
});

describe('the end-to-end check, run offline', () => {
  useLocalStack();
  let peer: LocalServiceBus;
  let host: FunctionsHost | undefined;

  beforeEach(async () => {
    peer = await start({ port: 0, topology, retryCopies: RETRY_COPIES });
  });
  afterEach(async () => {
    await host?.stop();
    await peer.stop();
  });

  const liveEnv = (): Record<string, string | undefined> => ({
    ...process.env,
    SERVICEBUS_NAMESPACE: undefined,
    SERVICEBUS_CONNECTION_STRING: peer.connectionString,
  });

  it('passes when the app applies the payment once although it was published twice', async () => {
    // The deployed app, offline: the host model invokes the registered functions, through the worker
    // path, on the peer's broker.
    host = new FunctionsHost(peer.broker, (await loadFunctionApp(appFunctions())).serviceBus, {
      clock: peer.clock,
    });
    host.start();
    const run = captured(liveEnv());

    const result = await endToEnd(run.context, { timeoutMs: 20_000, settleMs: 0 });

    expect(run.err).toEqual([]);
    expect(result).toBe('passed');
    expect(run.out.filter((line) => line.startsWith('published PaymentReceived'))).toHaveLength(2);
    expect(peer.broker.topic('business-events').stats.droppedAsDuplicate).toBe(1);
    expect(run.out.at(-1)).toMatch(/end to end passed: applied once, one inbox marker/);
  });

  it('fails with a hint when nothing consumes the payment within the timeout', async () => {
    const run = captured(liveEnv());

    const result = await endToEnd(run.context, { timeoutMs: 1_000, settleMs: 0 });

    expect(result).toBe('failed');
    expect(run.err.join('\n')).toMatch(/paidMinor=0 of 1234, inbox markers=0\. Is the function app running/);
  });
});
