import { hash } from 'node:crypto';

import { type Delivery, isJson } from './delivery';
import { bounded, InboxError } from './errors';
import type { OutboxMessage } from './outbox';

/**
 * Delayed retry: Service Bus has no "abandon with a delay". A handler that fails because a
 * dependency is slow for minutes (not an outage of Cosmos DB, which the breaker rides out) would
 * burn every delivery of its message in seconds and dead-letter it. A subscription that declares
 * `delayedRetry` in src/topology.json gets, after `afterDeliveries` failed deliveries, a copy of
 * the message scheduled on its topic for later, and the delivery completes. The copy:
 *
 *   Subject          `inbox.retry`, which no subscription's subjects may take, so it does not fan out
 *   inboxRetryFor    the subscription's name: its filter takes `inbox.retry` with its own name only
 *   inboxRetryOf     the original MessageId: the copy's inbox key, so its effect stays once
 *   inboxRetryAttempt  1 for the first copy, 2 for the copy of the copy, ...
 *   inboxRetrySubject  the original Subject, restored for the consumer
 *   MessageId        `<original>:retry:<subscription>:<attempt>`, deterministic, so a delivery whose
 *                    completion is lost schedules the same copy again and the duplicate detection
 *                    drops it; the subscription keeps apart the copies two subscriptions of one
 *                    topic schedule for one message, which that detection would otherwise drop
 *
 * The delays grow exponentially (firstDelaySeconds × 2^(attempt-1), at most maxDelaySeconds, plus
 * up to 10 % jitter so a burst of failures does not come back at one instant). Once the last copy
 * has failed `afterDeliveries` times it is given back as any failed delivery is, and Service Bus
 * dead-letters it after maxDeliveryCount, with the failure note (failureNote.ts) of its last try.
 */
export interface DelayedRetryPolicy {
  /** How many delayed copies, one after another: 1 to 10. */
  attempts: number;
  /** The first copy's delay, seconds: 1 to 3,600. */
  firstDelaySeconds: number;
  /**
   * The longest delay, seconds: from firstDelaySeconds to 3,600.
   * @default firstDelaySeconds × 2^(attempts-1), at most 3,600
   */
  maxDelaySeconds?: number;
  /**
   * Failed deliveries of one message (the original or a copy) before a copy is scheduled: the
   * immediate retries. 1 to maxDeliveryCount − 1.
   * @default 2
   */
  afterDeliveries?: number;
}

/** The Subject of every delayed copy; a topology that declares it as a subject is refused. */
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing)
export const RETRY_SUBJECT = 'inbox.retry';

/** The application properties of a delayed copy. */
// Stryker disable next-line ObjectLiteral,StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing)
export const RETRY_PROPERTIES = {
  of: 'inboxRetryOf',
  for: 'inboxRetryFor',
  attempt: 'inboxRetryAttempt',
  subject: 'inboxRetrySubject',
} as const;

export const MAX_RETRY_ATTEMPTS = 10;
export const MAX_RETRY_DELAY_SECONDS = 3600;
export const DEFAULT_AFTER_DELIVERIES = 2;
/** A delay is stretched by up to this fraction, at random. */
export const RETRY_JITTER = 0.1;
/** Service Bus: a MessageId is at most 128 characters. */
const MAX_MESSAGE_ID = 128;

/** What a delivery of a delayed copy carries about its family (Delivery.retry). */
export interface RetryIdentity {
  /** The copy's own MessageId (the delivery's messageId is the original's). */
  copyMessageId: string;
  /** Which copy: 1 for the first. */
  attempt: number;
  /** The subscription the copy was scheduled for. */
  for: string;
}

/** A policy with its defaults filled in. */
export type ResolvedRetryPolicy = Required<DelayedRetryPolicy>;

export function resolvedPolicy(policy: DelayedRetryPolicy): ResolvedRetryPolicy {
  return {
    attempts: policy.attempts,
    firstDelaySeconds: policy.firstDelaySeconds,
    maxDelaySeconds:
      policy.maxDelaySeconds ??
      Math.min(MAX_RETRY_DELAY_SECONDS, policy.firstDelaySeconds * 2 ** (policy.attempts - 1)),
    afterDeliveries: policy.afterDeliveries ?? DEFAULT_AFTER_DELIVERIES,
  };
}

/**
 * What is wrong with a subscription's `delayedRetry` declaration (src/topology.json), one line per
 * problem; empty when it is usable. `maxDeliveryCount` is the subscriptions' (a setting), when known.
 */
