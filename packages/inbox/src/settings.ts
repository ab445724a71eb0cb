import { formatDuration, parseDurationSeconds } from './duration';
import { bounded, SettingsError } from './errors';

/**
 * Every setting the app reads, from its environment (app settings), with its default. Defaults
 * apply in this one place. In Azure the Bicep supplies them as app settings; locally,
 * local.settings.json (see local.settings.sample.json). Durations are ISO-8601 (`PT30S`, `P30D`)
 * in the environment and seconds here; an invalid or unsafe value stops the app at start-up with a
 * SettingsError.
 *
 * @example
 * Keep markers 60 days, and let a handler run up to 8 times per delivery (local.settings.json;
 * in Azure, the same names as app settings):
 * ```json
 * { "Values": { "INBOX_RETENTION": "P60D", "INBOX_MAX_ATTEMPTS": "8" } }
 * ```
 */
export interface Settings {
  cosmos: {
    /** COSMOS_ENDPOINT: the account endpoint (`https://<account>.documents.azure.com:443/`); required. */
    endpoint: string;
    /**
     * COSMOS_DATABASE.
     * @default app
     */
    database: string;
    /**
     * COSMOS_CONTAINER: partitioned on /partitionKey.
     * @default state
     */
    container: string;
    /** COSMOS_KEY: only for the local server or an emulator; unset in Azure (managed identity). */
    key: string | undefined;
    /** AZURE_CLIENT_ID: the user-assigned identity DefaultAzureCredential should use. */
    clientId: string | undefined;
    /**
     * COSMOS_LEASE_CONTAINER: where the outbox relay's Cosmos DB trigger keeps its leases
     * (partitioned on /id, in the same database).
     * @default leases
     */
    leaseContainer: string;
    /**
     * INBOX_ALLOW_MULTIPLE_WRITE_REGIONS: run against a Cosmos DB account that accepts writes in
     * more than one region, accepting that a message can then be applied once per region
     * (writeRegions.ts). `true` or `false`.
     * @default false
     */
    allowMultipleWriteRegions: boolean;
  };
  /** Where the outbox relay sends (the Service Bus triggers use the same connection). */
  serviceBus: {
    /** ServiceBusConnection__fullyQualifiedNamespace: `<namespace>.servicebus.windows.net`, signed in with the identity. */
    fullyQualifiedNamespace: string | undefined;
    /**
     * ServiceBusConnection: a connection string, accepted only for the emulator or the local peer
     * (it must contain UseDevelopmentEmulator=true).
     */
    connectionString: string | undefined;
    /**
     * SERVICEBUS_DUPLICATE_WINDOW: the topics' duplicate detection window, as the Bicep configured it.
     * @default PT1H
     */
    duplicateWindowSeconds: number;
    /**
     * SERVICEBUS_RESOURCE_ID: the namespace's Azure Resource Manager id
     * (`/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ServiceBus/namespaces/<name>`),
     * where the drift guard reads the deployed topics and subscriptions (entityDrift.ts); unset:
     * the guard does not run (the Bicep sets it).
     */
    resourceId: string | undefined;
    /**
     * AZURE_RESOURCE_MANAGER_ENDPOINT: where Azure Resource Manager answers; `http://` only on
     * loopback (the local Service Bus peer's imitation, which needs no token).
     * @default https://management.azure.com/
     */
    resourceManagerEndpoint: string;
  };
  /** The outbox relay and its sweeper (packages/inbox/src/relay.ts). */
  outbox: {
    /**
     * OUTBOX_SWEEP_AGE: the sweeper resends an outbox message still pending this long after its
     * batch committed. At least PT10S (the relay's normal delay is a poll or two, 5 s each); with the
     * interval, at most the duplicate detection window, so a resend of a message the relay sent is
     * dropped by the broker.
     * @default PT5M
     */
    sweepAgeSeconds: number;
    /**
     * OUTBOX_SWEEP_INTERVAL: how often the sweeper runs: whole seconds that divide a minute (PT5S,
     * PT10S, ... PT30S) or whole minutes that divide an hour (PT1M, PT2M, PT5M, ... PT30M).
     * @default PT1M
     */
    sweepIntervalSeconds: number;
    /**
     * OUTBOX_SWEEP_MAX_ITEMS: messages one sweeper run resends at most.
     * @default 500
     */
    sweepMaxItems: number;
    /**
     * OUTBOX_DISPATCHED_RETENTION: how long a dispatched outbox document stays (its `ttl`), for
     * triage: whole seconds from PT1M to INBOX_RETENTION.
     * @default P1D
     */
    dispatchedRetentionSeconds: number;
  };
  inbox: {
    /**
     * INBOX_RETENTION: how long a marker is kept. Must exceed the time a message can come back
     * (see RedeliverySettings).
     * @default P30D
     */
    retentionSeconds: number;
    /**
     * INBOX_TTL_BACKSTOP: extra time after the retention before Cosmos DB's TTL deletes a marker the
     * purge timer missed; `off` writes no `ttl`.
     * @default P7D
     */
    ttlBackstopSeconds: number | undefined;
    /**
     * INBOX_MAX_ATTEMPTS: handler runs per delivery before giving the delivery back (1 to 50; see
     * PartitionTransaction).
     * @default 5
     */
    maxAttempts: number;
  };
  /** What the Bicep configured on every subscription; used for the retention bound and logs. */
  redelivery: RedeliverySettings;
  purge: {
    /**
     * PURGE_MAX_ITEMS: markers deleted per timer run at most.
     * @default 5000
     */
    maxItems: number;
    /**
     * PURGE_MAX_DURATION: time spent per timer run at most.
     * @default PT1M
     */
    maxDurationSeconds: number;
    /**
     * PURGE_MAX_RU_PER_SECOND: request units per second a run spends on average at most. The Bicep
     * derives it from the account (a tenth of what the container can serve); 100 is the lowest it
     * derives, a tenth of the smallest autoscale maximum, so it is safe on any account.
     * @default 100
     */
    maxRequestUnitsPerSecond: number;
  };
  /**
   * host.json values the app must stay inside; each default equals host.json, and the app refuses
   * to start when host.json says otherwise.
   */
  host: {
    /**
     * HOST_MAX_AUTO_LOCK_RENEWAL = host.json extensions.serviceBus.maxAutoLockRenewalDuration.
     * @default PT5M
     */
    maxAutoLockRenewalSeconds: number;
    /**
     * HOST_FUNCTION_TIMEOUT = host.json functionTimeout.
     * @default PT5M
     */
    functionTimeoutSeconds: number;
  };
  /** The Cosmos DB circuit breaker and backoff (packages/inbox/src/breaker.ts). */
  breaker: {
    /**
     * BREAKER_FAILURE_THRESHOLD: consecutive transient failures that open it.
     * @default 3
     */
    failureThreshold: number;
    /**
     * BREAKER_PROBE_INTERVAL: between two probes while open.
     * @default PT5S
     */
    probeIntervalSeconds: number;
    /**
     * BREAKER_BACKOFF_BASE: a transient failure waits a jittered backoff before it is rethrown,
     * below this base doubled for each consecutive failure.
     * @default PT0.5S
     */
    backoffBaseSeconds: number;
    /**
     * BREAKER_BACKOFF_MAX: where the doubling of the backoff stops.
     * @default PT30S
     */
    backoffMaxSeconds: number;
    /**
     * BREAKER_RELEASE_MARGIN: a held delivery is given back this long before the lock renewal or
     * functionTimeout ends.
     * @default PT30S
     */
    releaseMarginSeconds: number;
  };
}

