import { createHash } from 'node:crypto';

import type { Container } from '@azure/cosmos';
import {
  InboxError,
  MARKER_TYPE,
  markerLocation,
  PartitionTransaction,
  PoisonMessageError,
  processDelivery,
  type ProcessResult,
  TransientStoreError,
} from '@idempotent-consumers/inbox/internal';
import { dependencyFailures, useLocalStack } from '@idempotent-consumers/local-azure';
import { z } from 'zod';

import { delivery, dependencies, documentsIn, ending, testConsumer, TestMessage } from '../src/testing';

/**
 * Every branch of processDelivery that decides a delivery's outcome, each pinned by what a user
 * cares about: the outcome (or the error the adapter turns into a retry or a dead letter), what was
 * written, and what was counted. Store failures are real answers of the local Cosmos DB server
 * (its fault injection), read by the real SDK.
 */
const stack = useLocalStack();

let accounts = 0;
const nextAccount = (): string => `outcome-${++accounts}`;

/** The PoisonMessageError a delivery ends in (fails the test when it ends otherwise). */
async function poisonOf(work: Promise<ProcessResult>): Promise<PoisonMessageError> {
  const error = await work.then(
    (result) => new Error(`ended as ${result.outcome}`),
    (caught: unknown) => caught,
  );
  if (!(error instanceof PoisonMessageError)) throw error;
  return error;
}

/** A consumer that adds the message's amount to the partition's `total` document. */
const adding = testConsumer((message, tx) =>
  tx.patch('total', [{ op: 'incr', path: '/amount', value: message.amount }]),
);

async function withTotal(): Promise<{ account: string; partitionKey: string; total: () => Promise<number> }> {
  const account = nextAccount();
  const partitionKey = `account:${account}`;
  await stack.container.items.create({ id: 'total', partitionKey, amount: 0 });
  const total = async (): Promise<number> =>
    (await stack.container.item('total', partitionKey).read<{ amount: number }>()).resource?.amount ?? NaN;
  return { account, partitionKey, total };
}

const markersIn = async (partitionKey: string): Promise<Record<string, unknown>[]> =>
  (await documentsIn(stack.container, partitionKey)).filter((doc) => doc.type === MARKER_TYPE);

/**
 * The container, with `work` run right after each transactional batch is answered and before the
 * inbox sees the answer: what another process (the purge timer) does in that instant.
 */
function afterEachBatch(container: Container, work: () => Promise<void>): Container {
  const items = new Proxy(container.items, {
    get(target, property) {
      if (property !== 'batch') return Reflect.get(target, property, target) as unknown;
      return async (...args: Parameters<Container['items']['batch']>) => {
        const response = await target.batch(...args);
        await work();
        return response;
      };
    },
  });
  return new Proxy(container, {
    get: (target, property) =>
      property === 'items' ? items : (Reflect.get(target, property, target) as unknown),
  });
}

describe('a 409 on the marker', () => {
  it('whose marker is purged before it is read back: the message runs again as new, and its effect applies', async () => {
    const { account, partitionKey, total } = await withTotal();
    const message = delivery({ accountId: account, amount: 5 }, { messageId: 'purged-between' });
    await processDelivery(adding, message, dependencies(stack.container));
    const purgeOnce = async (): Promise<void> => {
      const [marker] = await markersIn(partitionKey);
      if (marker) await stack.container.item(String(marker.id), partitionKey).delete();
    };
    let purges = 0;
    const purging = afterEachBatch(stack.container, async () => {
      if (purges++ === 0) await purgeOnce();
    });

    const resent = await processDelivery(adding, message, dependencies(purging));

    // Two batches and the read between them, each charged.
    expect(resent).toMatchObject({ outcome: 'processed', attempts: 2, requests: 3 });
    expect(resent.requestCharge).toBeGreaterThan(0);
    expect(await total()).toBe(10);
    expect(await markersIn(partitionKey)).toHaveLength(1);
  });

  it('with the marker there: a duplicate for the same body, a mismatch for another, and nothing written', async () => {
    const { account, total } = await withTotal();
    await processDelivery(
      adding,
      delivery({ accountId: account, amount: 5 }, { messageId: 'twice' }),
      dependencies(stack.container),
    );

    const again = await ending(
      processDelivery(
        adding,
        delivery({ accountId: account, amount: 5 }, { messageId: 'twice' }),
        dependencies(stack.container),
      ),
    );
    const other = await ending(
      processDelivery(
        adding,
        delivery({ accountId: account, amount: 7 }, { messageId: 'twice' }),
        dependencies(stack.container),
      ),
    );

    expect([again, other]).toEqual(['duplicate', 'payload_mismatch']);
    expect(await total()).toBe(5);
  });
});

