import { formatDuration, parseDurationSeconds } from './duration';
import { bounded, SettingsError } from './errors';
import { retentionBoundSeconds, type Settings } from './settings';

/**
 * The live drift guard (issue 25): what the deployed Service Bus entities say against what the
 * app's settings promise. INBOX_RETENTION is checked against SERVICEBUS_LOCK_DURATION,
 * SERVICEBUS_MAX_DELIVERY_COUNT and SERVICEBUS_MESSAGE_TTL when the app starts, and the Bicep
 * deploys those values; an edit in the portal afterwards changes the entities and not the settings.
 * Read through Azure Resource Manager (the property names are ARM's, as infra/modules/servicebus.bicep
 * writes them), a value that differs from its setting is drift. Drift is unsafe when it breaks
 * what the inbox relies on: a subscription whose deployed lock duration × max delivery count + TTL
 * + resubmit margin (+ the longest delay of its delayed retry, when it has one) reaches
 * INBOX_RETENTION (a marker could be purged before its message stops coming back), or a topic whose duplicate detection is off or shorter than
 * SERVICEBUS_DUPLICATE_WINDOW (the outbox's resends inside that window would pass it).
 */
export interface DeployedSubscription {
  topic: string;
  subscription: string;
  /** ARM `properties` of `Microsoft.ServiceBus/namespaces/topics/subscriptions`. */
  properties: { lockDuration?: unknown; maxDeliveryCount?: unknown; defaultMessageTimeToLive?: unknown };
  /**
   * Not ARM's: the longest wait of the subscription's delayed retry (delayedRetry.ts), seconds,
   * which the app adds when it declares one. A copy scheduled just before its original succeeded
   * comes that much later, so the bound must cover it too.
   */
  longestRetryDelaySeconds?: number;
}

export interface DeployedTopic {
  topic: string;
  /** ARM `properties` of `Microsoft.ServiceBus/namespaces/topics`. */
  properties: {
    requiresDuplicateDetection?: unknown;
    duplicateDetectionHistoryTimeWindow?: unknown;
    defaultMessageTimeToLive?: unknown;
  };
}

export interface DeployedEntities {
  topics: readonly DeployedTopic[];
  subscriptions: readonly DeployedSubscription[];
}

export interface Drift {
  /** `<topic>` or `<topic>/<subscription>`. */
  entity: string;
  /** The ARM property that differs, e.g. `lockDuration`. */
  property: string;
  /** The setting it should equal, e.g. `SERVICEBUS_LOCK_DURATION`. */
  setting: string;
  expected: string;
  /** What the entity says, bounded. */
  deployed: string;
  /** Breaks the guarantee (see above); otherwise the settings only describe the entity wrongly. */
  unsafe: boolean;
}

/** Echoed values are bounded: an entity's properties are not ours. */
const ECHO = 40;
/** At most this many drifts are named in an error; the rest are counted. */
const NAMED = 5;