/**
 * How a message can come back, as the Bicep configured every subscription: the inbox retention
 * must exceed lockDuration × maxDeliveryCount + message TTL + resubmit margin.
 */
export interface RedeliverySettings {
  /**
   * SERVICEBUS_LOCK_DURATION.
   * @default PT1M
   */
  lockDurationSeconds: number;
  /**
   * SERVICEBUS_MAX_DELIVERY_COUNT: deliveries before Service Bus dead-letters a message.
   * @default 10
   */
  maxDeliveryCount: number;
  /**
   * SERVICEBUS_MESSAGE_TTL.
   * @default P14D
   */
  messageTtlSeconds: number;
  /**
   * INBOX_RESUBMIT_MARGIN: how late an operator may resubmit from the dead-letter queue.
   * @default P7D
   */
  resubmitMarginSeconds: number;
}

type Environment = Readonly<Record<string, string | undefined>>;

/**
 * The retention must exceed this: a marker must outlive every way its message can come back.
 *   lockDuration × maxDeliveryCount   redeliveries after lost completions or lock expiry
 * + message TTL                      the message may sit in the subscription that long
 * + resubmit margin                  an operator may resubmit it from the dead-letter queue later
 */
export function retentionBoundSeconds(redelivery: RedeliverySettings): number {
  return (
    redelivery.lockDurationSeconds * redelivery.maxDeliveryCount +
    redelivery.messageTtlSeconds +
    redelivery.resubmitMarginSeconds
  );
}