describe('a batch operation failing with a status that is not a conflict', () => {
  it.each([
    [0, 403, 'transient 403'],
    [0, 429, 'transient 429'],
    [0, 503, 'transient 503'],
    [1, 403, 'transient 403'],
    [1, 429, 'transient 429'],
    [1, 500, 'transient 500'],
    [1, 408, 'transient 408'],
    [1, 400, 'poison rejected-by-store'],
    [1, 413, 'poison rejected-by-store'],
  ] as const)(
    'operation %i (0: the marker, 1: the write) failing with %i ends as %s, nothing written',
    async (operation, status, expected) => {
      const { account, partitionKey, total } = await withTotal();
      const etagRetries: string[] = [];
      stack.server.faults.inject({ kind: 'status', status, on: 'batch', operation, times: 1 });

      const result = await ending(
        processDelivery(
          adding,
          delivery({ accountId: account, amount: 5 }),
          dependencies(stack.container, { onEtagRetry: (name) => etagRetries.push(name) }),
        ),
      );

      expect(result).toBe(expected);
      expect(await total()).toBe(0);
      expect(await markersIn(partitionKey)).toEqual([]);
      expect(etagRetries).toEqual([]);
    },
  );

  it('a staged publish failing with 429 is transient, not a duplicate: nothing written, nothing published', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    const publishing = testConsumer((message, tx) => {
      tx.create({ id: 'effect', amount: message.amount });
      tx.publish({ topic: 'billing-events', subject: 'Applied', body: { amount: message.amount } });
    });
    // The marker, the create, then the outbox document.
    stack.server.faults.inject({ kind: 'status', status: 429, on: 'batch', operation: 2, times: 1 });

    const result = await ending(
      processDelivery(publishing, delivery({ accountId: account, amount: 5 }), dependencies(stack.container)),
    );
    const retried = await ending(
      processDelivery(publishing, delivery({ accountId: account, amount: 5 }), dependencies(stack.container)),
    );

    expect(result).toBe('transient 429');
    expect(retried).toBe('processed');
    expect(
      (await documentsIn(stack.container, partitionKey)).map((doc) => doc.type ?? doc.id).sort(),
    ).toEqual(['effect', MARKER_TYPE, 'outbox'].sort());
  });
});

describe('the whole request failing', () => {
  it.each([
    [400, 'poison rejected-by-store'],
    [413, 'poison batch-too-large'],
    [403, 'transient 403'],
    [500, 'transient 500'],
  ] as const)('a batch answered %i ends as %s, nothing written', async (status, expected) => {
    const { account, partitionKey, total } = await withTotal();
    stack.server.faults.inject({ kind: 'status', status, on: 'batch', times: 1 });

    const result = await ending(
      processDelivery(adding, delivery({ accountId: account, amount: 5 }), dependencies(stack.container)),
    );

    expect(result).toBe(expected);
    expect(await total()).toBe(0);
    expect(await markersIn(partitionKey)).toEqual([]);
  });

  it("says what the store answered in one line: Cosmos DB's message without its diagnostics line", async () => {
    const fail = async (status: 400 | 503): Promise<Error> => {
      const { account } = await withTotal();
      stack.server.faults.inject({ kind: 'status', status, on: 'batch', times: 1 });
      return processDelivery(
        adding,
        delivery({ accountId: account, amount: 5 }),
        dependencies(stack.container),
      ).then(
        () => new Error('committed'),
        (error: unknown) => error as Error,
      );
    };

    const rejected = await fail(400);
    const failed = await fail(503);

    // Cosmos DB's message is `Message: {"Errors":[...]}\r\nActivityId: ..., Request URI: ...`.
    expect(rejected.message).toMatch(
      /^Cosmos DB rejected the request with 400: Message: \{"Errors":\[.*\]\}$/,
    );
    expect(failed.message).toMatch(/^Cosmos DB failed the request with 503: Message: \{"Errors":\[.*\]\}$/);
    expect(`${rejected.message}${failed.message}`).not.toContain('ActivityId');
  });

  it('a throttled tx.read in the handler is transient 429 (after the SDK retries), and the batch is never sent', async () => {
    const { account, partitionKey, total } = await withTotal();
    const reading = testConsumer(async (message, tx) => {
      const current = await tx.read<{ id: string; amount: number }>('total');
      tx.replace(
        { ...current!.document, amount: current!.document.amount + message.amount },
        {
          ifMatch: current!.etag,
        },
      );
    });
    stack.server.faults.inject({ kind: 'throttle', on: 'read', retryAfterMs: 1 });
    const batchesBefore = stack.server.requestCounts().batch;

    const result = await ending(
      processDelivery(reading, delivery({ accountId: account, amount: 5 }), dependencies(stack.container)),
    );

    expect(result).toBe('transient 429');
    expect(stack.server.requestCounts().batch).toBe(batchesBefore);
    expect(await markersIn(partitionKey)).toEqual([]);
    stack.server.faults.clear();
    expect(await total()).toBe(0);
  });

  it('a failing marker read on a redelivery is transient, and the handler does not run', async () => {
    const { account, partitionKey, total } = await withTotal();
    let runs = 0;
    const counting = testConsumer((message, tx) => {
      runs++;
      tx.patch('total', [{ op: 'incr', path: '/amount', value: message.amount }]);
    });
    stack.server.faults.inject({ kind: 'unavailable', on: 'read' });

    const result = await ending(
      processDelivery(
        counting,
        delivery({ accountId: account, amount: 5 }, { deliveryCount: 2 }),
        dependencies(stack.container),
      ),
    );

    expect(result).toBe('transient 503');
    expect(runs).toBe(0);
    stack.server.faults.clear();
    expect(await total()).toBe(0);
    expect(await markersIn(partitionKey)).toEqual([]);
  });

  it("a handler's own error passes through as it is: neither poison nor transient", async () => {
    const failing = testConsumer(() => {
      throw new TypeError('handler bug');
    });

    expect(
      await ending(
        processDelivery(
          failing,
          delivery({ accountId: nextAccount(), amount: 1 }),
          dependencies(stack.container),
        ),
      ),
    ).toBe('TypeError: handler bug');
  });

  it.each(dependencyFailures(stack))(
    "a handler's own dependency failing with %s passes through as it is",
    async (_case, call) => {
      const thrown = await call().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(thrown).toHaveProperty('code');
      const failing = testConsumer(async () => {
        await call();
      });

      const error = await processDelivery(
        failing,
        delivery({ accountId: nextAccount(), amount: 1 }),
        dependencies(stack.container),
      ).catch((e: unknown) => e);

      expect(error).not.toBeInstanceOf(InboxError);
      expect((error as Error).name).toBe((thrown as Error).name);
      expect((error as { code: unknown }).code).toEqual((thrown as { code: unknown }).code);
    },
  );

  it("a tx.read that fails is the store's even when the handler lets it through its own code", async () => {
    const reading = testConsumer(async (_message, tx) => {
      try {
        await tx.read('anything');
      } finally {
        // the handler's own cleanup runs, and the store's error goes on
      }
    });
    stack.server.faults.inject({ kind: 'unavailable', on: 'read' });

    expect(
      await ending(
        processDelivery(
          reading,
          delivery({ accountId: nextAccount(), amount: 1 }),
          dependencies(stack.container),
        ),
      ),
    ).toBe('transient 503');
  });
});

