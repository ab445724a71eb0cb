import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  formatDuration,
  hostJsonProblems,
  loadSettings,
  parseDurationSeconds,
  retentionBoundSeconds,
  SettingsError,
  sweepSchedule,
  timeSpanSeconds,
} from '@idempotent-consumers/inbox/internal';

const base = { COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/' };

function problems(env: Record<string, string>): string[] {
  try {
    loadSettings(env);
    return [];
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    return [...error.problems];
  }
}

describe('settings', () => {
  it('applies the documented defaults', () => {
    const settings = loadSettings(base);

    expect(settings.cosmos).toEqual({
      endpoint: base.COSMOS_ENDPOINT,
      database: 'app',
      container: 'state',
      key: undefined,
      clientId: undefined,
      leaseContainer: 'leases',
      allowMultipleWriteRegions: false,
    });
    expect(settings.serviceBus).toEqual({
      fullyQualifiedNamespace: undefined,
      connectionString: undefined,
      duplicateWindowSeconds: 3600,
      resourceId: undefined,
      resourceManagerEndpoint: 'https://management.azure.com/',
    });
    expect(settings.outbox).toEqual({
      sweepAgeSeconds: 300,
      sweepIntervalSeconds: 60,
      sweepMaxItems: 500,
      dispatchedRetentionSeconds: 86_400,
    });
    expect(sweepSchedule(settings)).toBe('0 * * * * *');
    expect(settings.inbox).toEqual({
      retentionSeconds: 30 * 86_400,
      ttlBackstopSeconds: 7 * 86_400,
      maxAttempts: 5,
    });
    expect(settings.redelivery).toEqual({
      lockDurationSeconds: 60,
      maxDeliveryCount: 10,
      messageTtlSeconds: 14 * 86_400,
      resubmitMarginSeconds: 7 * 86_400,
    });
    expect(settings.purge).toEqual({ maxItems: 5000, maxDurationSeconds: 60, maxRequestUnitsPerSecond: 100 });
    expect(settings.host).toEqual({ maxAutoLockRenewalSeconds: 300, functionTimeoutSeconds: 300 });
    expect(settings.breaker).toEqual({
      failureThreshold: 3,
      probeIntervalSeconds: 5,
      backoffBaseSeconds: 0.5,
      backoffMaxSeconds: 30,
      releaseMarginSeconds: 30,
    });
  });

  it("agrees with the project's host.json by default, and names each value that does not", () => {
    const hostJson = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'host.json'), 'utf8')) as {
      functionTimeout: string;
      extensions: { serviceBus: { maxAutoLockRenewalDuration: string } };
    };
    expect(hostJsonProblems(loadSettings(base), hostJson)).toEqual([]);

    const shorter = structuredClone(hostJson);
    shorter.functionTimeout = '00:02:00';
    shorter.extensions.serviceBus.maxAutoLockRenewalDuration = '00:10:00';
    expect(hostJsonProblems(loadSettings(base), shorter)).toEqual([
      expect.stringContaining(
        'HOST_FUNCTION_TIMEOUT=PT5M does not match host.json functionTimeout="00:02:00"',
      ),
      expect.stringContaining('HOST_MAX_AUTO_LOCK_RENEWAL=PT5M does not match'),
    ]);
    expect(hostJsonProblems(loadSettings({ ...base, HOST_FUNCTION_TIMEOUT: 'PT2M' }), shorter)).toEqual([
      expect.stringContaining('HOST_MAX_AUTO_LOCK_RENEWAL'),
    ]);
    // Left out of host.json, the values are the host's own defaults, which the app cannot know for certain.
    expect(hostJsonProblems(loadSettings(base), {})).toHaveLength(2);
  });

  it('refuses breaker settings that leave no time to hold a delivery, or a backoff base above its maximum', () => {
    expect(problems({ ...base, HOST_FUNCTION_TIMEOUT: 'PT30S' })).toEqual([
      expect.stringContaining('leave no time to hold a delivery'),
    ]);
    expect(problems({ ...base, BREAKER_BACKOFF_BASE: 'PT1M' })).toEqual([
      expect.stringContaining('BREAKER_BACKOFF_BASE=PT1M exceeds BREAKER_BACKOFF_MAX=PT30S'),
    ]);
  });

  it('turns the TTL backstop off with "off"', () => {
    expect(loadSettings({ ...base, INBOX_TTL_BACKSTOP: 'off' }).inbox.ttlBackstopSeconds).toBeUndefined();
  });

  it('requires COSMOS_ENDPOINT, and a key for a local http endpoint', () => {
    expect(problems({})).toEqual([expect.stringContaining('COSMOS_ENDPOINT is not set')]);
    expect(problems({ COSMOS_ENDPOINT: 'http://127.0.0.1:8081/' })).toEqual([
      expect.stringContaining('needs COSMOS_KEY'),
    ]);
    expect(problems({ ...base, COSMOS_KEY: '<paste the key here>' })).toEqual([
      expect.stringContaining('COSMOS_KEY is not a base64 key'),
    ]);
  });

  it('refuses a retention shorter than the redelivery bound, and says what the bound is', () => {
    const found = problems({ ...base, INBOX_RETENTION: 'P7D' });

    expect(found).toHaveLength(1);
    expect(found[0]).toContain('INBOX_RETENTION=P7D does not exceed the time a message can come back');
    expect(found[0]).toContain(
      'lock PT1M × 10 deliveries + message TTL P14D + resubmit margin P7D = P21DT10M',
    );
    expect(found[0]).toContain('Raise INBOX_RETENTION above P21DT10M');
  });

  it('recomputes the bound from the Service Bus settings the Bicep supplies', () => {
    const env = {
      ...base,
      SERVICEBUS_LOCK_DURATION: 'PT5M',
      SERVICEBUS_MAX_DELIVERY_COUNT: '2000',
      SERVICEBUS_MESSAGE_TTL: 'P20D',
    };

    expect(problems(env)).toEqual([expect.stringContaining('= P33DT22H40M')]);
    expect(problems({ ...env, INBOX_RETENTION: 'P34D' })).toEqual([]);
  });

  it('refuses a retention exactly at the bound, and accepts one a second longer (as the Bicep does)', () => {
    const bound = retentionBoundSeconds({
      lockDurationSeconds: 60,
      maxDeliveryCount: 10,
      messageTtlSeconds: 14 * 86_400,
      resubmitMarginSeconds: 7 * 86_400,
    });

    expect(problems({ ...base, INBOX_RETENTION: formatDuration(bound) })).toEqual([
      expect.stringContaining('does not exceed'),
    ]);
    expect(problems({ ...base, INBOX_RETENTION: formatDuration(bound + 1) })).toEqual([]);
  });

  it("keeps the sweeper's first resend inside the duplicate detection window, and names the settings that do not", () => {
    expect(problems({ ...base, OUTBOX_SWEEP_AGE: 'PT55M', OUTBOX_SWEEP_INTERVAL: 'PT5M' })).toEqual([]);
    expect(problems({ ...base, OUTBOX_SWEEP_AGE: 'PT56M', OUTBOX_SWEEP_INTERVAL: 'PT5M' })).toEqual([
      expect.stringMatching(
        /^OUTBOX_SWEEP_AGE=PT56M \+ OUTBOX_SWEEP_INTERVAL=PT5M = PT1H1M exceeds SERVICEBUS_DUPLICATE_WINDOW=PT1H/,
      ),
    ]);
    // A longer window (the Bicep's and the setting together) allows a longer age.
    expect(problems({ ...base, OUTBOX_SWEEP_AGE: 'PT2H', SERVICEBUS_DUPLICATE_WINDOW: 'PT3H' })).toEqual([]);
    expect(problems({ ...base, OUTBOX_SWEEP_AGE: 'PT5S' })).toEqual([
      expect.stringContaining('OUTBOX_SWEEP_AGE=PT5S is under PT10S'),
    ]);
    // npm start's shortest window, PT20S, still fits a sweeper (which it sets).
    expect(
      problems({
        ...base,
        SERVICEBUS_DUPLICATE_WINDOW: 'PT20S',
        OUTBOX_SWEEP_AGE: 'PT15S',
        OUTBOX_SWEEP_INTERVAL: 'PT5S',
      }),
    ).toEqual([]);
  });

  it("turns OUTBOX_SWEEP_INTERVAL into the sweeper's schedule, whole minutes that divide an hour only", () => {
    expect(sweepSchedule(loadSettings({ ...base, OUTBOX_SWEEP_INTERVAL: 'PT5M' }))).toBe('0 */5 * * * *');
    expect(
      sweepSchedule(loadSettings({ ...base, OUTBOX_SWEEP_INTERVAL: 'PT30M', OUTBOX_SWEEP_AGE: 'PT10M' })),
    ).toBe('0 */30 * * * *');
    for (const interval of ['PT7M', 'PT1M30S', 'PT45M', 'PT7S', 'PT0.5S']) {
      expect(problems({ ...base, OUTBOX_SWEEP_INTERVAL: interval })).toEqual([
        expect.stringContaining(`OUTBOX_SWEEP_INTERVAL=${interval} must divide a minute or an hour`),
      ]);
    }
  });

  it('keeps a dispatched outbox document no longer than the markers, in whole seconds Cosmos DB takes as a ttl', () => {
    expect(problems({ ...base, OUTBOX_DISPATCHED_RETENTION: 'P30D' })).toEqual([]);
    for (const value of ['PT0S', 'PT0.5S', 'PT30S', 'P31D']) {
      expect(problems({ ...base, OUTBOX_DISPATCHED_RETENTION: value })).toEqual([
        expect.stringContaining(
          `OUTBOX_DISPATCHED_RETENTION=${value} must be whole seconds from PT1M to INBOX_RETENTION=P30D`,
        ),
      ]);
    }
  });

  it('accepts a Service Bus connection string only for the emulator or the local peer', () => {
    const local =
      'Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=x;UseDevelopmentEmulator=true;';
    expect(problems({ ...base, ServiceBusConnection: local })).toEqual([]);
    expect(
      problems({
        ...base,
        ServiceBusConnection: 'Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=x',
      }),
    ).toEqual([expect.stringContaining('accepted only for the emulator or the local peer')]);
    expect(
      problems({
        ...base,
        ServiceBusConnection: local,
        ServiceBusConnection__fullyQualifiedNamespace: 'ns.servicebus.windows.net',
      }),
    ).toEqual([expect.stringContaining('not both')]);
  });

  it('reports every malformed setting at once', () => {
    const found = problems({
      ...base,
      INBOX_RETENTION: '30 days',
      SERVICEBUS_MAX_DELIVERY_COUNT: 'ten',
      INBOX_MAX_ATTEMPTS: '0',
      PURGE_MAX_RU_PER_SECOND: '0.5',
      INBOX_ALLOW_MULTIPLE_WRITE_REGIONS: 'yes',
    });

    expect(found).toEqual([
      expect.stringContaining("INBOX_ALLOW_MULTIPLE_WRITE_REGIONS='yes' must be true or false"),
      expect.stringContaining("INBOX_RETENTION='30 days' is not an ISO-8601 duration"),
      expect.stringContaining("INBOX_MAX_ATTEMPTS='0' must be an integer"),
      expect.stringContaining("SERVICEBUS_MAX_DELIVERY_COUNT='ten' must be an integer"),
      expect.stringContaining("PURGE_MAX_RU_PER_SECOND='0.5' must be an integer from 1 to 1000000"),
    ]);
  });

  it('reads PURGE_MAX_RU_PER_SECOND, the purge budget the Bicep derives from the account', () => {
    expect(loadSettings({ ...base, PURGE_MAX_RU_PER_SECOND: '500' }).purge.maxRequestUnitsPerSecond).toBe(
      500,
    );
  });
});