export function loadSettings(env: Environment = process.env): Settings {
  const problems: string[] = [];
  const { duration, positiveInteger, yesNo } = readerOf(env, problems);
  const settings: Settings = {
    cosmos: {
      ...cosmosSettings(env, problems),
      allowMultipleWriteRegions: yesNo('INBOX_ALLOW_MULTIPLE_WRITE_REGIONS', 'false'),
    },
    serviceBus: {
      fullyQualifiedNamespace: env.ServiceBusConnection__fullyQualifiedNamespace?.trim() || undefined,
      connectionString: env.ServiceBusConnection?.trim() || undefined,
      duplicateWindowSeconds: duration('SERVICEBUS_DUPLICATE_WINDOW', 'PT1H'),
      ...resourceManagerSettings(env, problems),
    },
    outbox: {
      sweepAgeSeconds: duration('OUTBOX_SWEEP_AGE', 'PT5M'),
      sweepIntervalSeconds: duration('OUTBOX_SWEEP_INTERVAL', 'PT1M'),
      sweepMaxItems: positiveInteger('OUTBOX_SWEEP_MAX_ITEMS', '500', 10_000),
      dispatchedRetentionSeconds: duration('OUTBOX_DISPATCHED_RETENTION', 'P1D'),
    },
    inbox: {
      retentionSeconds: duration('INBOX_RETENTION', 'P30D'),
      ttlBackstopSeconds:
        env.INBOX_TTL_BACKSTOP?.trim().toLowerCase() === 'off'
          ? undefined
          : duration('INBOX_TTL_BACKSTOP', 'P7D'),
      maxAttempts: positiveInteger('INBOX_MAX_ATTEMPTS', '5', 50),
    },
    redelivery: {
      lockDurationSeconds: duration('SERVICEBUS_LOCK_DURATION', 'PT1M'),
      maxDeliveryCount: positiveInteger('SERVICEBUS_MAX_DELIVERY_COUNT', '10', 2000),
      messageTtlSeconds: duration('SERVICEBUS_MESSAGE_TTL', 'P14D'),
      resubmitMarginSeconds: duration('INBOX_RESUBMIT_MARGIN', 'P7D'),
    },
    purge: {
      maxItems: positiveInteger('PURGE_MAX_ITEMS', '5000'),
      maxDurationSeconds: duration('PURGE_MAX_DURATION', 'PT1M'),
      maxRequestUnitsPerSecond: positiveInteger('PURGE_MAX_RU_PER_SECOND', '100', 1_000_000),
    },
    host: {
      maxAutoLockRenewalSeconds: duration(
        'HOST_MAX_AUTO_LOCK_RENEWAL',
        HOST_JSON_DEFAULTS.maxAutoLockRenewal,
      ),
      functionTimeoutSeconds: duration('HOST_FUNCTION_TIMEOUT', HOST_JSON_DEFAULTS.functionTimeout),
    },
    breaker: {
      failureThreshold: positiveInteger('BREAKER_FAILURE_THRESHOLD', '3', 1000),
      probeIntervalSeconds: duration('BREAKER_PROBE_INTERVAL', 'PT5S'),
      backoffBaseSeconds: duration('BREAKER_BACKOFF_BASE', 'PT0.5S'),
      backoffMaxSeconds: duration('BREAKER_BACKOFF_MAX', 'PT30S'),
      releaseMarginSeconds: duration('BREAKER_RELEASE_MARGIN', 'PT30S'),
    },
  };
  problems.push(...retentionProblems(settings), ...breakerProblems(settings), ...outboxProblems(settings));
  if (problems.length > 0) throw new SettingsError(problems);
  return settings;
}