describe('which failures run the handler again after an ETag pause', () => {
  /**
   * A document that another writer changes (or deletes) between the handler's read and its commit
   * on the first run; the run after the failure writes it unguarded.
   */
  async function raced(
    stage: (tx: Parameters<typeof adding.handle>[1], etag: string) => void,
    race: (partitionKey: string) => Promise<unknown>,
  ): Promise<{ result: string; etagRetries: number; pauses: number[]; previous: unknown[] }> {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    await stack.container.items.create({ id: 'doc', partitionKey, n: 0 });
    let etagRetries = 0;
    const pauses: number[] = [];
    const previous: unknown[] = [];
    const consumer = testConsumer(async (_message, tx) => {
      previous.push(
        tx.previousFailure && { kind: tx.previousFailure.kind, status: tx.previousFailure.status },
      );
      const current = await tx.read('doc');
      if (previous.length === 1) await race(partitionKey);
      // The first run's guarded write fails; the next one writes unguarded.
      if (previous.length === 1) stage(tx, current!.etag);
      else tx.upsert({ id: 'doc', n: 1 });
    });

    const result = await ending(
      processDelivery(
        consumer,
        delivery({ accountId: account, amount: 1 }),
        dependencies(stack.container, {
          onEtagRetry: () => etagRetries++,
          sleep: (ms) => {
            pauses.push(ms);
            return Promise.resolve();
          },
        }),
      ),
    );
    return { result, etagRetries, pauses, previous };
  }

  const changeDoc = (partitionKey: string) =>
    stack.container.items.upsert({ id: 'doc', partitionKey, n: 100 });
  const deleteDoc = (partitionKey: string) => stack.container.item('doc', partitionKey).delete();

  it('a replace whose ETag changed (412): counted, paused, run again', async () => {
    expect(await raced((tx, etag) => tx.replace({ id: 'doc', n: 1 }, { ifMatch: etag }), changeDoc)).toEqual({
      result: 'processed',
      etagRetries: 1,
      // Up to 20 ms × 2^attempt, scaled by the random draw (0.5 here).
      pauses: [20],
      previous: [undefined, { kind: 'replace', status: 412 }],
    });
  });

  it('a delete whose ETag changed (412): counted, paused, run again', async () => {
    expect(await raced((tx, etag) => tx.delete('doc', { ifMatch: etag }), changeDoc)).toEqual({
      result: 'processed',
      etagRetries: 1,
      // Up to 20 ms × 2^attempt, scaled by the random draw (0.5 here).
      pauses: [20],
      previous: [undefined, { kind: 'delete', status: 412 }],
    });
  });

  it('a patch whose condition failed (412): run again at once, not counted as an ETag retry', async () => {
    expect(
      await raced(
        (tx) => tx.patch('doc', [{ op: 'set', path: '/n', value: 1 }], { condition: 'from c where c.n = 0' }),
        changeDoc,
      ),
    ).toEqual({
      result: 'processed',
      etagRetries: 0,
      pauses: [],
      previous: [undefined, { kind: 'patch', status: 412 }],
    });
  });

  it('a patch whose ifMatch ETag changed (412): counted, paused, run again', async () => {
    expect(
      await raced(
        (tx, etag) => tx.patch('doc', [{ op: 'set', path: '/n', value: 1 }], { ifMatch: etag }),
        changeDoc,
      ),
    ).toEqual({
      result: 'processed',
      etagRetries: 1,
      pauses: [20],
      previous: [undefined, { kind: 'patch', status: 412 }],
    });
  });

  it('a replace with an ETag of a document deleted since (404): run again, not counted as an ETag retry', async () => {
    expect(await raced((tx, etag) => tx.replace({ id: 'doc', n: 1 }, { ifMatch: etag }), deleteDoc)).toEqual({
      result: 'processed',
      etagRetries: 0,
      pauses: [],
      previous: [undefined, { kind: 'replace', status: 404 }],
    });
  });
});

