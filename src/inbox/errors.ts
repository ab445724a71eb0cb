/**
 * Errors the inbox throws. Callers branch on the class or on `reason`, never on message text.
 * Throwing any of them from a Service Bus trigger abandons the delivery: Service Bus redelivers it,
 * and after maxDeliveryCount moves it to the dead-letter queue.
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
 * Untrusted text as errors and logs echo it: at most MAX_ECHOED_CHARS characters, then an ellipsis
 * and the full length, so a 1 MB partition key does not make a 1 MB log line.
 */
export function bounded(text: string, max = MAX_ECHOED_CHARS): string {
  return text.length <= max ? text : `${text.slice(0, max)}…(${text.length} characters)`;
}

export const POISON_REASONS = [
  'missing-message-id',
  'metadata-shadowed-by-body',
  'body-not-json',
  'too-deep',
  'schema-violation',
  'no-partition-key',
  'too-many-operations',
  'batch-too-large',
  'rejected-by-store',
  'rejected-by-handler',
  'unprocessable',
] as const;
export type PoisonReason = (typeof POISON_REASONS)[number];

/**
 * A message that can never succeed. Nothing was written; the delivery is abandoned so that Service
 * Bus dead-letters the message once its delivery count is exhausted, and nothing is lost.
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

/** Cosmos DB could not take the batch now (429 after the SDK's retries, 5xx, timeout, dropped connection). */
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

/** The handler kept losing races (ETag conflicts) or kept staging operations that failed. */
export class ConcurrencyConflictError extends InboxError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ConcurrencyConflictError';
  }
}

/** A setting is missing or unsafe; the app refuses to start rather than run with it. */
export class ConfigurationError extends InboxError {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigurationError';
  }
}