/**
 * How one setting is read: its text, or the default when unset or blank; a value that does not
 * parse is a problem (collected, so that every bad setting is reported at once) and the default is
 * used meanwhile.
 */
function readerOf(
  env: Environment,
  problems: string[],
): {
  duration: (name: string, defaultText: string) => number;
  positiveInteger: (name: string, defaultText: string, max?: number) => number;
  yesNo: (name: string, defaultText: string) => boolean;
} {
  const read = <T>(name: string, defaultText: string, parse: (text: string) => T): T => {
    try {
      return parse(env[name]?.trim() || defaultText);
    } catch (error) {
      problems.push(
        // Stryker disable next-line StringLiteral: message text only
        error instanceof SettingsError ? error.problems.join('; ') : `${name}: ${(error as Error).message}`,
      );
      return parse(defaultText);
    }
  };
  return {
    duration: (name, defaultText) => read(name, defaultText, (text) => parseDurationSeconds(text, name)),
    positiveInteger: (name, defaultText, max = Number.MAX_SAFE_INTEGER) =>
      read(name, defaultText, (text) => {
        const value = Number(text);
        if (!Number.isInteger(value) || value < 1 || value > max) {
          throw new SettingsError([`${name}='${text}' must be an integer from 1 to ${max}.`]);
        }
        return value;
      }),
    yesNo: (name, defaultText) =>
      read(name, defaultText, (text) => {
        const value = text.toLowerCase();
        if (value !== 'true' && value !== 'false')
          throw new SettingsError([`${name}='${bounded(text, 20)}' must be true or false.`]);
        return value === 'true';
      }),
  };
}

/** Where Cosmos DB is and how to sign in: a key only for the local server or an emulator. */
function cosmosSettings(
  env: Environment,
  problems: string[],
): Omit<Settings['cosmos'], 'allowMultipleWriteRegions'> {
  const endpoint = env.COSMOS_ENDPOINT?.trim();
  if (!endpoint) {
    problems.push(
      'COSMOS_ENDPOINT is not set: it must be the Cosmos DB account endpoint (https://<account>.documents.azure.com:443/).',
    );
  }
  const key = env.COSMOS_KEY?.trim() || undefined;
  if (key !== undefined && !/^[A-Za-z0-9+/]{16,}={0,2}$/.test(key)) {
    problems.push(
      'COSMOS_KEY is not a base64 key. Set it only for the local server or an emulator (`npm run cosmos` prints it); in Azure leave it unset.',
    );
  }
  if (endpoint?.startsWith('http://') && key === undefined) {
    problems.push(
      `COSMOS_ENDPOINT=${endpoint} is a local http endpoint, which needs COSMOS_KEY (managed identity only works against Azure).`,
    );
  }
  return {
    // Stryker disable next-line StringLiteral: equivalent: without an endpoint the settings are refused, so the value is never used
    endpoint: endpoint ?? '',
    database: env.COSMOS_DATABASE?.trim() || 'app',
    container: env.COSMOS_CONTAINER?.trim() || 'state',
    key,
    clientId: env.AZURE_CLIENT_ID?.trim() || undefined,
    leaseContainer: env.COSMOS_LEASE_CONTAINER?.trim() || 'leases',
  };
}