describe('the pause after an ETag conflict', () => {
  it('grows with the attempt, up to a second, scaled by the random draw; none after the last run', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    await stack.container.items.create({ id: 'doc', partitionKey, n: 0 });
    const pauses: number[] = [];
    let etagRetries = 0;
    // Another writer wins every race, so each run's replace fails on its ETag.
    const losing = testConsumer(async (_message, tx) => {
      const current = await tx.read<{ id: string; n: number }>('doc');
      await stack.container.items.upsert({ id: 'doc', partitionKey, n: current!.document.n + 1 });
      tx.replace({ id: 'doc', n: -1 }, { ifMatch: current!.etag });
    });
    const deps = dependencies(stack.container, {
      random: () => 0.999,
      onEtagRetry: () => etagRetries++,
      sleep: (ms) => {
        pauses.push(ms);
        return Promise.resolve();
      },
    });

    const result = await ending(
      processDelivery(losing, delivery({ accountId: account, amount: 1 }), {
        ...deps,
        settings: { inbox: { ...deps.settings.inbox, maxAttempts: 7 } },
      }),
    );

    expect(result).toMatch(
      /^ConcurrencyConflictError: Gave up after 7 handler runs: the last batch failed on the replace of 'doc' with 412/,
    );
    // 0.999 × min(1000, 20 × 2^attempt), rounded, after each run but the last: no run follows it.
    expect(pauses).toEqual([40, 80, 160, 320, 639, 999]);
    expect(etagRetries).toBe(6);
  });
});

describe('what the next run sees of the write that failed the batch', () => {
  /** The previous failure each run of `stage` saw, when the write at batch operation 1 fails once with `status`. */
  async function failingOnce(
    status: 404 | 400,
    stage: (tx: PartitionTransaction) => void,
  ): Promise<{ result: string; seen: unknown[] }> {
    const account = nextAccount();
    const seen: unknown[] = [];
    const consumer = testConsumer((_message, tx) => {
      seen.push(tx.previousFailure && { ...tx.previousFailure });
      stage(tx);
    });
    stack.server.faults.inject({ kind: 'status', status, on: 'batch', operation: 1, times: 1 });
    const result = await ending(
      processDelivery(consumer, delivery({ accountId: account, amount: 1 }), dependencies(stack.container)),
    );
    return { result, seen };
  }

  it.each([
    ['create', (tx: PartitionTransaction) => tx.create({ id: 'doc' }, { name: 'opening' }), 'doc', 'opening'],
    ['upsert', (tx: PartitionTransaction) => tx.upsert({ id: 'doc' }, { name: 'total' }), 'doc', 'total'],
    ['delete', (tx: PartitionTransaction) => tx.delete('doc'), 'doc', undefined],
  ] as const)('a %s failing with 404: its kind, id, name and status', async (kind, stage, id, name) => {
    const { result, seen } = await failingOnce(404, (tx) => {
      if (kind === 'delete' && tx.previousFailure) return; // the document is not there to delete
      stage(tx);
    });

    expect(seen).toEqual([undefined, { kind, id, name, status: 404 }]);
    expect(result).toBe('processed');
  });

  it('a publish: named publish: and its name, or its number in the run', async () => {
    const publish = (tx: PartitionTransaction, name?: string): void => {
      tx.publish({ topic: 'billing-events', subject: 'Applied', body: {}, ...(name ? { name } : {}) });
    };
    const numbered = await failingOnce(404, (tx) => publish(tx));
    const named = await failingOnce(404, (tx) => publish(tx, 'receipt'));

    expect(numbered.seen[1]).toMatchObject({ kind: 'publish', name: 'publish:#0', status: 404 });
    expect(named.seen[1]).toMatchObject({ kind: 'publish', name: 'publish:receipt', status: 404 });
    expect(String((numbered.seen[1] as { id: string }).id)).toMatch(/^outbox-[0-9a-f]{32}$/);
  });

  it("names the upsert Cosmos DB rejected, and its name, in the poison's reason", async () => {
    const account = nextAccount();
    const consumer = testConsumer((_message, tx) => tx.upsert({ id: 'doc' }, { name: 'total' }));
    stack.server.faults.inject({ kind: 'status', status: 400, on: 'batch', operation: 1, times: 1 });

    await expect(
      processDelivery(consumer, delivery({ accountId: account, amount: 1 }), dependencies(stack.container)),
    ).rejects.toThrow(
      "Cosmos DB rejected the upsert of 'doc' (total) with 400; retrying cannot change that.",
    );
  });
});