describe('each setting read from its own variable', () => {
  it('takes every variable, blanks around a value trimmed', () => {
    const padded = (value: string): string => `  ${value} \t`;
    const env = Object.fromEntries(
      Object.entries({
        COSMOS_ENDPOINT: 'https://other.documents.azure.com:443/',
        COSMOS_DATABASE: 'db',
        COSMOS_CONTAINER: 'things',
        AZURE_CLIENT_ID: 'client-id',
        COSMOS_LEASE_CONTAINER: 'relay-leases',
        INBOX_ALLOW_MULTIPLE_WRITE_REGIONS: 'TRUE',
        ServiceBusConnection__fullyQualifiedNamespace: 'ns.servicebus.windows.net',
        SERVICEBUS_DUPLICATE_WINDOW: 'PT2H',
        SERVICEBUS_RESOURCE_ID:
          '/subscriptions/1111/resourceGroups/rg-app/providers/Microsoft.ServiceBus/namespaces/sb-app01',
        AZURE_RESOURCE_MANAGER_ENDPOINT: 'https://management.usgovcloudapi.net',
        OUTBOX_SWEEP_AGE: 'PT4M',
        OUTBOX_SWEEP_INTERVAL: 'PT2M',
        OUTBOX_SWEEP_MAX_ITEMS: '400',
        OUTBOX_DISPATCHED_RETENTION: 'PT12H',
        INBOX_RETENTION: 'P40D',
        INBOX_TTL_BACKSTOP: 'P6D',
        INBOX_MAX_ATTEMPTS: '4',
        SERVICEBUS_LOCK_DURATION: 'PT2M',
        SERVICEBUS_MAX_DELIVERY_COUNT: '9',
        SERVICEBUS_MESSAGE_TTL: 'P13D',
        INBOX_RESUBMIT_MARGIN: 'P6D',
        PURGE_MAX_ITEMS: '4000',
        PURGE_MAX_DURATION: 'PT50S',
        PURGE_MAX_RU_PER_SECOND: '90',
        HOST_MAX_AUTO_LOCK_RENEWAL: 'PT4M',
        HOST_FUNCTION_TIMEOUT: 'PT6M',
        BREAKER_FAILURE_THRESHOLD: '4',
        BREAKER_PROBE_INTERVAL: 'PT6S',
        BREAKER_BACKOFF_BASE: 'PT1S',
        BREAKER_BACKOFF_MAX: 'PT20S',
        BREAKER_RELEASE_MARGIN: 'PT25S',
      }).map(([name, value]) => [name, padded(value)]),
    );

    expect(loadSettings(env)).toEqual({
      cosmos: {
        endpoint: 'https://other.documents.azure.com:443/',
        database: 'db',
        container: 'things',
        key: undefined,
        clientId: 'client-id',
        leaseContainer: 'relay-leases',
        allowMultipleWriteRegions: true,
      },
      serviceBus: {
        fullyQualifiedNamespace: 'ns.servicebus.windows.net',
        connectionString: undefined,
        duplicateWindowSeconds: 7200,
        resourceId:
          '/subscriptions/1111/resourceGroups/rg-app/providers/Microsoft.ServiceBus/namespaces/sb-app01',
        resourceManagerEndpoint: 'https://management.usgovcloudapi.net/',
      },
      outbox: {
        sweepAgeSeconds: 240,
        sweepIntervalSeconds: 120,
        sweepMaxItems: 400,
        dispatchedRetentionSeconds: 43_200,
      },
      inbox: { retentionSeconds: 40 * 86_400, ttlBackstopSeconds: 6 * 86_400, maxAttempts: 4 },
      redelivery: {
        lockDurationSeconds: 120,
        maxDeliveryCount: 9,
        messageTtlSeconds: 13 * 86_400,
        resubmitMarginSeconds: 6 * 86_400,
      },
      purge: { maxItems: 4000, maxDurationSeconds: 50, maxRequestUnitsPerSecond: 90 },
      host: { maxAutoLockRenewalSeconds: 240, functionTimeoutSeconds: 360 },
      breaker: {
        failureThreshold: 4,
        probeIntervalSeconds: 6,
        backoffBaseSeconds: 1,
        backoffMaxSeconds: 20,
        releaseMarginSeconds: 25,
      },
    });
  });

  it("refuses a SERVICEBUS_RESOURCE_ID that is not a namespace's, and Resource Manager over http off loopback", () => {
    const namespace = '/subscriptions/1/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/sb-app01';

    expect(problems({ ...base, SERVICEBUS_RESOURCE_ID: namespace })).toEqual([]);
    expect(loadSettings({ ...base, SERVICEBUS_RESOURCE_ID: ' \t' }).serviceBus.resourceId).toBeUndefined();
    expect(
      loadSettings({ ...base, AZURE_RESOURCE_MANAGER_ENDPOINT: ' ' }).serviceBus.resourceManagerEndpoint,
    ).toBe('https://management.azure.com/');
    expect(problems({ ...base, SERVICEBUS_RESOURCE_ID: `${namespace}/topics/t` })).toEqual([
      `SERVICEBUS_RESOURCE_ID='${namespace}/topics/t' is not a Service Bus namespace's resource id (/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ServiceBus/namespaces/<name>).`,
    ]);
    expect(problems({ ...base, SERVICEBUS_RESOURCE_ID: namespace.replace('sb-app01', 'sb') })).toHaveLength(
      1,
    );
    expect(problems({ ...base, SERVICEBUS_RESOURCE_ID: `x${namespace}` })).toHaveLength(1);
    expect(
      problems({ ...base, SERVICEBUS_RESOURCE_ID: namespace.replace('ServiceBus', 'EventHub') }),
    ).toHaveLength(1);
    for (const local of ['http://127.0.0.1:5000/', 'http://localhost:1', 'http://[::1]:2/']) {
      expect(problems({ ...base, AZURE_RESOURCE_MANAGER_ENDPOINT: local })).toEqual([]);
    }
    expect(problems({ ...base, AZURE_RESOURCE_MANAGER_ENDPOINT: 'http://management.azure.com/' })).toEqual([
      "AZURE_RESOURCE_MANAGER_ENDPOINT='http://management.azure.com/' must be an https URL (http only on loopback, for the local peer).",
    ]);
    expect(problems({ ...base, AZURE_RESOURCE_MANAGER_ENDPOINT: 'not a url' })).toHaveLength(1);
    expect(problems({ ...base, AZURE_RESOURCE_MANAGER_ENDPOINT: 'ftp://127.0.0.1/' })).toHaveLength(1);
    expect(
      loadSettings({ ...base, AZURE_RESOURCE_MANAGER_ENDPOINT: 'http://127.0.0.1:5000' }).serviceBus
        .resourceManagerEndpoint,
    ).toBe('http://127.0.0.1:5000/');
  });

  it('trims a Service Bus connection string and a Cosmos DB key, and takes a blank one for none', () => {
    const emulator =
      'Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=k;UseDevelopmentEmulator=true';
    const key = 'C2y6yDjf5R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==';
    const settings = loadSettings({
      COSMOS_ENDPOINT: 'http://127.0.0.1:8081/',
      COSMOS_KEY: ` ${key} `,
      ServiceBusConnection: ` ${emulator} `,
      AZURE_CLIENT_ID: '   ',
    });

    expect(settings.serviceBus.connectionString).toBe(emulator);
    expect(settings.cosmos.key).toBe(key);
    expect(settings.cosmos.clientId).toBeUndefined();
  });

  it('takes a variable of blanks for unset: the default, no problem', () => {
    const settings = loadSettings({ ...base, INBOX_MAX_ATTEMPTS: '   ', OUTBOX_SWEEP_AGE: '\t' });

    expect([settings.inbox.maxAttempts, settings.outbox.sweepAgeSeconds]).toEqual([5, 300]);
  });

  it('refuses a COSMOS_KEY with anything around its base64', () => {
    const key = 'A'.repeat(20);
    const refusal = (value: string): string[] =>
      problems({ COSMOS_ENDPOINT: 'http://127.0.0.1:8081/', COSMOS_KEY: value }).filter((problem) =>
        problem.startsWith('COSMOS_KEY is not a base64 key'),
      );

    expect(refusal(key)).toEqual([]);
    expect(refusal(`key:${key}`)).toHaveLength(1);
    expect(refusal(`${key}==!`)).toHaveLength(1);
  });
});