const NAMESPACE_RESOURCE_ID =
  // Stryker disable next-line Regex: static: a module constant; packages/inbox/test/settings.test.ts pins what it accepts and refuses
  /^\/subscriptions\/[^/]{1,64}\/resourceGroups\/[^/]{1,90}\/providers\/Microsoft\.ServiceBus\/namespaces\/[A-Za-z0-9-]{6,50}$/i;

/** Where the drift guard reads the deployed entities: the namespace's ARM id, and ARM's endpoint. */
function resourceManagerSettings(
  env: Environment,
  problems: string[],
): Pick<Settings['serviceBus'], 'resourceId' | 'resourceManagerEndpoint'> {
  const resourceId = env.SERVICEBUS_RESOURCE_ID?.trim() || undefined;
  if (resourceId !== undefined && !NAMESPACE_RESOURCE_ID.test(resourceId)) {
    problems.push(
      `SERVICEBUS_RESOURCE_ID='${bounded(resourceId, 200)}' is not a Service Bus namespace's resource id ` +
        '(/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ServiceBus/namespaces/<name>).',
    );
  }
  const endpoint = env.AZURE_RESOURCE_MANAGER_ENDPOINT?.trim() || 'https://management.azure.com/';
  const url = URL.canParse(endpoint) ? new URL(endpoint) : undefined;
  const loopback = url?.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  if (url === undefined || !(url.protocol === 'https:' || loopback)) {
    problems.push(
      `AZURE_RESOURCE_MANAGER_ENDPOINT='${bounded(endpoint, 200)}' must be an https URL (http only on loopback, for the local peer).`,
    );
  }
  return { resourceId, resourceManagerEndpoint: endpoint.endsWith('/') ? endpoint : `${endpoint}/` };
}

/** A marker must outlive every way its message can come back (retentionBoundSeconds). */
function retentionProblems({ inbox, redelivery }: Settings): string[] {
  const bound = retentionBoundSeconds(redelivery);
  if (inbox.retentionSeconds > bound) return [];
  const { lockDurationSeconds, maxDeliveryCount, messageTtlSeconds, resubmitMarginSeconds } = redelivery;
  return [
    `INBOX_RETENTION=${formatDuration(inbox.retentionSeconds)} does not exceed the time a message can come back: ` +
      `lock ${formatDuration(lockDurationSeconds)} × ${maxDeliveryCount} deliveries + message TTL ${formatDuration(messageTtlSeconds)} ` +
      `+ resubmit margin ${formatDuration(resubmitMarginSeconds)} = ${formatDuration(bound)}. ` +
      `A marker purged earlier would let a redelivered message apply its effect twice. Raise INBOX_RETENTION above ${formatDuration(bound)}.`,
  ];
}

/** The breaker must be able to hold a delivery inside its lock renewal and functionTimeout. */
function breakerProblems({ host, breaker }: Settings): string[] {
  const problems: string[] = [];
  const limit = Math.min(host.maxAutoLockRenewalSeconds, host.functionTimeoutSeconds);
  if (breaker.releaseMarginSeconds + breaker.probeIntervalSeconds >= limit) {
    problems.push(
      // Stryker disable next-line StringLiteral: message text only
      `BREAKER_RELEASE_MARGIN=${formatDuration(breaker.releaseMarginSeconds)} + BREAKER_PROBE_INTERVAL=${formatDuration(breaker.probeIntervalSeconds)} ` +
        `leave no time to hold a delivery inside the lock renewal and functionTimeout (${formatDuration(limit)}).`,
    );
  }
  if (breaker.backoffBaseSeconds > breaker.backoffMaxSeconds) {
    problems.push(
      `BREAKER_BACKOFF_BASE=${formatDuration(breaker.backoffBaseSeconds)} exceeds BREAKER_BACKOFF_MAX=${formatDuration(breaker.backoffMaxSeconds)}.`,
    );
  }
  return problems;
}