describe('a PartitionTransaction built without an outbox source', () => {
  it('stages writes but refuses to publish, saying why', () => {
    const tx = new PartitionTransaction(stack.container, 'account:no-outbox', undefined);
    tx.create({ id: 'a' });

    expect(() => tx.publish({ topic: 'billing-events', subject: 'Applied', body: {} })).toThrow(
      'This transaction cannot publish: it was built without an outbox source.',
    );
    expect(tx.staged.map((write) => write.kind)).toEqual(['create']);
  });
});

describe('the requests a delivery reports', () => {
  it('count every read the handler made, plus the batch', async () => {
    const account = nextAccount();
    const reading = testConsumer(async (_message, tx) => {
      await tx.read('a');
      await tx.read('b');
      tx.create({ id: 'c' });
    });

    const result = await processDelivery(
      reading,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    );

    expect(result).toMatchObject({ outcome: 'processed', requests: 3 });
  });
});

describe('tx.delete and tx.failed', () => {
  it('deletes a document with the marker, with or without a matching ifMatch', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    await stack.container.items.create({ id: 'plain', partitionKey });
    await stack.container.items.create({ id: 'guarded', partitionKey });
    const deleting = testConsumer(async (_message, tx) => {
      const guarded = await tx.read('guarded');
      tx.delete('plain');
      tx.delete('guarded', { ifMatch: guarded!.etag });
    });

    const result = await ending(
      processDelivery(deleting, delivery({ accountId: account, amount: 1 }), dependencies(stack.container)),
    );

    expect(result).toBe('processed');
    expect((await documentsIn(stack.container, partitionKey)).map((doc) => doc.type ?? doc.id)).toEqual([
      MARKER_TYPE,
    ]);
  });

  it('a delete of a missing document fails the batch with 404; tx.failed(name) without a status sees it', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    const seen: [boolean, boolean, boolean, boolean][] = [];
    const deleting = testConsumer((_message, tx) => {
      seen.push([
        tx.failed('remove'),
        tx.failed('remove', 404),
        tx.failed('remove', 412),
        tx.failed('other'),
      ]);
      if (tx.failed('remove')) {
        tx.create({ id: 'nothing-to-remove' });
        tx.recordAlternative('already-gone');
        return;
      }
      tx.delete('missing', { name: 'remove' });
    });

    const result = await processDelivery(
      deleting,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    );

    expect(result).toMatchObject({ outcome: 'alternative', alternative: 'already-gone', attempts: 2 });
    expect(seen).toEqual([
      [false, false, false, false],
      [true, true, false, false],
    ]);
    expect(
      (await documentsIn(stack.container, partitionKey)).map((doc) => doc.type ?? doc.id).sort(),
    ).toEqual([MARKER_TYPE, 'nothing-to-remove'].sort());
  });
});