export function delayedRetryProblems(
  subscription: string,
  value: unknown,
  maxDeliveryCount?: number,
): string[] {
  const at = `subscription '${bounded(subscription, 60)}': delayedRetry`;
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return [`${at} must be an object ({ "attempts": 3, "firstDelaySeconds": 30 })`];
  const problems: string[] = [];
  const known = new Set(['attempts', 'firstDelaySeconds', 'maxDelaySeconds', 'afterDeliveries']);
  for (const key of Object.keys(value).filter((name) => !known.has(name)))
    problems.push(`${at} has no setting '${bounded(key, 40)}' (${[...known].join(', ')})`);
  const policy = value as Record<string, unknown>;
  const integer = (
    name: string,
    min: number,
    max: number,
    optional: boolean,
    range = `from ${min} to ${max}`,
  ): number | undefined => {
    const field = policy[name];
    if (field === undefined && optional) return undefined;
    // Number.isInteger is false for anything but a number.
    const whole = Number.isInteger(field) ? (field as number) : NaN;
    if (!(whole >= min && whole <= max)) {
      problems.push(`${at}.${name} must be a whole number ${range}`);
      return undefined;
    }
    return whole;
  };
  integer('attempts', 1, MAX_RETRY_ATTEMPTS, false);
  const first = integer('firstDelaySeconds', 1, MAX_RETRY_DELAY_SECONDS, false);
  integer('maxDelaySeconds', first ?? 1, MAX_RETRY_DELAY_SECONDS, true);
  if (maxDeliveryCount === undefined)
    integer(
      'afterDeliveries',
      1,
      Infinity,
      true,
      'of at least 1 (below SERVICEBUS_MAX_DELIVERY_COUNT, checked at start)',
    );
  else integer('afterDeliveries', 1, maxDeliveryCount - 1, true);
  return problems;
}

/** The delay before copy `attempt` (1 for the first), seconds, jitter included (`random` in [0, 1)). */
export function retryDelaySeconds(policy: ResolvedRetryPolicy, attempt: number, random: number): number {
  const base = Math.min(policy.maxDelaySeconds, policy.firstDelaySeconds * 2 ** (attempt - 1));
  return base * (1 + RETRY_JITTER * random);
}

/** The longest a copy can wait, seconds: a marker must outlive it (see retentionBoundSeconds). */
export function longestRetryDelaySeconds(policy: ResolvedRetryPolicy): number {
  return policy.maxDelaySeconds * (1 + RETRY_JITTER);
}

/**
 * The copy's MessageId: `<original>:retry:<subscription>:<attempt>`, or, when that would pass
 * Service Bus's 128 characters, the original's SHA-256 in its place (64 + 7 + a subscription of at
 * most 50 + 3 fits). Deterministic: the same failure schedules the same id, which the topic's
 * duplicate detection drops. The subscription is in it because the detection is per topic: two
 * subscriptions of one topic whose consumers both fail a message each need their copy.
 */
export function retryMessageId(originalMessageId: string, subscription: string, attempt: number): string {
  const suffix = `:retry:${subscription}:${attempt}`;
  const plain = `${originalMessageId}${suffix}`;
  return plain.length <= MAX_MESSAGE_ID ? plain : `${hash('sha256', originalMessageId)}${suffix}`;
}

/**
 * Which failures a delayed retry is for: the handler's own (a dependency it calls), not the inbox's:
 * poison never succeeds, and a Cosmos DB failure (TransientStoreError, the breaker's
 * CircuitOpenError) or a lost race (ConcurrencyConflictError) is redelivered as before.
 */
export function isRetryable(error: unknown): boolean {
  return !(error instanceof InboxError);
}

/** The decision after a failed delivery of a consumer with a delayed-retry policy. */
export type RetryDecision =
  | { kind: 'redeliver' }
  /** Schedule copy `attempt`, `delaySeconds` from now. */
  | { kind: 'schedule'; attempt: number; delaySeconds: number }
  /** The last copy failed its deliveries too: give it back; Service Bus dead-letters it. */
  | { kind: 'spent'; attempts: number };

export function retryDecision(
  policy: ResolvedRetryPolicy,
  delivery: Pick<Delivery, 'deliveryCount' | 'retry' | 'body' | 'shadowedByBody'>,
  error: unknown,
  random: number,
): RetryDecision {
  if (!isRetryable(error) || delivery.deliveryCount < policy.afterDeliveries) return { kind: 'redeliver' };
  // Bytes cannot be sent again as they came (the copy's body is JSON text), and a body that hides
  // the application properties would hide the copy's family too: redelivery, as before.
  if (Buffer.isBuffer(delivery.body) || delivery.shadowedByBody?.includes('applicationProperties'))
    return { kind: 'redeliver' };
  const done = delivery.retry?.attempt ?? 0;
  if (done >= policy.attempts) return { kind: 'spent', attempts: policy.attempts };
  const attempt = done + 1;
  return { kind: 'schedule', attempt, delaySeconds: retryDelaySeconds(policy, attempt, random) };
}

/**
 * The copy to schedule on the topic: the delivery's body, ContentType and CorrelationId, its
 * application properties (the trace context among them) with the family's, under the retry Subject.
 */
