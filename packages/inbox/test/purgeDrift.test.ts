import { InvocationContext } from '@azure/functions';
import {
  breakerLimits,
  CircuitBreaker,
  type InboxRuntime,
  InboxTelemetry,
  loadSettings,
  METRIC_NAMES,
  purgeTimerHandler,
  systemClock,
} from '@idempotent-consumers/inbox/internal';
import { MetricsSink, useLocalStack } from '@idempotent-consumers/local-azure';

/**
 * The purge timer's drift check (issue 25, packages/inbox/src/azureFunctions.ts purgeTimerHandler), on the
 * library's own runtime against the local Cosmos DB server: the deployed entities come from a
 * function here, standing in for Azure Resource Manager (src/serviceBusEntities.ts reads it in the
 * app; test/functions/entityDrift.test.ts runs the whole path through the worker).
 */
const stack = useLocalStack();
let sink: MetricsSink;
beforeAll(() => {
  sink = MetricsSink.register(); // before any runtime's telemetry makes its instruments
});
afterAll(() => sink.stop());
const checks = (result: string): Promise<number> =>
  sink.value(METRIC_NAMES.driftChecks, { when: 'purge', result });

/** Runs `work`; returns how many purge drift checks of each result it counted. */
async function counted(work: () => Promise<unknown>): Promise<Record<string, number>> {
  const results = ['checked', 'unreadable', 'off'];
  const before = await Promise.all(results.map(checks));
  await work();
  const after = await Promise.all(results.map(checks));
  return Object.fromEntries(results.map((result, i) => [result, after[i]! - before[i]!]));
}
const settings = loadSettings({ COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/' });

function runtime(deployedEntities?: InboxRuntime['deployedEntities']): InboxRuntime {
  return {
    container: stack.container,
    settings,
    telemetry: new InboxTelemetry(),
    breaker: new CircuitBreaker({
      limits: breakerLimits(settings),
      clock: systemClock,
      random: Math.random,
      probe: () => Promise.resolve(),
    }),
    publisher: { send: () => Promise.resolve([]), close: () => Promise.resolve() },
    now: () => new Date(),
    sleep: () => Promise.resolve(),
    random: () => 0.5,
    ...(deployedEntities === undefined ? {} : { deployedEntities }),
  };
}

/** Runs the purge timer once; returns what it logged, each line with its level. */
async function purgeOnce(rt: InboxRuntime): Promise<string[]> {
  const lines: string[] = [];
  const context = new InvocationContext({
    logHandler: (level, ...args) => lines.push(`${level}: ${args.map(String).join(' ')}`),
  });
  await purgeTimerHandler(() => rt)({ isPastDue: false, scheduleStatus: undefined } as never, context);
  return lines;
}

const matching = {
  topics: [
    {
      topic: 'events',
      properties: { requiresDuplicateDetection: true, duplicateDetectionHistoryTimeWindow: 'PT1H' },
    },
  ],
  subscriptions: [
    {
      topic: 'events',
      subscription: 'billing',
      properties: { lockDuration: 'PT1M', maxDeliveryCount: 10, defaultMessageTimeToLive: 'P14D' },
    },
  ],
};

it('purges without a check when the app has no SERVICEBUS_RESOURCE_ID, counting the guard off', async () => {
  let lines: string[] = [];
  expect(await counted(async () => (lines = await purgeOnce(runtime())))).toEqual({
    checked: 0,
    unreadable: 0,
    off: 1,
  });

  expect(lines).toEqual([expect.stringMatching(/^information: Purged \d+ expired markers /)]);
});

it('purges when the entities match the settings, counting the check', async () => {
  let lines: string[] = [];
  expect(
    await counted(async () => (lines = await purgeOnce(runtime(() => Promise.resolve(matching))))),
  ).toEqual({ checked: 1, unreadable: 0, off: 0 });

  expect(lines).toEqual([expect.stringMatching(/^information: Purged \d+ expired markers /)]);
});

it('skips the purge on unsafe drift, with an error that counts it', async () => {
  const subscription = matching.subscriptions[0]!;
  // One unsafe drift (a delivery count) and, on another subscription, one safe (a longer lock).
  const drifted = {
    ...matching,
    subscriptions: [
      { ...subscription, properties: { ...subscription.properties, maxDeliveryCount: 50_000 } },
      {
        ...subscription,
        subscription: 'audit',
        properties: { ...subscription.properties, lockDuration: 'PT2M' },
      },
    ],
  };
  const drifts = (unsafe: boolean): Promise<number> => sink.value(METRIC_NAMES.entityDrift, { unsafe });
  const [unsafeBefore, safeBefore] = [await drifts(true), await drifts(false)];

  const lines = await purgeOnce(runtime(() => Promise.resolve(drifted)));

  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^error: Purge skipped: The deployed Service Bus entities no longer match/);
  expect(lines[0]).toContain(
    'events/billing maxDeliveryCount is 50000 where SERVICEBUS_MAX_DELIVERY_COUNT=10',
  );
  expect(lines[0]).toMatch(/ \{"unsafeDrifts":1\}$/);
  expect([(await drifts(true)) - unsafeBefore, (await drifts(false)) - safeBefore]).toEqual([1, 1]);
});

it('purges on drift that keeps the guarantee', async () => {
  const safe = {
    ...matching,
    subscriptions: [
      {
        ...matching.subscriptions[0]!,
        properties: { ...matching.subscriptions[0]!.properties, lockDuration: 'PT2M' },
      },
    ],
  };

  const lines = await purgeOnce(runtime(() => Promise.resolve(safe)));

  expect(lines).toEqual([expect.stringMatching(/^information: Purged \d+ expired markers /)]);
});

it('pauses the purge when the entities cannot be read, with a bounded error, counted as unreadable', async () => {
  let lines: string[] = [];
  expect(
    await counted(
      async () =>
        (lines = await purgeOnce(runtime(() => Promise.reject(new Error(`refused ${'x'.repeat(500)}`))))),
    ),
  ).toEqual({ checked: 0, unreadable: 1, off: 0 });

  // One line, and no purge: a guard that cannot see is no proof against drift.
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(
    /^error: Purge paused: the drift guard could not read the deployed Service Bus entities \(check SERVICEBUS_RESOURCE_ID and the Reader role\) \{"error":"refused x+…\(508 characters\)"\}$/,
  );
  expect(lines[0]!.length).toBeLessThan(520);
  // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- a rejection that is not an Error
  const notAnError = await purgeOnce(runtime(() => Promise.reject('refused')));
  expect(notAnError).toEqual([expect.stringContaining('{"error":"refused"}')]);
});