describe('the limits between settings, at their boundaries', () => {
  it('refuses a breaker release margin and probe interval that reach the hold limit, takes one second less', () => {
    const breaker = (margin: string): string[] =>
      problems({ ...base, BREAKER_RELEASE_MARGIN: margin, BREAKER_PROBE_INTERVAL: 'PT5S' }).filter(
        (problem) => problem.startsWith('BREAKER_RELEASE_MARGIN='),
      );

    expect(breaker('PT295S')).toHaveLength(1);
    expect(breaker('PT294S')).toEqual([]);
  });

  it('takes a backoff base equal to its maximum', () => {
    expect(problems({ ...base, BREAKER_BACKOFF_BASE: 'PT30S', BREAKER_BACKOFF_MAX: 'PT30S' })).toEqual([]);
  });

  it('keeps a dispatched outbox document at least a minute, and sweeps nothing younger than ten seconds', () => {
    const own = (name: string, value: string): string[] =>
      problems({ ...base, [name]: value }).filter((problem) => problem.startsWith(`${name}=`));

    expect(own('OUTBOX_DISPATCHED_RETENTION', 'PT1M')).toEqual([]);
    expect(own('OUTBOX_DISPATCHED_RETENTION', 'PT59S')).toHaveLength(1);
    expect(own('OUTBOX_SWEEP_AGE', 'PT10S')).toEqual([]);
    expect(own('OUTBOX_SWEEP_AGE', 'PT9S')).toHaveLength(1);
  });

  it.each([
    ['PT1S', '* * * * * *'],
    ['PT30S', '*/30 * * * * *'],
    ['PT1M', '0 * * * * *'],
    ['PT30M', '0 */30 * * * *'],
    ['PT1H', undefined],
    ['PT0.5S', undefined],
    ['PT7S', undefined],
    ['PT1.5S', undefined],
    ['PT90S', undefined],
  ])("OUTBOX_SWEEP_INTERVAL=%s is the sweeper's schedule %j", (interval, schedule) => {
    expect(
      sweepSchedule({
        outbox: { ...loadSettings(base).outbox, sweepIntervalSeconds: parseDurationSeconds(interval, 'X') },
      }),
    ).toBe(schedule);
  });
});

