import { InboxError, PoisonMessageError, TransientStoreError } from '@idempotent-consumers/inbox';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { fromStore, storeFailure } from '../src/storeFailure';

/**
 * The one place that says what a failed Cosmos DB request means (packages/inbox/src/storeFailure.ts), fed
 * the errors the real SDK throws against the local server, and the odd values a rejection can carry.
 */
const stack = useLocalStack();

const failedRead = (): Promise<unknown> =>
  fromStore(() => stack.container.item('missing-or-not', 'p').read()).then(
    () => undefined,
    (error: unknown) => error,
  );

describe('fromStore: what the SDK throws', () => {
  it.each([
    [503, { kind: 'unavailable' } as const],
    [500, { kind: 'status', status: 500 } as const],
    [429, { kind: 'throttle', retryAfterMs: 1 } as const],
  ])('a %i is transient, with its status', async (status, fault) => {
    stack.server.faults.inject({ ...fault, on: 'read' });

    const error = await failedRead();

    expect(error).toBeInstanceOf(TransientStoreError);
    expect((error as TransientStoreError).statusCode).toBe(status);
    expect((error as Error).message).toMatch(new RegExp(`^Cosmos DB failed the request with ${status}: `));
  });

  it('a 400 is poison (rejected-by-store), a 413 too (batch-too-large): retrying cannot change them', async () => {
    stack.server.faults.inject({ kind: 'status', status: 400, on: 'read', times: 1 });
    const rejected = await failedRead();
    stack.server.faults.inject({ kind: 'status', status: 413, on: 'read', times: 1 });
    const tooLarge = await failedRead();

    expect(rejected).toBeInstanceOf(PoisonMessageError);
    expect((rejected as PoisonMessageError).reason).toBe('rejected-by-store');
    expect((rejected as Error).message).toMatch(/^Cosmos DB rejected the request with 400: /);
    expect((tooLarge as PoisonMessageError).reason).toBe('batch-too-large');
  });

  it('a connection dropped before every answer is transient, named by its code (the SDK retries a read)', async () => {
    stack.server.faults.inject({ kind: 'dropResponseAfterCommit', on: 'read' });

    const error = await failedRead();

    expect(error).toBeInstanceOf(TransientStoreError);
    expect((error as TransientStoreError).statusCode).toBeUndefined();
    expect((error as Error).message).toMatch(/^Cosmos DB failed the request \([A-Z_]+\): /);
  });

  it("passes the inbox's own errors through as they are", async () => {
    const own = new InboxError('a lost race');
    await expect(fromStore(() => Promise.reject(own))).rejects.toBe(own);
  });
});

describe('storeFailure: what a rejection may carry', () => {
  it('takes the HTTP error from the cause the SDK wraps it in', () => {
    const wrapped = new Error('Batch request error: throttled', {
      cause: Object.assign(new Error('Request rate is large'), { code: 429 }),
    });

    const failure = storeFailure(wrapped);

    expect(failure).toBeInstanceOf(TransientStoreError);
    expect(failure.message).toBe('Cosmos DB failed the request with 429: Request rate is large');
    expect(failure.cause).toBe(wrapped);
  });

  it('says "no status" for a failure with no code, or a code that is neither a status nor a name', () => {
    expect(storeFailure(new Error('socket hang up')).message).toBe(
      'Cosmos DB failed the request (no status): socket hang up',
    );
    expect(storeFailure(Object.assign(new Error('odd'), { code: { nested: 1 } })).message).toBe(
      'Cosmos DB failed the request (no status): odd',
    );
  });

  it('takes undefined, null or text rejected in place of an error', () => {
    expect(storeFailure(undefined).message).toBe('Cosmos DB failed the request (no status): undefined');
    expect(storeFailure(null).message).toBe('Cosmos DB failed the request (no status): null');
    expect(storeFailure('refused').message).toBe('Cosmos DB failed the request (no status): refused');
  });

  it("keeps the message's first line, bounded", () => {
    for (const separator of ['\n', '\r\n']) {
      expect(storeFailure(new Error(`first${separator}second`)).message).toBe(
        'Cosmos DB failed the request (no status): first',
      );
    }
    const long = storeFailure(Object.assign(new Error('x'.repeat(1000)), { code: 'E'.repeat(100) })).message;
    expect(long).toBe(
      `Cosmos DB failed the request (${'E'.repeat(40)}…(100 characters)): ${'x'.repeat(300)}…(1000 characters)`,
    );
  });
});
