import { bounded, InboxError, PoisonMessageError, TransientStoreError } from './errors';

/**
 * Where a failure comes from decides what happens to the message, never its shape: Node's network
 * errors, `fetch`'s DOMExceptions and most HTTP clients' errors carry a `code` just as Cosmos DB's
 * do. So the requests the inbox and `tx` send to Cosmos DB go through `fromStore`, and only what
 * fails there is the store's: a TransientStoreError (counted by the breaker, redelivered, never
 * delayed-retried) or, for what Cosmos DB will never take, a PoisonMessageError. Whatever a
 * handler throws otherwise is its own, and passes through as it is.
 */
export async function fromStore<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    throw storeFailure(error);
  }
}

/**
 * A request to Cosmos DB failed. The SDK throws `Batch request error: …` with the HTTP error as
 * `cause` (point operations throw it directly). 400 and 413 are the request's fault and will not
 * change on a retry; everything else (429 after the SDK's own retries, 5xx, timeouts, a dropped
 * connection — which may have committed: the redelivery will then meet the marker) is worth a
 * redelivery. The inbox's own errors (a lost race in a versioned write) pass through.
 */
export function storeFailure(error: unknown): Error {
  if (error instanceof InboxError) return error;
  const source = (error as { cause?: unknown } | undefined)?.cause ?? error;
  const code = (source as { code?: unknown } | undefined)?.code;
  const status = typeof code === 'number' ? code : undefined;
  const message = source instanceof Error ? source.message : String(source);
  if (status === 400 || status === 413) {
    return new PoisonMessageError(
      status === 413 ? 'batch-too-large' : 'rejected-by-store',
      `Cosmos DB rejected the request with ${status}: ${firstLine(message)}`,
      { cause: error },
    );
  }
  return new TransientStoreError(
    `Cosmos DB failed the request${status ? ` with ${status}` : ` (${typeof code === 'string' ? bounded(code, 40) : 'no status'})`}: ${firstLine(message)}`,
    status,
    { cause: error },
  );
}

function firstLine(text: string): string {
  return bounded(text.split(/\r?\n/, 1)[0] ?? text, 300);
}