describe("host.json's time spans", () => {
  it.each([
    ['00:05:00', 300],
    [' 00:05:00 ', 300],
    ['5:00:00', 18_000],
    ['1.02:03:04.5', 93_784.5],
    ['12.00:00:00', 12 * 86_400],
    ['x00:05:00', undefined],
    ['00:05:00x', undefined],
    ['a.00:05:00', undefined],
    ['00:5:00', undefined],
  ])('%j is %j seconds', (text, seconds) => {
    expect(timeSpanSeconds(text)).toBe(seconds);
  });

  it('names a value that does not match, at most 40 characters of it', () => {
    const long = `${'9'.repeat(100)}`;
    const [problem = ''] = hostJsonProblems(loadSettings(base), { functionTimeout: long });

    expect(problem).toContain(`host.json functionTimeout="${'9'.repeat(39)}: `);
  });
});

describe('integer settings', () => {
  it.each([
    ['OUTBOX_SWEEP_MAX_ITEMS', 10_000],
    ['INBOX_MAX_ATTEMPTS', 50],
    ['SERVICEBUS_MAX_DELIVERY_COUNT', 2000],
    ['PURGE_MAX_RU_PER_SECOND', 1_000_000],
    ['BREAKER_FAILURE_THRESHOLD', 1000],
  ])('%s takes 1 to %i, whole numbers only', (name, max) => {
    const own = (text: string): string[] =>
      problems({ ...base, [name]: text }).filter((problem) => problem.startsWith(`${name}=`));
    const refusal = (text: string): string[] => [`${name}='${text}' must be an integer from 1 to ${max}.`];

    expect(own('1')).toEqual([]);
    expect(own(String(max))).toEqual([]);
    expect(own(String(max + 1))).toEqual(refusal(String(max + 1)));
    expect(own('0')).toEqual(refusal('0'));
    expect(own('2.5')).toEqual(refusal('2.5'));
    expect(own('ten')).toEqual(refusal('ten'));
  });

  it('PURGE_MAX_ITEMS has no upper bound short of a safe integer', () => {
    expect(problems({ ...base, PURGE_MAX_ITEMS: String(Number.MAX_SAFE_INTEGER) })).toEqual([]);
    expect(problems({ ...base, PURGE_MAX_ITEMS: '0' })).toEqual([
      `PURGE_MAX_ITEMS='0' must be an integer from 1 to ${Number.MAX_SAFE_INTEGER}.`,
    ]);
  });
});

