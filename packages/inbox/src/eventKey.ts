import { hash } from 'node:crypto';

import { parseDurationSeconds } from './duration';
import { bounded, PoisonMessageError, SettingsError } from './errors';

/**
 * The event key document: proof that one consumer applied the effect of one business event, under
 * whatever MessageId it came. It catches a producer that sends the same event again under a fresh
 * MessageId, which neither the broker's duplicate window nor the marker (both keyed on MessageId)
 * can see. Opt-in, per consumer (`eventKey` on defineInboxConsumer); created in the marker's batch,
 * right after it, in the same partition.
 */
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); eventKey.test.ts pins the type
export const EVENT_KEY_TYPE = 'inbox-event-key';

/**
 * The most bytes (UTF-8) of an event key. The key is hashed into the document id, so its length
 * does not reach Cosmos DB; the bound keeps a hostile body from making the inbox hash megabytes.
 */
export const MAX_EVENT_KEY_BYTES = 2048;

/** What a consumer does with a message whose event key it applied under another MessageId. */
export type EventKeyConflict = 'absorb' | 'flag';

/**
 * The opt-in check for producers that re-mint MessageIds (`eventKey` on defineInboxConsumer).
 *
 * @example
 * ```ts
 * eventKey: {
 *   of: (payment) => payment.paymentId, // what names the event, not a hash of its body
 *   onConflict: 'absorb',
 * },
 * ```
 */
export interface EventKeyOption<M> {
  /**
   * The business key that names the event (a payment id, an order id and its line): two messages
   * with the same key are the same event, whatever their MessageIds. Not a hash of the body: two
   * distinct events can have equal bodies. A non-empty string of at most 2,048 bytes; a message it
   * throws on or gives no such string for is poison (`no-event-key`).
   */
  of(message: M): string;
  /**
   * A message whose key this consumer applied under another MessageId:
   * - `absorb`: completed without applying it, like a duplicate (outcome `duplicate`, cause
   *   `suspected_producer_duplicate`);
   * - `flag`: applied anyway, and counted and logged as a suspected producer duplicate (outcome
   *   `processed`, cause `suspected_producer_duplicate`): for consumers that want to watch first.
   */
  onConflict: EventKeyConflict;
  /**
   * How long the key is remembered: an ISO-8601 duration (`P7D`, `PT12H`), whole seconds, at least
   * PT1M. A re-minted copy sent later than this is applied again.
   * @default INBOX_RETENTION (the marker's)
   */
  retention?: string;
}

/** A type literal rather than an interface, so that it is itself a Cosmos DB document body. */
export type EventKeyDocument = {
  /** `inbox-event-` + base64url(SHA-256(consumer, key)): 55 characters, legal for Cosmos DB. */
  id: string;
  partitionKey: string;
  type: typeof EVENT_KEY_TYPE;
  consumer: string;
  /** SHA-256 of the key, base64url: the raw key (message content) is not stored. */
  keyHash: string;
  /** The MessageId of the message that applied the event, as it came. */
  messageId: string;
  /** The id of that message's marker: equal for a redelivery of that message, different for a copy. */
  markerId: string;
  processedAt: string;
  processedAtEpochSeconds: number;
  /** When the purge timer may delete it: processedAt + the option's retention. */
  expiresAtEpochSeconds: number;
  /** Cosmos DB TTL backstop in seconds (retention + INBOX_TTL_BACKSTOP), when enabled. */
  ttl?: number;
};

export function eventKeyId(consumer: string, key: string): string {
  // The NUL keeps ('ab', 'c') apart from ('a', 'bc'), as in markerId.
  return `inbox-event-${hash('sha256', `${consumer}\u0000${key}`, 'base64url')}`;
}

/** The option's retention in seconds: its own, or the marker's. Throws SettingsError for a bad one. */
export function eventKeyRetentionSeconds(
  consumer: string,
  option: Pick<EventKeyOption<unknown>, 'retention'>,
  markerRetentionSeconds: number,
): number {
  if (option.retention === undefined) return markerRetentionSeconds;
  const setting = `${consumer}: eventKey.retention`;
  const seconds = parseDurationSeconds(option.retention, setting);
  if (!Number.isInteger(seconds) || seconds < 60) {
    throw new SettingsError([
      `${setting}='${bounded(option.retention, 40)}' must be whole seconds, at least PT1M.`,
    ]);
  }
  return seconds;
}

/** Checks an option when the consumer is defined, so that a bad one stops the app at start-up. */
export function checkEventKeyOption(
  consumer: string,
  option: { of: unknown; onConflict: unknown; retention?: string },
): void {
  if (typeof option.of !== 'function') {
    throw new SettingsError([`${consumer}: eventKey.of must be a function of the message.`]);
  }
  if (option.onConflict !== 'absorb' && option.onConflict !== 'flag') {
    throw new SettingsError([
      `${consumer}: eventKey.onConflict must be 'absorb' or 'flag', not ${JSON.stringify(bounded(String(option.onConflict), 40))}.`,
    ]);
  }
  // Any positive number of seconds stands in for INBOX_RETENTION: only the option's own is checked.
  eventKeyRetentionSeconds(consumer, option, 1);
}

/** The message's event key, or poison (`no-event-key`). Never echoes the key: it is message content. */
export function eventKeyOf<M>(option: EventKeyOption<M>, message: M): string {
  let key: unknown;
  try {
    key = option.of(message);
  } catch (error) {
    throw new PoisonMessageError(
      'no-event-key',
      `The event key could not be derived: ${bounded(String((error as Error).message))}`,
      { cause: error },
    );
  }
  if (typeof key !== 'string' || key.length === 0 || Buffer.byteLength(key) > MAX_EVENT_KEY_BYTES) {
    const got =
      typeof key === 'string'
        ? `a string of ${Buffer.byteLength(key)} bytes`
        : key === null
          ? 'null'
          : typeof key;
    throw new PoisonMessageError(
      'no-event-key',
      `The message yields no usable event key (got ${got}); it must be a non-empty string of at most ${MAX_EVENT_KEY_BYTES} bytes.`,
    );
  }
  return key;
}

/** What logs say about a key: its length and a hash prefix, never its content. */
export function eventKeyFingerprint(key: string): { characters: number; sha256: string } {
  return { characters: key.length, sha256: hash('sha256', key, 'hex').slice(0, 16) };
}

export interface EventKeyInput {
  consumer: string;
  key: string;
  partitionKey: string;
  messageId: string;
  markerId: string;
  now: Date;
  retentionSeconds: number;
  ttlBackstopSeconds: number | undefined;
}

/** The event key document. A `ttl` it does not have is `undefined`, which JSON leaves out. */
export function buildEventKeyDocument(input: EventKeyInput): EventKeyDocument {
  const processedAtEpochSeconds = Math.floor(input.now.getTime() / 1000);
  return {
    id: eventKeyId(input.consumer, input.key),
    partitionKey: input.partitionKey,
    type: EVENT_KEY_TYPE,
    consumer: input.consumer,
    keyHash: hash('sha256', input.key, 'base64url'),
    messageId: input.messageId,
    markerId: input.markerId,
    processedAt: input.now.toISOString(),
    processedAtEpochSeconds,
    expiresAtEpochSeconds: processedAtEpochSeconds + input.retentionSeconds,
    ttl:
      input.ttlBackstopSeconds === undefined ? undefined : input.retentionSeconds + input.ttlBackstopSeconds,
  };
}
