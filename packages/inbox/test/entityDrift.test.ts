import {
  assertNoUnsafeDrift,
  type DeployedEntities,
  entityDrift,
  InboxTelemetry,
  loadSettings,
  SettingsError,
  unsafeDriftProblem,
} from '@idempotent-consumers/inbox/internal';
import { MetricsSink } from '@idempotent-consumers/local-azure';
import { metrics } from '@opentelemetry/api';

/**
 * The drift guard's decision (issue 25): each ARM property of the deployed entities against the
 * setting it should equal, and whether the difference breaks the guarantee. The settings are the
 * defaults: lock PT1M × 10 deliveries + TTL P14D + resubmit margin P7D = 21 days, under
 * INBOX_RETENTION P30D; duplicate detection PT1H.
 */
const settings = loadSettings({ COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/' });

/** What the Bicep deploys: one topic, one subscription, every value its setting's. */
function deployed(
  subscription: Record<string, unknown> = {},
  topic: Record<string, unknown> = {},
): DeployedEntities {
  return {
    topics: [
      {
        topic: 'events',
        properties: {
          requiresDuplicateDetection: true,
          duplicateDetectionHistoryTimeWindow: 'PT1H',
          defaultMessageTimeToLive: 'P10675199DT2H48M5.4775807S',
          ...topic,
        },
      },
    ],
    subscriptions: [
      {
        topic: 'events',
        subscription: 'billing',
        properties: {
          lockDuration: 'PT1M',
          maxDeliveryCount: 10,
          defaultMessageTimeToLive: 'P14D',
          ...subscription,
        },
      },
    ],
  };
}

it('finds nothing when the entities are what the settings say', () => {
  expect(entityDrift(settings, deployed())).toEqual([]);
});

it('names a longer lock that stays inside the retention as drift that keeps the guarantee', () => {
  expect(entityDrift(settings, deployed({ lockDuration: 'PT5M' }))).toEqual([
    {
      entity: 'events/billing',
      property: 'lockDuration',
      setting: 'SERVICEBUS_LOCK_DURATION',
      expected: 'PT1M',
      deployed: 'PT5M',
      unsafe: false,
    },
  ]);
});

it('calls drift unsafe once the deployed bound reaches the retention, and every drifted property with it', () => {
  // 10 min × 10 + 22 days + 7 days = 29 days 1 h 40 min: under 30 days; one more delivery reaches it.
  const under = entityDrift(settings, deployed({ lockDuration: 'PT10M', defaultMessageTimeToLive: 'P22D' }));
  const at = entityDrift(
    settings,
    deployed({ lockDuration: 'PT10M', defaultMessageTimeToLive: 'P22D', maxDeliveryCount: 200 }),
  );

  expect(under.map((d) => [d.property, d.unsafe])).toEqual([
    ['lockDuration', false],
    ['defaultMessageTimeToLive', false],
  ]);
  expect(at.map((d) => [d.property, d.deployed, d.unsafe])).toEqual([
    ['lockDuration', 'PT10M', true],
    ['maxDeliveryCount', '200', true],
    ['defaultMessageTimeToLive', 'P22D', true],
  ]);
});

it('reaches the retention exactly: a bound equal to INBOX_RETENTION is unsafe', () => {
  // 1 min × 10 + TTL + 7 days = 30 days exactly.
  const exact = entityDrift(settings, deployed({ defaultMessageTimeToLive: 'P22DT23H50M' }));

  expect(exact.map((d) => d.unsafe)).toEqual([true]);
  expect(
    entityDrift(settings, deployed({ defaultMessageTimeToLive: 'P22DT23H49M' })).map((d) => d.unsafe),
  ).toEqual([false]);
});

it("adds the subscription's longest delayed-retry wait to its bound", () => {
  // 1 min × 10 + TTL P22DT23H49M + 7 days is 60 s under 30 days: safe, until a retry wait of 60 s joins it.
  const withDelay = (longestRetryDelaySeconds: number) => {
    const entities = deployed({ defaultMessageTimeToLive: 'P22DT23H49M' });
    return entityDrift(settings, {
      ...entities,
      subscriptions: entities.subscriptions.map((s) => ({ ...s, longestRetryDelaySeconds })),
    }).map((d) => d.unsafe);
  };

  expect(withDelay(59)).toEqual([false]);
  expect(withDelay(60)).toEqual([true]);
});

it('takes the shorter of the topic TTL and the subscription TTL, the one a message gets', () => {
  const capped = entityDrift(
    settings,
    deployed({ defaultMessageTimeToLive: 'P60D' }, { defaultMessageTimeToLive: 'P14D' }),
  );
  const topicOnly = entityDrift(
    settings,
    deployed({ defaultMessageTimeToLive: undefined }, { defaultMessageTimeToLive: 'P2D' }),
  );

  expect(capped).toEqual([]);
  expect(topicOnly).toMatchObject([{ property: 'defaultMessageTimeToLive', deployed: 'P2D', unsafe: false }]);
});

it('calls the bound unknown, so unsafe, when any one of lock, delivery count or TTL cannot be read', () => {
  const unsafe = (subscription: Record<string, unknown>, topic: Record<string, unknown> = {}): boolean[] =>
    entityDrift(settings, deployed(subscription, topic)).map((d) => d.unsafe);

  expect(unsafe({ lockDuration: 'soon' })).toEqual([true]);
  expect(unsafe({ maxDeliveryCount: -1 })).toEqual([true]);
  expect(unsafe({ defaultMessageTimeToLive: 'later' }, { defaultMessageTimeToLive: undefined })).toEqual([
    true,
  ]);
  // The subscription's TTL alone, its topic saying nothing: that TTL, and no drift.
  expect(unsafe({}, { defaultMessageTimeToLive: undefined })).toEqual([]);
});

it('calls a value it cannot read unsafe, and shows it bounded', () => {
  const drifts = entityDrift(
    settings,
    deployed(
      { lockDuration: 'x'.repeat(500), maxDeliveryCount: 2.5, defaultMessageTimeToLive: undefined },
      {
        defaultMessageTimeToLive: undefined,
      },
    ),
  );

  expect(drifts.map((d) => [d.property, d.deployed, d.unsafe])).toEqual([
    ['lockDuration', `"${'x'.repeat(39)}…(502 characters)`, true],
    ['maxDeliveryCount', '2.5', true],
    ['defaultMessageTimeToLive', 'absent', true],
  ]);
  expect(drifts.every((d) => d.deployed.length <= 60)).toBe(true);
});

it('reads only what ARM writes: a positive whole delivery count, a duration of at most 40 characters', () => {
  const unread = (properties: Record<string, unknown>): [string, string, boolean][] =>
    entityDrift(settings, deployed(properties)).map((d) => [d.property, d.deployed, d.unsafe]);

  expect(unread({ maxDeliveryCount: 0 })).toEqual([['maxDeliveryCount', '0', true]]);
  expect(unread({ maxDeliveryCount: '10' })).toEqual([['maxDeliveryCount', '"10"', true]]);
  expect(unread({ maxDeliveryCount: 2 ** 60 })).toEqual([['maxDeliveryCount', String(2 ** 60), true]]);
  // 60 seconds, written in 44 characters (46 as JSON).
  expect(unread({ lockDuration: `PT${'0'.repeat(40)}1M` })).toEqual([
    ['lockDuration', `"PT${'0'.repeat(37)}…(46 characters)`, true],
  ]);
  expect(unread({ lockDuration: `PT${'0'.repeat(36)}1M` })).toEqual([]);
  expect(unread({ lockDuration: Symbol('not JSON') })).toEqual([['lockDuration', 'symbol', true]]);
});

it('writes each drift whole: entity, ARM property, setting, the value expected and the value deployed', () => {
  expect(
    entityDrift(
      settings,
      deployed({ lockDuration: 'PT3M', maxDeliveryCount: 12, defaultMessageTimeToLive: 'P15D' }),
    ),
  ).toEqual([
    {
      entity: 'events/billing',
      property: 'lockDuration',
      setting: 'SERVICEBUS_LOCK_DURATION',
      expected: 'PT1M',
      deployed: 'PT3M',
      unsafe: false,
    },
    {
      entity: 'events/billing',
      property: 'maxDeliveryCount',
      setting: 'SERVICEBUS_MAX_DELIVERY_COUNT',
      expected: '10',
      deployed: '12',
      unsafe: false,
    },
    {
      entity: 'events/billing',
      property: 'defaultMessageTimeToLive',
      setting: 'SERVICEBUS_MESSAGE_TTL',
      expected: 'P14D',
      deployed: 'P15D',
      unsafe: false,
    },
  ]);
});

it('calls duplicate detection off, or a shorter window, unsafe; a longer window is safe', () => {
  expect(entityDrift(settings, deployed({}, { requiresDuplicateDetection: false }))).toEqual([
    {
      entity: 'events',
      property: 'requiresDuplicateDetection',
      setting: 'SERVICEBUS_DUPLICATE_WINDOW',
      expected: 'true',
      deployed: 'false',
      unsafe: true,
    },
  ]);
  expect(entityDrift(settings, deployed({}, { duplicateDetectionHistoryTimeWindow: 'PT10M' }))).toMatchObject(
    [{ property: 'duplicateDetectionHistoryTimeWindow', expected: 'PT1H', deployed: 'PT10M', unsafe: true }],
  );
  expect(entityDrift(settings, deployed({}, { duplicateDetectionHistoryTimeWindow: 'P1D' }))).toMatchObject([
    { property: 'duplicateDetectionHistoryTimeWindow', deployed: 'P1D', unsafe: false },
  ]);
  expect(entityDrift(settings, deployed({}, { duplicateDetectionHistoryTimeWindow: 7 }))).toMatchObject([
    { property: 'duplicateDetectionHistoryTimeWindow', deployed: '7', unsafe: true },
  ]);
  expect(entityDrift(settings, deployed({}, { requiresDuplicateDetection: undefined }))).toMatchObject([
    { property: 'requiresDuplicateDetection', deployed: 'absent', unsafe: true },
  ]);
});

it('stops the app on unsafe drift only, naming at most five and counting the rest', () => {
  const safe = entityDrift(settings, deployed({ lockDuration: 'PT2M' }));
  const many = Array.from({ length: 7 }, (_, i) => ({
    entity: `t/s${i}`,
    property: 'lockDuration',
    setting: 'SERVICEBUS_LOCK_DURATION',
    expected: 'PT1M',
    deployed: 'P9D',
    unsafe: true,
  }));

  expect(unsafeDriftProblem(safe)).toBeUndefined();
  expect(() => assertNoUnsafeDrift(safe)).not.toThrow();
  expect(() => assertNoUnsafeDrift(many)).toThrow(SettingsError);
  const problem = unsafeDriftProblem(many)!;
  expect(problem).toContain('t/s4 lockDuration is P9D where SERVICEBUS_LOCK_DURATION=PT1M and 2 more.');
  expect(problem).not.toContain('t/s5');
  expect(problem).toMatch(
    /^The deployed Service Bus entities no longer match the settings the inbox's guarantee was checked with: t\/s0 lockDuration is P9D where SERVICEBUS_LOCK_DURATION=PT1M; t\/s1 /,
  );
  expect(problem).toMatch(
    /Redeploy \(azd provision\) to restore the entities, or change the settings to match them/,
  );
  expect(unsafeDriftProblem(many.slice(0, 5))).not.toContain('more');
});

it('writes the whole problem for one drift, its entity bounded', () => {
  const drift = {
    entity: `t/${'s'.repeat(200)}`,
    property: 'maxDeliveryCount',
    setting: 'SERVICEBUS_MAX_DELIVERY_COUNT',
    expected: '10',
    deployed: '900',
    unsafe: true,
  };

  expect(unsafeDriftProblem([drift])).toBe(
    `The deployed Service Bus entities no longer match the settings the inbox's guarantee was checked with: t/${'s'.repeat(118)}…(202 characters) maxDeliveryCount is 900 where SERVICEBUS_MAX_DELIVERY_COUNT=10. ` +
      'A marker could be purged while its message can still come back, or a resend pass duplicate detection. Redeploy ' +
      '(azd provision) to restore the entities, or change the settings to match them and raise INBOX_RETENTION above the new bound.',
  );
  expect(() => assertNoUnsafeDrift([drift])).toThrow(
    /^Invalid configuration:\n {2}- The deployed Service Bus entities/,
  );
});

it('counts each drifted property in inbox.entity_drift, with whether it is unsafe', async () => {
  const sink = MetricsSink.register();
  try {
    const telemetry = new InboxTelemetry();
    telemetry.entityDrift(
      entityDrift(settings, deployed({ lockDuration: 'PT2M' }, { requiresDuplicateDetection: false })),
    );

    expect(
      await sink.value('inbox.entity_drift', {
        entity: 'events',
        property: 'requiresDuplicateDetection',
        unsafe: true,
      }),
    ).toBe(1);
    expect(
      await sink.value('inbox.entity_drift', {
        entity: 'events/billing',
        property: 'lockDuration',
        unsafe: false,
      }),
    ).toBe(1);
  } finally {
    metrics.disable();
  }
});