/** Every property of the deployed entities that differs from the app's settings. */
export function entityDrift(settings: Settings, deployed: DeployedEntities): Drift[] {
  const { redelivery, serviceBus, inbox } = settings;
  const drifts: Drift[] = [];
  const topicTtl = new Map<string, number | undefined>();
  for (const { topic, properties } of deployed.topics) {
    const detection = properties.requiresDuplicateDetection;
    const window = seconds(properties.duplicateDetectionHistoryTimeWindow);
    topicTtl.set(topic, seconds(properties.defaultMessageTimeToLive));
    if (detection !== true) {
      drifts.push({
        entity: topic,
        property: 'requiresDuplicateDetection',
        setting: 'SERVICEBUS_DUPLICATE_WINDOW',
        expected: 'true',
        deployed: shown(detection),
        unsafe: true,
      });
    } else if (window !== serviceBus.duplicateWindowSeconds) {
      drifts.push({
        entity: topic,
        property: 'duplicateDetectionHistoryTimeWindow',
        setting: 'SERVICEBUS_DUPLICATE_WINDOW',
        expected: formatDuration(serviceBus.duplicateWindowSeconds),
        deployed:
          window === undefined
            ? shown(properties.duplicateDetectionHistoryTimeWindow)
            : formatDuration(window),
        // Stryker disable next-line EqualityOperator: equivalent: an equal window is no drift, so never reaches here
        unsafe: window === undefined || window < serviceBus.duplicateWindowSeconds,
      });
    }
  }
  for (const { topic, subscription, properties, longestRetryDelaySeconds = 0 } of deployed.subscriptions) {
    const lock = seconds(properties.lockDuration);
    const deliveries = count(properties.maxDeliveryCount);
    const ownTtl = seconds(properties.defaultMessageTimeToLive);
    // A message lives as long as the shorter of its topic's and its subscription's default TTL.
    const ttl = minimum(ownTtl, topicTtl.get(topic));
    const bound =
      lock === undefined || deliveries === undefined || ttl === undefined
        ? Infinity
        : retentionBoundSeconds({
            lockDurationSeconds: lock,
            maxDeliveryCount: deliveries,
            messageTtlSeconds: ttl,
            resubmitMarginSeconds: redelivery.resubmitMarginSeconds,
          }) + longestRetryDelaySeconds;
    const unsafe = bound >= inbox.retentionSeconds;
    const entity = `${topic}/${subscription}`;
    const compare = (
      property: string,
      setting: string,
      value: number | undefined,
      expected: number,
      raw: unknown,
      format: (n: number) => string,
    ): void => {
      if (value === expected) return;
      const deployed = value === undefined ? shown(raw) : format(value);
      drifts.push({ entity, property, setting, expected: format(expected), deployed, unsafe });
    };
    compare(
      'lockDuration',
      'SERVICEBUS_LOCK_DURATION',
      lock,
      redelivery.lockDurationSeconds,
      properties.lockDuration,
      formatDuration,
    );
    compare(
      'maxDeliveryCount',
      'SERVICEBUS_MAX_DELIVERY_COUNT',
      deliveries,
      redelivery.maxDeliveryCount,
      properties.maxDeliveryCount,
      String,
    );
    // The TTL a message gets: the shorter of the subscription's and its topic's.
    compare(
      'defaultMessageTimeToLive',
      'SERVICEBUS_MESSAGE_TTL',
      ttl,
      redelivery.messageTtlSeconds,
      properties.defaultMessageTimeToLive,
      formatDuration,
    );
  }
  return drifts;
}

/** The error an unsafe drift stops the app with: what differs, and what to do. */
export function assertNoUnsafeDrift(drifts: readonly Drift[]): void {
  const problem = unsafeDriftProblem(drifts);
  if (problem !== undefined) throw new SettingsError([problem]);
}

/** One sentence naming the unsafe drifts (at most NAMED), or undefined when there is none. */
export function unsafeDriftProblem(drifts: readonly Drift[]): string | undefined {
  const unsafe = drifts.filter((drift) => drift.unsafe);
  if (unsafe.length === 0) return undefined;
  const named = unsafe
    .slice(0, NAMED)
    .map(
      ({ entity, property, deployed, setting, expected }) =>
        `${bounded(entity, 120)} ${property} is ${deployed} where ${setting}=${expected}`,
    )
    .join('; ');
  const more = unsafe.length > NAMED ? ` and ${unsafe.length - NAMED} more` : '';
  return (
    `The deployed Service Bus entities no longer match the settings the inbox's guarantee was checked with: ${named}${more}. ` +
    'A marker could be purged while its message can still come back, or a resend pass duplicate detection. Redeploy ' +
    '(azd provision) to restore the entities, or change the settings to match them and raise INBOX_RETENTION above the new bound.'
  );
}

/** Seconds of an ARM duration, or undefined when it is not one. */
function seconds(value: unknown): number | undefined {
  if (typeof value !== 'string' || value.length > ECHO) return undefined;
  try {
    // Stryker disable next-line StringLiteral: equivalent: the name is only in the error, which is discarded
    return parseDurationSeconds(value, 'entity');
    // Stryker disable next-line BlockStatement: equivalent: an empty catch returns undefined as well
  } catch {
    return undefined;
  }
}

function count(value: unknown): number | undefined {
  // isSafeInteger is false for anything but a number.
  return Number.isSafeInteger(value) && (value as number) > 0 ? (value as number) : undefined;
}

function minimum(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}

/** A deployed value as the error and the log show it: JSON, bounded. */
function shown(value: unknown): string {
  return bounded(value === undefined ? 'absent' : (JSON.stringify(value) ?? typeof value), ECHO);
}