describe('ISO-8601 durations', () => {
  it.each([
    ['P30D', 2_592_000],
    ['PT1M', 60],
    ['P1DT12H', 129_600],
    ['PT0.5S', 0.5],
    ['P2W', 1_209_600],
    ['P14DT1H2M3S', 1_213_323],
    // Every field at two digits and more, a decimal second's every digit, and the blanks around it.
    ['P12W', 7_257_600],
    ['P10DT12H', 907_200],
    ['PT10H15M', 36_900],
    ['PT12.25S', 12.25],
    [' PT1M\n', 60],
  ])('%j = %d s', (text, seconds) => {
    expect(parseDurationSeconds(text, 'X')).toBe(seconds);
  });

  it.each(['P', 'PT', '30D', 'P1M', 'P1Y', 'PT-1M', '', ' P ', 'PT ', 'xP1D', 'P1Dx', 'PxW', 'PT1.S'])(
    'refuses %j',
    (text) => {
      expect(() => parseDurationSeconds(text, 'X')).toThrow(SettingsError);
    },
  );

  it('formats back to the shortest form', () => {
    expect([0, 60, 86_400, 1_815_000, 3_723].map(formatDuration)).toEqual([
      'PT0S',
      'PT1M',
      'P1D',
      'P21DT10M',
      'PT1H2M3S',
    ]);
  });
});
