import { InvocationContext } from '@azure/functions';

import {
  breakerLimits,
  CircuitBreaker,
  type InboxRuntime,
  InboxTelemetry,
  loadSettings,
  purgeTimerHandler,
  systemClock,
} from '#inbox/internal';

import { useLocalStack } from '../support/localStack';

/**
 * The purge timer's drift check (issue 25, src/inbox/azureFunctions.ts purgeTimerHandler), on the
 * library's own runtime against the local Cosmos DB server: the deployed entities come from a
 * function here, standing in for Azure Resource Manager (src/serviceBusEntities.ts reads it in the
 * app; test/functions/entityDrift.test.ts runs the whole path through the worker).
 */
const stack = useLocalStack();
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

it('purges without a check when the app has no SERVICEBUS_RESOURCE_ID', async () => {
  const lines = await purgeOnce(runtime());

  expect(lines).toEqual([expect.stringMatching(/^information: Purged \d+ expired markers /)]);
});

it('purges when the entities match the settings', async () => {
  const lines = await purgeOnce(runtime(() => Promise.resolve(matching)));

  expect(lines).toEqual([expect.stringMatching(/^information: Purged \d+ expired markers /)]);
});

it('skips the purge on unsafe drift, with an error that counts it', async () => {
  const drifted = {
    ...matching,
    subscriptions: [
      {
        ...matching.subscriptions[0]!,
        properties: { ...matching.subscriptions[0]!.properties, maxDeliveryCount: 50_000 },
      },
    ],
  };

  const lines = await purgeOnce(runtime(() => Promise.resolve(drifted)));

  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^error: Purge skipped: The deployed Service Bus entities no longer match/);
  expect(lines[0]).toContain(
    'events/billing maxDeliveryCount is 50000 where SERVICEBUS_MAX_DELIVERY_COUNT=10',
  );
  expect(lines[0]).toMatch(/ \{"unsafeDrifts":1\}$/);
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

it('purges, with a bounded warning, when the entities cannot be read', async () => {
  const lines = await purgeOnce(runtime(() => Promise.reject(new Error(`unreachable ${'x'.repeat(500)}`))));

  expect(lines).toHaveLength(2);
  expect(lines[0]).toMatch(
    /^warning: Could not read the deployed Service Bus entities before purging \{"error":"unreachable x+…\(512 characters\)"\}$/,
  );
  expect(lines[0]!.length).toBeLessThan(420);
  expect(lines[1]).toMatch(/^information: Purged \d+ expired markers /);
  // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- a rejection that is not an Error
  const notAnError = await purgeOnce(runtime(() => Promise.reject('refused')));
  expect(notAnError[0]).toContain('{"error":"refused"}');
});