/** A connection string for the Service Bus emulator or the local peer, the only ones accepted. */
// Stryker disable next-line Regex: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); settings.test.ts pins it
export const EMULATOR_FLAG = /(^|;)\s*UseDevelopmentEmulator\s*=\s*true\s*(;|$)/i;

/**
 * The sweeper must resend a message the relay sent but could not mark while the broker still
 * remembers its MessageId: OUTBOX_SWEEP_AGE + OUTBOX_SWEEP_INTERVAL (the latest a first resend
 * comes after the commit) within SERVICEBUS_DUPLICATE_WINDOW. Later resends (a message pending
 * through a long outage) are the downstream inbox's to absorb, as any redelivery is.
 */
function outboxProblems({ outbox, serviceBus, inbox }: Settings): string[] {
  const problems: string[] = [];
  // A dispatched document's ttl: whole seconds Cosmos DB takes; kept no longer than the markers,
  // so that no outbox document outlives the marker that says its message was processed.
  const retention = outbox.dispatchedRetentionSeconds;
  if (!Number.isInteger(retention) || retention < 60 || retention > inbox.retentionSeconds) {
    problems.push(
      `OUTBOX_DISPATCHED_RETENTION=${formatDuration(retention)} must be whole seconds from PT1M to INBOX_RETENTION=${formatDuration(inbox.retentionSeconds)}.`,
    );
  }
  if (sweepSchedule({ outbox }) === undefined) {
    problems.push(
      `OUTBOX_SWEEP_INTERVAL=${formatDuration(outbox.sweepIntervalSeconds)} must divide a minute or an hour in whole seconds or minutes (PT5S, PT10S, PT15S, PT20S, PT30S, PT1M, PT2M, PT5M, PT10M, PT15M, PT20M, PT30M, ...).`,
    );
  }
  if (outbox.sweepAgeSeconds < MIN_SWEEP_AGE_SECONDS) {
    problems.push(
      `OUTBOX_SWEEP_AGE=${formatDuration(outbox.sweepAgeSeconds)} is under PT10S, two polls of the change feed: the sweeper would resend what the relay is about to send.`,
    );
  }
  const latest = outbox.sweepAgeSeconds + outbox.sweepIntervalSeconds;
  if (latest > serviceBus.duplicateWindowSeconds) {
    problems.push(
      `OUTBOX_SWEEP_AGE=${formatDuration(outbox.sweepAgeSeconds)} + OUTBOX_SWEEP_INTERVAL=${formatDuration(outbox.sweepIntervalSeconds)} = ${formatDuration(latest)} ` +
        `exceeds SERVICEBUS_DUPLICATE_WINDOW=${formatDuration(serviceBus.duplicateWindowSeconds)}: a resend of a message the relay sent could pass the broker's duplicate detection. ` +
        // Stryker disable next-line StringLiteral: message text only
        `Lower them, or raise the window (the Bicep's and this setting together).`,
    );
  }
  if (serviceBus.connectionString !== undefined) {
    if (serviceBus.fullyQualifiedNamespace !== undefined) {
      problems.push(
        'Set ServiceBusConnection__fullyQualifiedNamespace (Azure, with identity) or ServiceBusConnection (the emulator or local peer), not both.',
      );
    } else if (!EMULATOR_FLAG.test(serviceBus.connectionString)) {
      problems.push(
        'ServiceBusConnection is a connection string, accepted only for the emulator or the local peer (with UseDevelopmentEmulator=true). ' +
          // Stryker disable next-line StringLiteral: message text only
          'In Azure set ServiceBusConnection__fullyQualifiedNamespace: the namespace has local (key) auth disabled.',
      );
    }
  }
  return problems;
}

