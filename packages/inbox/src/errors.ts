/**
 * The base of every error the inbox throws. Callers branch on the class or on `reason`, never on
 * message text. Throwing any of them from a Service Bus trigger abandons the delivery: Service Bus
 * redelivers it, and after maxDeliveryCount moves it to the dead-letter queue.
 *
 * @example
 * ```ts
 * try {
 *   await work();
 * } catch (error) {
 *   if (error instanceof PoisonMessageError) console.log(error.reason); // never error.message
 *   else if (!(error instanceof InboxError)) throw error; // not the inbox's
 * }
 * ```
 */
export class InboxError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'InboxError';
  }
}

/** The most characters of one untrusted value (a MessageId, a subject, a partition key, an id) that errors and logs echo. */
export const MAX_ECHOED_CHARS = 100;

/**
 * Untrusted text as errors, logs and the tools echo it: at most `max` characters, then an ellipsis
 * and the full length, so a 1 MB partition key does not make a 1 MB log line. `oneLine` folds
 * whitespace and control characters to single spaces (for a terminal); `compact` ends a cut text
 * with the ellipsis alone, within `max` characters (for a table cell). The one bounding helper: the
 * tools' (packages/devkit/src/cli/errors.ts) is this one, one-line and compact.
 */
export function bounded(
  text: string,
  max = MAX_ECHOED_CHARS,
  { oneLine = false, compact = false }: { oneLine?: boolean; compact?: boolean } = {},
): string {
  // eslint-disable-next-line no-control-regex -- control characters are what it folds
  const line = oneLine ? text.replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, ' ') : text;
  if (line.length <= max) return line;
  return compact ? `${line.slice(0, max - 1)}…` : `${line.slice(0, max)}…(${line.length} characters)`;
}

/**
 * The HTTP status of a Cosmos DB request that failed (@azure/cosmos throws an ErrorResponse whose
 * `code` is the status), or undefined when the error is not one. The one place that reads it.
 */
export function storeStatusOf(error: unknown): number | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'number' ? code : undefined;
}

/**
 * Why a message is poison: it can never succeed, nothing was written, and Service Bus dead-letters
 * it once its deliveries run out. The reason is in PoisonMessageError.reason, in the delivery's log
 * line (`"reason"`) and in the `inbox.messages` metric's `poison` outcome.
 */
export const POISON_REASONS = [
  /** The message has no MessageId, so its effect cannot be deduplicated. */
  'missing-message-id',
  /**
   * The body has a top-level property the Functions host puts in place of the broker's own metadata
   * (a `MessageId`, `DeliveryCount`, ... in any case): the message cannot be deduplicated. Rename it.
   */
  'metadata-shadowed-by-body',
  /** The body is not JSON (its length and SHA-256 prefix are logged, never its content). */
  'body-not-json',
  /** The body nests arrays or objects deeper than MAX_BODY_DEPTH (64) levels. */
  'too-deep',
  /** The body does not match the consumer's schema, or a versioned consumer projected no numeric version. */
  'schema-violation',
  /** The consumer's `partitionKey` threw, or gave no non-empty string of at most 2 KB. */
  'no-partition-key',
  /** The consumer declares an `eventKey`, and its `of` threw or gave no non-empty string of at most 2,048 bytes. */
  'no-event-key',
  /** The handler staged more writes and publishes than fit one transactional batch with the marker (100 operations). */
  'too-many-operations',
  /** The staged writes take more than one transactional batch carries (2 MiB), or Cosmos DB answered 413. */
  'batch-too-large',
  /** Cosmos DB refused a staged write with 400 (an id or a document it does not take): retrying cannot change that. */
  'rejected-by-store',
  /** The handler threw PoisonMessageError itself: something is wrong with the message (a negative amount, ...). */
  'rejected-by-handler',
  /**
   * `tx.publish` was given a message the outbox would lose: one Service Bus or JSON would not take
   * as it is, a topic the consumer may not publish to, a subject no subscription takes, a name used twice.
   */
  'invalid-outgoing-message',
  /** The handler staged a write of the inbox's own documents (a marker, an outbox document). */
  'reserved-document',
  /**
   * A delayed-retry copy (Subject `inbox.retry`) without the properties that name its original, or
   * scheduled for another subscription: its effect could not be told apart from the original's.
   */
  'invalid-retry-copy',
  /** Reading the message threw something unexpected, which it would throw on every delivery. */
  'unprocessable',
] as const;
export type PoisonReason = (typeof POISON_REASONS)[number];

/**
 * A message that can never succeed. Nothing was written; the delivery is abandoned so that Service
 * Bus dead-letters the message once its delivery count is exhausted, and nothing is lost. The
 * inbox throws it for what it finds wrong (`reason`: no MessageId, a body that is not JSON or not
 * the schema, ...); a handler throws it with `rejected-by-handler` for what is wrong with the
 * message itself, never for state the message may have produced (that is the marker's job).
 *
 * @example
 * ```ts
 * handle(payment, tx) {
 *   if (payment.amount <= 0) {
 *     throw new PoisonMessageError('rejected-by-handler', 'a payment amount must be positive');
 *   }
 *   // ...
 * }
 * ```
 */
export class PoisonMessageError extends InboxError {
  constructor(
    readonly reason: PoisonReason,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'PoisonMessageError';
  }
}

/**
 * Cosmos DB could not take a request now (429 after the SDK's retries, 5xx, timeout, dropped
 * connection): the delivery is given back, and a redelivery may succeed. `statusCode` is Cosmos
 * DB's, when there was one.
 */
export class TransientStoreError extends InboxError {
  constructor(
    message: string,
    readonly statusCode: number | undefined,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'TransientStoreError';
  }
}

/**
 * The handler kept losing races (ETag conflicts) or kept staging writes that failed, for
 * INBOX_MAX_ATTEMPTS runs (see PartitionTransaction): the delivery is given back, and a redelivery
 * tries again.
 */
export class ConcurrencyConflictError extends InboxError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ConcurrencyConflictError';
  }
}

/**
 * A setting (see Settings) is missing or unsafe: the app refuses to start rather than run with it.
 * `problems` says what is wrong with each, one line per setting.
 */
export class SettingsError extends InboxError {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'SettingsError';
  }
}
