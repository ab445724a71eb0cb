import { formatDuration, parseDurationSeconds } from './duration';
import { ConfigurationError } from './errors';

/**
 * Every setting the app reads, with its default. Defaults apply in this one place. In Azure the
 * Bicep supplies them as app settings; locally, local.settings.json (see local.settings.sample.json).
 */
export interface Settings {
  cosmos: {
    /** COSMOS_ENDPOINT: required. */
    endpoint: string;
    /** COSMOS_DATABASE: default `app`. */
    database: string;
    /** COSMOS_CONTAINER: default `state`; partitioned on /partitionKey. */
    container: string;
    /** COSMOS_KEY: only for the local server or an emulator; absent in Azure (managed identity). */
    key: string | undefined;
    /** AZURE_CLIENT_ID: the user-assigned identity DefaultAzureCredential should use. */
    clientId: string | undefined;
  };
  inbox: {
    /** INBOX_RETENTION: how long a marker is kept (ISO-8601), default P30D. */
    retentionSeconds: number;
    /**
     * INBOX_TTL_BACKSTOP: extra time after the retention before Cosmos DB's TTL deletes a marker the
     * purge timer missed (ISO-8601), default P7D; `off` writes no `ttl`.
     */
    ttlBackstopSeconds: number | undefined;
    /** INBOX_MAX_ATTEMPTS: handler runs per delivery before giving the delivery back, default 5. */
    maxAttempts: number;
  };
  /** What the Bicep configured on every subscription; used for the retention bound and logs. */
  redelivery: RedeliverySettings;
  purge: {
    /** PURGE_MAX_ITEMS: markers deleted per timer run at most, default 5000. */
    maxItems: number;
    /** PURGE_MAX_DURATION: time spent per timer run at most (ISO-8601), default PT1M. */
    maxDurationSeconds: number;
  };
}

export interface RedeliverySettings {
  /** SERVICEBUS_LOCK_DURATION, default PT1M. */
  lockDurationSeconds: number;
  /** SERVICEBUS_MAX_DELIVERY_COUNT, default 10. */
  maxDeliveryCount: number;
  /** SERVICEBUS_MESSAGE_TTL, default P14D. */
  messageTtlSeconds: number;
  /** INBOX_RESUBMIT_MARGIN: how late an operator may resubmit from the dead-letter queue, default P7D. */
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
  const read = <T>(name: string, fallback: string, parse: (text: string) => T): T => {
    try {
      return parse(env[name]?.trim() || fallback);
    } catch (error) {
      problems.push(
        error instanceof ConfigurationError
          ? error.problems.join('; ')
          : `${name}: ${(error as Error).message}`,
      );
      return parse(fallback);
    }
  };
  const duration = (name: string, fallback: string): number =>
    read(name, fallback, (text) => parseDurationSeconds(text, name));
  const positiveInteger = (name: string, fallback: string, max = Number.MAX_SAFE_INTEGER): number =>
    read(name, fallback, (text) => {
      const value = Number(text);
      if (!Number.isInteger(value) || value < 1 || value > max) {
        throw new ConfigurationError([`${name}='${text}' must be an integer from 1 to ${max}.`]);
      }
      return value;
    });

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
  const settings: Settings = {
    cosmos: {
      endpoint: endpoint ?? '',
      database: env.COSMOS_DATABASE?.trim() || 'app',
      container: env.COSMOS_CONTAINER?.trim() || 'state',
      key,
      clientId: env.AZURE_CLIENT_ID?.trim() || undefined,
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
    },
  };

  const bound = retentionBoundSeconds(settings.redelivery);
  if (settings.inbox.retentionSeconds <= bound) {
    const { lockDurationSeconds, maxDeliveryCount, messageTtlSeconds, resubmitMarginSeconds } =
      settings.redelivery;
    problems.push(
      `INBOX_RETENTION=${formatDuration(settings.inbox.retentionSeconds)} does not exceed the time a message can come back: ` +
        `lock ${formatDuration(lockDurationSeconds)} × ${maxDeliveryCount} deliveries + message TTL ${formatDuration(messageTtlSeconds)} ` +
        `+ resubmit margin ${formatDuration(resubmitMarginSeconds)} = ${formatDuration(bound)}. ` +
        `A marker purged earlier would let a redelivered message apply its effect twice. Raise INBOX_RETENTION above ${formatDuration(bound)}.`,
    );
  }
  if (problems.length > 0) throw new ConfigurationError(problems);
  return settings;
}