/** The shortest OUTBOX_SWEEP_AGE: two polls of the change feed (5 s each) after the commit. */
export const MIN_SWEEP_AGE_SECONDS = 10;

/**
 * The sweeper's NCRONTAB schedule (six fields, seconds first) for OUTBOX_SWEEP_INTERVAL: whole
 * seconds that divide a minute, or whole minutes that divide an hour; undefined for any other
 * interval, which a schedule cannot repeat evenly.
 */
export function sweepSchedule(settings: Pick<Settings, 'outbox'>): string | undefined {
  const seconds = settings.outbox.sweepIntervalSeconds;
  // Stryker disable next-line ConditionalExpression: equivalent: an interval of 0 s divides nothing (60 % 0 is NaN)
  if (Number.isInteger(seconds) && seconds >= 1 && seconds < 60 && 60 % seconds === 0) {
    return seconds === 1 ? '* * * * * *' : `*/${seconds} * * * * *`;
  }
  const minutes = seconds / 60;
  // Stryker disable next-line ConditionalExpression: equivalent: an interval under a minute is handled above, or is not whole minutes
  if (Number.isInteger(minutes) && minutes >= 1 && minutes < 60 && 60 % minutes === 0) {
    return minutes === 1 ? '0 * * * * *' : `0 */${minutes} * * * *`;
  }
  return undefined;
}
/** The defaults of HOST_MAX_AUTO_LOCK_RENEWAL and HOST_FUNCTION_TIMEOUT: what this project's host.json sets. */
export const HOST_JSON_DEFAULTS = { maxAutoLockRenewal: 'PT5M', functionTimeout: 'PT5M' } as const;

/**
 * Where the settings disagree with host.json: the breaker derives how long it may hold a delivery
 * from HOST_MAX_AUTO_LOCK_RENEWAL and HOST_FUNCTION_TIMEOUT, so they must be what the host really
 * uses. host.json writes time spans as hh:mm:ss.
 */
export function hostJsonProblems(settings: Pick<Settings, 'host'>, hostJson: unknown): string[] {
  const json = (hostJson ?? {}) as {
    functionTimeout?: unknown;
    extensions?: { serviceBus?: { maxAutoLockRenewalDuration?: unknown } };
  };
  const checks = [
    ['HOST_FUNCTION_TIMEOUT', 'functionTimeout', json.functionTimeout, settings.host.functionTimeoutSeconds],
    [
      'HOST_MAX_AUTO_LOCK_RENEWAL',
      'extensions.serviceBus.maxAutoLockRenewalDuration',
      json.extensions?.serviceBus?.maxAutoLockRenewalDuration,
      settings.host.maxAutoLockRenewalSeconds,
    ],
  ] as const;
  return checks.flatMap(([setting, path, value, seconds]) => {
    const hostSeconds = typeof value === 'string' ? timeSpanSeconds(value) : undefined;
    return hostSeconds === seconds
      ? []
      : [
          `${setting}=${formatDuration(seconds)} does not match host.json ${path}=${JSON.stringify(value ?? null).slice(0, 40)}: ` +
            // Stryker disable next-line StringLiteral: message text only
            'set both to the same value (host.json writes hh:mm:ss).',
        ];
  });
}

/** A .NET time span as host.json writes it: [d.]hh:mm:ss[.fff]. */
export function timeSpanSeconds(text: string): number | undefined {
  const match = /^(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2}(?:\.\d+)?)$/.exec(text.trim());
  if (!match) return undefined;
  const [, days, hours, minutes, seconds] = match;
  return Number(days ?? 0) * 86_400 + Number(hours) * 3_600 + Number(minutes) * 60 + Number(seconds);
}