export function retryCopy(
  delivery: Delivery,
  topic: string,
  subscription: string,
  attempt: number,
): OutboxMessage {
  // The original's: a delivery of a copy carries the original MessageId as its messageId.
  const original = delivery.messageId!;
  const properties: Record<string, string | number | boolean> = {};
  for (const [name, value] of Object.entries(delivery.applicationProperties)) {
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
      properties[name] = value;
  }
  properties[RETRY_PROPERTIES.of] = original;
  properties[RETRY_PROPERTIES.for] = subscription;
  properties[RETRY_PROPERTIES.attempt] = attempt;
  if (delivery.subject === undefined) delete properties[RETRY_PROPERTIES.subject];
  else properties[RETRY_PROPERTIES.subject] = delivery.subject;
  return {
    messageId: retryMessageId(original, subscription, attempt),
    topic,
    subject: RETRY_SUBJECT,
    body: delivery.body,
    contentType: 'application/json',
    correlationId: delivery.correlationId,
    applicationProperties: properties,
  };
}

/**
 * A delivery of a delayed copy, seen as its original: the original MessageId (the inbox key) and
 * Subject, with `retry` saying which copy it is. A delivery that is not a copy is returned as it is.
 *
 * A copy is known by what a body cannot hide: its family properties and its MessageId, never its
 * Subject alone. The host lays a JSON body's top-level properties over the trigger metadata, so a
 * body with `subject` and `label` hides the Subject `inbox.retry`; it can hide the application
 * properties too (`applicationProperties` and `userProperties`), but never forge them, since then
 * none is read. A delivery that claims to be a copy but cannot be read as one (properties missing
 * or malformed, a MessageId that is not the copy's, a copy's MessageId with its properties hidden)
 * is returned with `invalidRetryCopy`, which processing refuses as poison (`invalid-retry-copy`).
 */
export function asOriginal(delivery: Delivery): Delivery {
  const properties = delivery.applicationProperties;
  if (!Object.values(RETRY_PROPERTIES).some((name) => properties[name] !== undefined)) {
    if (delivery.subject === RETRY_SUBJECT)
      return invalidCopy(delivery, `its Subject is ${RETRY_SUBJECT} but it has no inboxRetry* properties`);
    if (
      delivery.shadowedByBody?.includes('applicationProperties') &&
      // Stryker disable next-line StringLiteral: equivalent: no text but a copy's MessageId matches the pattern
      COPY_MESSAGE_ID.test(delivery.messageId ?? '')
    )
      return invalidCopy(
        delivery,
        "its MessageId is a copy's, and its body hides its properties (top-level applicationProperties and userProperties)",
      );
    return delivery;
  }
  const of = properties[RETRY_PROPERTIES.of];
  const attempt = properties[RETRY_PROPERTIES.attempt];
  const target = properties[RETRY_PROPERTIES.for];
  const subject = properties[RETRY_PROPERTIES.subject];
  if (
    typeof of !== 'string' ||
    of === '' ||
    of.length > MAX_MESSAGE_ID ||
    !Number.isInteger(attempt) ||
    (attempt as number) < 1 ||
    (attempt as number) > MAX_RETRY_ATTEMPTS ||
    typeof target !== 'string' ||
    (subject !== undefined && typeof subject !== 'string')
  )
    return invalidCopy(delivery, 'its inboxRetry* properties are missing or malformed');
  const copyMessageId = delivery.messageId;
  if (copyMessageId !== retryMessageId(of, target, attempt as number))
    return invalidCopy(delivery, 'its MessageId is not the one its inboxRetry* properties give');
  return {
    ...delivery,
    messageId: of,
    messageIdIsLossy: delivery.messageIdIsLossy || isJson(of),
    subject: subject === '' ? undefined : subject,
    retry: { copyMessageId, attempt: attempt as number, for: target },
  };
}

/** A copy's MessageId (retryMessageId): a subscription name (at most 50 characters, no colon), then the attempt. */
// Stryker disable next-line Regex: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); delayedRetry.test.ts pins it
const COPY_MESSAGE_ID = /:retry:[\w.-]{1,50}:(?:[1-9]|10)$/;

function invalidCopy(delivery: Delivery, problem: string): Delivery {
  return { ...delivery, invalidRetryCopy: problem };
}

/** Schedules a delayed copy on a topic (src/serviceBusPublisher.ts); throws when it may not be scheduled. */
export interface RetryScheduler {
  schedule(topic: string, message: OutboxMessage, enqueueAt: Date): Promise<void>;
}

/** Where a consumer with delayed retry schedules its copies, and its policy (src/topology.json). */
export interface DelayedRetryBinding {
  topic: string;
  subscription: string;
  policy: DelayedRetryPolicy;
}