describe('message bodies and partition keys', () => {
  const Nullable = TestMessage.extend({ note: z.string().nullable() });

  it('a body with a JSON null in it is processed, and a redelivery of it is a duplicate', async () => {
    const account = nextAccount();
    const consumer = testConsumer((message, tx) => tx.create({ id: 'effect', amount: message.amount }), {
      schema: Nullable,
    });
    const body = { accountId: account, amount: 1, note: null };

    const first = await ending(processDelivery(consumer, delivery(body), dependencies(stack.container)));
    const again = await ending(
      processDelivery(consumer, delivery(body, { deliveryCount: 2 }), dependencies(stack.container)),
    );

    expect([first, again]).toEqual(['processed', 'duplicate']);
  });

  it('a body that is JSON null is a schema violation', async () => {
    expect(await ending(processDelivery(adding, delivery(null), dependencies(stack.container)))).toBe(
      'poison schema-violation',
    );
    expect(await ending(processDelivery(adding, delivery('null'), dependencies(stack.container)))).toBe(
      'poison schema-violation',
    );
  });

  it('a partition key that is not a string is poison, not a TypeError', async () => {
    for (const key of [42, null, undefined, { tenant: 'a' }, ['a']]) {
      const consumer = testConsumer(() => undefined, { partitionKey: () => key as never });

      expect(
        await ending(
          processDelivery(consumer, delivery({ accountId: 'a', amount: 1 }), dependencies(stack.container)),
        ),
      ).toBe('poison no-partition-key');
    }
  });

  it('a partition key of exactly 2 KB is used; one byte more is poison', async () => {
    const key = (bytes: number) => `pk-${'k'.repeat(bytes - 3)}`;
    const at = testConsumer((message, tx) => tx.create({ id: 'effect', amount: message.amount }), {
      partitionKey: () => key(2048),
    });
    const over = testConsumer(() => undefined, { partitionKey: () => key(2049) });
    // A multi-byte character counts by its UTF-8 bytes: 1,024 of them are 2,048 bytes.
    const wide = testConsumer(() => undefined, { partitionKey: () => 'é'.repeat(1025) });

    expect(
      await ending(
        processDelivery(at, delivery({ accountId: 'a', amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('processed');
    expect(await documentsIn(stack.container, key(2048))).toHaveLength(2);
    expect(
      await ending(
        processDelivery(over, delivery({ accountId: 'a', amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('poison no-partition-key');
    expect(
      await ending(
        processDelivery(wide, delivery({ accountId: 'a', amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('poison no-partition-key');
  });

  it('a staged document typed as a marker or an outbox document is poison; one naming another partition fails, writing nothing; one naming its own is taken', async () => {
    const account = nextAccount();
    const marker = testConsumer((_message, tx) => tx.create({ id: 'fake', type: MARKER_TYPE }));
    const elsewhere = testConsumer((_message, tx) =>
      tx.upsert({ id: 'doc', partitionKey: 'account:someone-else' }),
    );

    const typed = await ending(
      processDelivery(marker, delivery({ accountId: account, amount: 1 }), dependencies(stack.container)),
    );
    const other = await ending(
      processDelivery(elsewhere, delivery({ accountId: account, amount: 1 }), dependencies(stack.container)),
    );

    const outboxTyped = await ending(
      processDelivery(
        testConsumer((_message, tx) => tx.upsert({ id: 'fake', type: 'outbox' })),
        delivery({ accountId: account, amount: 1 }),
        dependencies(stack.container),
      ),
    );
    const ownPartition = await ending(
      processDelivery(
        testConsumer((_message, tx) => tx.create({ id: 'mine', partitionKey: `account:${account}` })),
        delivery({ accountId: account, amount: 1 }, { messageId: 'own-partition' }),
        dependencies(stack.container),
      ),
    );

    expect(typed).toBe('poison reserved-document');
    expect(outboxTyped).toBe('poison reserved-document');
    expect(ownPartition).toBe('processed');
    expect(other).toMatch(/^Error: Document "doc" names partition "account:someone-else"/);
    expect(
      (await documentsIn(stack.container, `account:${account}`)).map((doc) => doc.type ?? doc.id).sort(),
    ).toEqual([MARKER_TYPE, 'mine'].sort());
    expect(await documentsIn(stack.container, 'account:someone-else')).toEqual([]);
  });
});

describe('what a delivery reports and keeps', () => {
  /** Request units the local server charged this test's client since `before`. */
  const charged = (before: number): number =>
    stack.server.usageByClient().reduce((sum, usage) => sum + usage.requestCharge, 0) - before;
  const chargedSoFar = (): number => charged(0);

  it('reports the request units Cosmos DB charged, on every path: processed, a 409 read back, a redelivery', async () => {
    const { account } = await withTotal();
    const message = delivery({ accountId: account, amount: 5 }, { messageId: 'charged' });
    const deps = dependencies(stack.container);

    const results = [];
    for (const next of [message, message, { ...message, deliveryCount: 2 }]) {
      const before = chargedSoFar();
      const result = await processDelivery(adding, next, deps);
      results.push([result.outcome, result.requests, result.requestCharge === charged(before)]);
    }

    expect(results).toEqual([
      ['processed', 1, true],
      ['duplicate', 2, true],
      ['duplicate', 1, true],
    ]);
  });

  it("counts the handler's point reads in what it reports, on top of the batch", async () => {
    const { account } = await withTotal();
    const reading = testConsumer(async (message, tx) => {
      const found = await tx.read<{ id: string; amount: number }>('total');
      tx.replace(
        { id: 'total', amount: (found?.document.amount ?? 0) + message.amount },
        { ifMatch: found?.etag ?? '' },
      );
    });

    const before = chargedSoFar();
    const result = await processDelivery(
      reading,
      delivery({ accountId: account, amount: 5 }, { messageId: 'read-charged' }),
      dependencies(stack.container),
    );

    expect(result.outcome).toBe('processed');
    expect(result.requestCharge).toBeCloseTo(charged(before), 6);
  });

  it('a create that meets an existing business document (409) runs the handler again with it, not a duplicate', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    await stack.container.items.create({ id: 'order-1', partitionKey });
    const creating = testConsumer((_message, tx) => {
      if (tx.failed('order', 409)) {
        tx.recordAlternative('order-existed');
        tx.create({ id: 'note' });
        return;
      }
      tx.create({ id: 'order-1' }, { name: 'order' });
    });

    const result = await processDelivery(
      creating,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    );

    expect(result).toMatchObject({ outcome: 'alternative', alternative: 'order-existed', attempts: 2 });
  });

  it('a body that is not JSON is described by its length and hash, never its content', async () => {
    const body = 'secret card number 4111 {';
    const error = await poisonOf(processDelivery(adding, delivery(body), dependencies(stack.container)));
    const bytes = await poisonOf(
      processDelivery(adding, delivery(Buffer.from(body)), dependencies(stack.container)),
    );

    expect(error.message).toBe(
      `The body is not JSON (${body.length} characters, SHA-256 ${createHash('sha256').update(body).digest('hex').slice(0, 16)}).`,
    );
    expect(bytes.message).toBe(error.message);
  });

  it('a body that is JSON text or JSON bytes is parsed as the host would have', async () => {
    const account = nextAccount();
    const consumer = testConsumer((message, tx) => tx.create({ id: `effect-${message.amount}` }));

    const text = await ending(
      processDelivery(
        consumer,
        delivery(JSON.stringify({ accountId: account, amount: 1 })),
        dependencies(stack.container),
      ),
    );
    const bytes = await ending(
      processDelivery(
        consumer,
        delivery(Buffer.from(JSON.stringify({ accountId: account, amount: 2 })), { messageId: 'bytes' }),
        dependencies(stack.container),
      ),
    );

    expect([text, bytes]).toEqual(['processed', 'processed']);
  });

  it('a body whose properties shadow the broker metadata is poison', async () => {
    expect(
      await ending(
        processDelivery(
          adding,
          delivery({ accountId: 'a', amount: 1 }, { shadowedByBody: ['messageId'] }),
          dependencies(stack.container),
        ),
      ),
    ).toBe('poison metadata-shadowed-by-body');
  });

  it('a schema violation lists at most five of its issues', async () => {
    const Wide = z.object(Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${i}`, z.string()])));
    const consumer = testConsumer(() => undefined, { schema: Wide as never });

    const error = await poisonOf(processDelivery(consumer, delivery({}), dependencies(stack.container)));

    expect(error.reason).toBe('schema-violation');
    expect(error.message.match(/f\d+: /g)).toEqual(['f0: ', 'f1: ', 'f2: ', 'f3: ', 'f4: ']);
  });

  it('keeps the cause: of a poison read, of a partition key that threw, of a store failure', async () => {
    const thrown = new RangeError('deep');
    const reading = testConsumer(() => undefined, {
      schema: TestMessage.transform((): TestMessage => {
        throw thrown;
      }),
    });
    const keyError = new Error('no tenant');
    const keyless = testConsumer(() => undefined, {
      partitionKey: () => {
        throw keyError;
      },
    });
    const stringThrown = testConsumer(() => undefined, {
      schema: TestMessage.transform((): TestMessage => {
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- what a library may throw
        throw 'a string';
      }),
    });
    const fail = (consumer: typeof adding) =>
      processDelivery(
        consumer,
        delivery({ accountId: nextAccount(), amount: 1 }),
        dependencies(stack.container),
      ).then(
        (result) => new Error(`ended as ${result.outcome}`),
        (caught: unknown) => caught as Error,
      );

    const read = await fail(reading);
    const key = await fail(keyless);
    const text = await fail(stringThrown);
    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });
    const store = await fail(adding);

    expect(read).toMatchObject({ reason: 'unprocessable', cause: thrown });
    expect(read.message).toContain('RangeError: deep');
    expect(key).toMatchObject({ reason: 'no-partition-key', cause: keyError });
    expect(text).toMatchObject({ reason: 'unprocessable', cause: 'a string' });
    expect(text.message).toContain('failed with string: ;');
    expect(store).toBeInstanceOf(TransientStoreError);
    expect(
      (store.cause as { code?: unknown }).code ?? (store.cause as { cause?: { code?: unknown } }).cause?.code,
    ).toBe(503);
  });

  it('a connection dropped after the commit is transient with no status, and the redelivery finds the marker', async () => {
    const { account, total } = await withTotal();
    const message = delivery({ accountId: account, amount: 5 }, { messageId: 'dropped' });
    stack.server.faults.inject({ kind: 'dropResponseAfterCommit', on: 'batch', times: 1 });

    const error = await processDelivery(adding, message, dependencies(stack.container)).then(
      (result) => new Error(`ended as ${result.outcome}`),
      (caught: unknown) => caught as Error,
    );
    const redelivery = await processDelivery(
      adding,
      { ...message, deliveryCount: 2 },
      dependencies(stack.container),
    );

    expect(error).toBeInstanceOf(TransientStoreError);
    expect((error as TransientStoreError).statusCode).toBeUndefined();
    // No status: the error's code instead (an uppercase system code, never the words 'no status').
    expect(error.message).toMatch(/^Cosmos DB failed the request \([A-Z_]+\): /);
    expect(redelivery.outcome).toBe('duplicate');
    expect(await total()).toBe(5);
  });

  it('a batch over 2 MB is refused before it is sent', async () => {
    const account = nextAccount();
    const blob = 'x'.repeat(800 * 1024);
    const consumer = testConsumer((_message, tx) => {
      for (let i = 0; i < 3; i++) tx.create({ id: `blob-${i}`, blob });
    });
    const batches = stack.server.requestCounts().batch;

    expect(
      await ending(
        processDelivery(consumer, delivery({ accountId: account, amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('poison batch-too-large');
    expect(stack.server.requestCounts().batch).toBe(batches);
  });

  it('markerLocation names the marker processing writes: its id, partition and payload hash', async () => {
    const { account, partitionKey } = await withTotal();
    const message = delivery({ accountId: account, amount: 5 }, { messageId: 'located' });

    await processDelivery(adding, message, dependencies(stack.container));
    const location = markerLocation(adding, message);
    const [marker] = await markersIn(partitionKey);

    expect(location).toEqual({ id: marker?.id, partitionKey, payloadHash: marker?.payloadHash });
  });
});

describe('what an operator reads: the reason each message gives, word for word', () => {
  const messageOf = async (work: Promise<ProcessResult>): Promise<string> => {
    const error = await work.then(
      () => new Error('the delivery ended without an error'),
      (caught: unknown) => caught as Error,
    );
    return error.message;
  };
  const run = (consumer = adding, body: unknown = { accountId: nextAccount(), amount: 1 }, overrides = {}) =>
    messageOf(processDelivery(consumer, delivery(body, overrides), dependencies(stack.container)));

  it('names the top-level properties that shadow the MessageId or DeliveryCount', async () => {
    expect(
      await run(
        adding,
        { accountId: 'a', amount: 1 },
        { shadowedByBody: ['messageId', 'deliveryCount', 'correlationId'] },
      ),
    ).toBe(
      "The body has a top-level messageId and deliveryCount property, which the Functions host puts in place of the broker's " +
        '(names compared ignoring case), so the message cannot be deduplicated. Rename it.',
    );
  });

  it('says a message without a MessageId cannot be deduplicated', async () => {
    expect(await run(adding, { accountId: 'a', amount: 1 }, { messageId: undefined })).toBe(
      'The message has no MessageId, so its effect cannot be deduplicated.',
    );
  });

  it('gives the depth a body may nest to', async () => {
    let body: unknown = 1;
    for (let level = 0; level < 65; level++) body = [body];

    expect(await run(adding, body)).toBe('The body nests arrays or objects more than 64 levels deep.');
  });

  it("names each schema issue's path, the body itself as (body), separated by '; '", async () => {
    const Nested = z.object({ a: z.object({ b: z.string() }), c: z.number() });
    const nested = testConsumer(() => undefined, { schema: Nested as never });

    expect(await run(nested, { a: { b: 1 }, c: 'x' })).toMatch(
      /^The body does not match the test\.consumer message schema: a\.b: [^;]+; c: [^;]+\.$/,
    );
    expect(await run(nested, 5)).toMatch(
      /^The body does not match the test\.consumer message schema: \(body\): [^;]+\.$/,
    );
  });

  it.each([
    [null, 'null'],
    [7, '7'],
    [['k'], 'an array'],
    [{ k: 1 }, 'an object'],
    ['', '""'],
  ])('echoes a partition key of %p as %s, never its contents', async (key, shown) => {
    const keyed = testConsumer(() => undefined, { partitionKey: () => key as never });

    expect(await run(keyed)).toBe(
      `The message yields no usable partition key (got ${shown}); it must be a non-empty string of at most 2 KB.`,
    );
  });

  it('names the status Cosmos DB refused the inbox marker with', async () => {
    stack.server.faults.inject({ kind: 'status', status: 404, on: 'batch', operation: 0, times: 1 });

    expect(await run()).toBe('Cosmos DB refused the inbox marker with 404.');
  });

  it('names the write, its id and the status of a failure no retry can mend here', async () => {
    const upserting = testConsumer((_message, tx) => tx.upsert({ id: 'doc-1' }));
    stack.server.faults.inject({ kind: 'status', status: 500, on: 'batch', operation: 1, times: 1 });

    expect(await run(upserting)).toBe("Cosmos DB failed the upsert of 'doc-1' with 500.");
  });

  it('names a rejected write that has no name by its kind and id alone', async () => {
    const upserting = testConsumer((_message, tx) => tx.upsert({ id: 'doc-2' }));
    stack.server.faults.inject({ kind: 'status', status: 400, on: 'batch', operation: 1, times: 1 });

    expect(await run(upserting)).toBe(
      "Cosmos DB rejected the upsert of 'doc-2' with 400; retrying cannot change that.",
    );
  });

  it('keeps what Cosmos DB said as the cause when it rejects the whole request', async () => {
    stack.server.faults.inject({ kind: 'status', status: 400, on: 'batch', times: 1 });

    const error = await poisonOf(
      processDelivery(
        adding,
        delivery({ accountId: nextAccount(), amount: 1 }),
        dependencies(stack.container),
      ),
    );

    expect(error.reason).toBe('rejected-by-store');
    expect(error.message).toMatch(/^Cosmos DB rejected the request with 400: /);
    expect(error.cause).toBeInstanceOf(Error);
  });

  it('names the projected document that has no numeric version', async () => {
    const projecting = {
      kind: 'versioned' as const,
      name: 'test.projector',
      schema: TestMessage,
      project: (message: TestMessage) => ({
        id: `p-${message.accountId}`,
        partitionKey: `account:${message.accountId}`,
        version: Number.NaN,
        state: {},
      }),
    };

    expect(
      await messageOf(
        processDelivery(
          projecting as never,
          delivery({ accountId: 'v1', amount: 1 }),
          dependencies(stack.container),
        ),
      ),
    ).toBe("The projected document 'p-v1' has no numeric version.");
  });
});
