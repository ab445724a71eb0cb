import {
  ConcurrencyConflictError,
  MARKER_TYPE,
  PoisonMessageError,
  processDelivery,
  TransientStoreError,
} from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';
import { z } from 'zod';

import { MAX_BATCH_BYTES, MAX_BODY_DEPTH } from '../src/process';
import { delivery, dependencies, documentsIn, testConsumer, TestMessage } from '../src/testing';

const stack = useLocalStack();

let accounts = 0;
const nextAccount = (): string => `acct-${++accounts}`;

async function poisonReason(work: Promise<unknown>): Promise<string> {
  try {
    await work;
    return 'no error';
  } catch (error) {
    return error instanceof PoisonMessageError
      ? error.reason
      : `${(error as Error).name}: ${(error as Error).message}`;
  }
}

describe('processDelivery: the marker and the effect commit together', () => {
  it('writes the marker first, in the message partition, with its fields', async () => {
    const account = nextAccount();
    const consumer = testConsumer((message, tx) => tx.create({ id: 'balance', amount: message.amount }));
    const enqueued = new Date('2026-11-01T10:00:00Z');
    const now = new Date('2026-11-02T00:00:00Z');

    const result = await processDelivery(
      consumer,
      delivery(
        { accountId: account, amount: 5 },
        { messageId: 'id/with?odd#chars\\', deliveryCount: 3, enqueuedTimeUtc: enqueued },
      ),
      dependencies(stack.container, { now: () => now }),
    );
    const documents = await documentsIn(stack.container, `account:${account}`);
    const marker = documents.find((doc) => doc.type === MARKER_TYPE);

    // Delivery 3: the marker is read first (a redelivery is most likely a duplicate), then the batch.
    expect(result).toMatchObject({ outcome: 'processed', requests: 2, attempts: 1 });
    // What the batch wrote besides the marker.
    expect(result.wrote).toEqual({
      partitionKey: `account:${account}`,
      documents: [{ kind: 'create', id: 'balance' }],
    });
    expect(documents.find((doc) => doc.id === 'balance')).toMatchObject({
      amount: 5,
      partitionKey: `account:${account}`,
    });
    expect(marker).toMatchObject({
      consumer: 'test.consumer',
      messageId: 'id/with?odd#chars\\',
      partitionKey: `account:${account}`,
      deliveryCount: 3,
      enqueuedTimeUtc: enqueued.toISOString(),
      processedAt: now.toISOString(),
      processedAtEpochSeconds: now.getTime() / 1000,
      expiresAtEpochSeconds: now.getTime() / 1000 + 30 * 86_400,
      ttl: 37 * 86_400,
      payloadHash: expect.stringMatching(/^sha256:/) as unknown,
    });
    expect(marker?.id).toMatch(/^inbox-[A-Za-z0-9_-]{43}$/);
  });

  it('writes no ttl when the backstop is off', async () => {
    const account = nextAccount();
    const consumer = testConsumer((message, tx) => tx.create({ id: 'balance', amount: message.amount }));
    const deps = dependencies(stack.container);

    await processDelivery(consumer, delivery({ accountId: account, amount: 1 }), {
      ...deps,
      settings: { inbox: { ...deps.settings.inbox, ttlBackstopSeconds: undefined } },
    });
    const marker = (await documentsIn(stack.container, `account:${account}`)).find(
      (doc) => doc.type === MARKER_TYPE,
    );

    expect(marker).toBeDefined();
    expect(marker?.ttl).toBeUndefined();
  });

  it('keeps separate markers per consumer: one message feeds two consumers, each applies it once', async () => {
    const account = nextAccount();
    const credit = testConsumer((message, tx) => tx.create({ id: 'credit', amount: message.amount }), {
      name: 'test.credit',
    });
    const audit = testConsumer((message, tx) => tx.create({ id: 'audit', amount: message.amount }), {
      name: 'test.audit',
    });
    const message = delivery({ accountId: account, amount: 3 });
    const deps = dependencies(stack.container);

    const outcomes = [
      (await processDelivery(credit, message, deps)).outcome,
      (await processDelivery(audit, message, deps)).outcome,
      (await processDelivery(credit, message, deps)).outcome,
      (await processDelivery(audit, message, deps)).outcome,
    ];
    const documents = await documentsIn(stack.container, `account:${account}`);

    expect(outcomes).toEqual(['processed', 'processed', 'duplicate', 'duplicate']);
    expect(
      documents
        .filter((doc) => doc.type === MARKER_TYPE)
        .map((doc) => doc.consumer)
        .sort(),
    ).toEqual(['test.audit', 'test.credit']);
  });

  it('reports a payload mismatch for the same MessageId with another body, and writes nothing', async () => {
    const account = nextAccount();
    const consumer = testConsumer((message, tx) =>
      tx.patch('total', [{ op: 'incr', path: '/amount', value: message.amount }]),
    );
    await stack.container.items.create({ id: 'total', partitionKey: `account:${account}`, amount: 0 });
    const deps = dependencies(stack.container);

    const first = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 10 }, { messageId: 'same' }),
      deps,
    );
    const reordered = await processDelivery(
      consumer,
      delivery({ amount: 10, accountId: account }, { messageId: 'same' }),
      deps,
    );
    const changed = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 99 }, { messageId: 'same' }),
      deps,
    );
    const total = (await stack.container.item('total', `account:${account}`).read<{ amount: number }>())
      .resource;

    expect([first.outcome, reordered.outcome, changed.outcome]).toEqual([
      'processed',
      'duplicate',
      'payload_mismatch',
    ]);
    expect(total?.amount).toBe(10);
  });

  it('settles a redelivery in one request, and checks the payload of a new message reusing the id', async () => {
    const account = nextAccount();
    const consumer = testConsumer((message, tx) => tx.create({ id: 'effect', amount: message.amount }));
    const deps = dependencies(stack.container);
    const message = { accountId: account, amount: 1 };

    const first = await processDelivery(consumer, delivery(message, { messageId: 'r' }), deps);
    const redelivery = await processDelivery(
      consumer,
      delivery(message, { messageId: 'r', deliveryCount: 2 }),
      deps,
    );
    const resent = await processDelivery(
      consumer,
      delivery(message, { messageId: 'r', deliveryCount: 1 }),
      deps,
    );

    expect([first.outcome, first.requests]).toEqual(['processed', 1]);
    expect([redelivery.outcome, redelivery.requests]).toEqual(['duplicate', 1]);
    expect([resent.outcome, resent.requests]).toEqual(['duplicate', 2]);
  });

  it('keys a lossy numeric MessageId by MessageId and payload: colliding messages both apply, redeliveries do not', async () => {
    const account = nextAccount();
    const consumer = testConsumer((message, tx) =>
      tx.patch('total', [{ op: 'incr', path: '/amount', value: message.amount }]),
    );
    await stack.container.items.create({ id: 'total', partitionKey: `account:${account}`, amount: 0 });
    const deps = dependencies(stack.container);
    // "9007199254740993" and "9007199254740992" both reach the function as the number 9007199254740992.
    const lossy = { messageId: '9007199254740992', messageIdIsLossy: true };

    const outcomes = [
      (await processDelivery(consumer, delivery({ accountId: account, amount: 1 }, lossy), deps)).outcome,
      (await processDelivery(consumer, delivery({ accountId: account, amount: 2 }, lossy), deps)).outcome,
      (
        await processDelivery(
          consumer,
          delivery({ accountId: account, amount: 1 }, { ...lossy, deliveryCount: 2 }),
          deps,
        )
      ).outcome,
    ];
    const total = (await stack.container.item('total', `account:${account}`).read<{ amount: number }>())
      .resource;

    expect(outcomes).toEqual(['processed', 'processed', 'duplicate']);
    expect(total?.amount).toBe(3);
  });
});

describe('processDelivery: poison messages write nothing', () => {
  const writes = testConsumer((message, tx) => tx.create({ id: 'effect', amount: message.amount }));

  it.each([
    ['a body that is not JSON', 'body-not-json', delivery('definitely { not json')],
    ['bytes that are not JSON', 'body-not-json', delivery(Buffer.from([0xff, 0xfe, 0x00]))],
    [
      'a body that fails the schema',
      'schema-violation',
      delivery({ accountId: 'acct-poison', amount: 'ten' }),
    ],
    [
      'no MessageId',
      'missing-message-id',
      delivery({ accountId: 'acct-poison', amount: 1 }, { messageId: undefined }),
    ],
  ])('%s → %s', async (_name, reason, poison) => {
    expect(await poisonReason(processDelivery(writes, poison, dependencies(stack.container)))).toBe(reason);
    expect(await documentsIn(stack.container, 'account:acct-poison')).toEqual([]);
  });

  it('no partition key → no-partition-key', async () => {
    const consumer = testConsumer((message, tx) => tx.create({ id: 'x', amount: message.amount }), {
      partitionKey: () => '',
    });
    const throwing = testConsumer((message, tx) => tx.create({ id: 'x', amount: message.amount }), {
      partitionKey: () => {
        throw new Error('no tenant');
      },
    });

    expect(
      await poisonReason(
        processDelivery(consumer, delivery({ accountId: 'a', amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('no-partition-key');
    expect(
      await poisonReason(
        processDelivery(throwing, delivery({ accountId: 'a', amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('no-partition-key');
  });

  it('echoes untrusted values bounded: a 1 MB partition key, id or error makes a short message', async () => {
    const huge = 'k'.repeat(1_000_000);
    const cases = [
      testConsumer((message, tx) => tx.create({ id: 'x', amount: message.amount }), {
        partitionKey: () => `${huge}-too-long-for-cosmos`,
      }),
      testConsumer((message, tx) => tx.create({ id: 'x', amount: message.amount }), {
        partitionKey: () => {
          throw new Error(huge);
        },
      }),
      testConsumer(() => undefined, { schema: z.object({ [huge]: z.string() }) as never }),
    ];

    for (const consumer of cases) {
      const error = await processDelivery(
        consumer,
        delivery({ accountId: 'a', amount: 1 }, { messageId: huge }),
        dependencies(stack.container),
      ).catch((caught: unknown) => caught as Error);

      expect(error).toBeInstanceOf(PoisonMessageError);
      expect((error as Error).message.length).toBeLessThan(400);
      expect((error as Error).message).toContain('…(');
    }
  });

  it('a body one level deeper than MAX_BODY_DEPTH → too-deep; one at the limit is processed', async () => {
    const consumer = testConsumer((message, tx) => tx.create({ id: 'x', amount: message.amount }));
    const nested = (levels: number): unknown => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`);
    const body = (levels: number) => ({ accountId: nextAccount(), amount: 1, extra: nested(levels) });

    // The body object is the first level.
    expect(
      await poisonReason(
        processDelivery(consumer, delivery(body(MAX_BODY_DEPTH)), dependencies(stack.container)),
      ),
    ).toBe('too-deep');
    expect(
      (await processDelivery(consumer, delivery(body(MAX_BODY_DEPTH - 1)), dependencies(stack.container)))
        .outcome,
    ).toBe('processed');
  });

  it('an error thrown while reading the message (deterministic, no I/O) → unprocessable, not transient', async () => {
    const schema = TestMessage.transform((): TestMessage => {
      throw new RangeError('Maximum call stack size exceeded');
    });
    const consumer = testConsumer(() => undefined, { schema });

    expect(
      await poisonReason(
        processDelivery(consumer, delivery({ accountId: 'a', amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('unprocessable');
  });

  it('more staged writes than one batch allows → too-many-operations', async () => {
    const account = nextAccount();
    const consumer = testConsumer((_message, tx) => {
      for (let i = 0; i < 100; i++) tx.create({ id: `line-${i}` });
    });

    const error = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    ).catch((caught: unknown) => caught as PoisonMessageError);

    expect(error).toMatchObject({ reason: 'too-many-operations' });
    expect((error as Error).message).toBe(
      'The handler staged 100 writes and publishes; with the marker that exceeds the 100 operations of one transactional batch.',
    );
    expect(await documentsIn(stack.container, `account:${account}`)).toEqual([]);
  });

  it('99 staged writes (100 with the marker) still fit', async () => {
    const account = nextAccount();
    const consumer = testConsumer((_message, tx) => {
      for (let i = 0; i < 99; i++) tx.create({ id: `line-${i}` });
    });

    const result = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    );

    expect(result.outcome).toBe('processed');
    expect(await documentsIn(stack.container, `account:${account}`)).toHaveLength(100);
  });

  it('a batch over 2 MB → batch-too-large', async () => {
    const account = nextAccount();
    const blob = 'x'.repeat(800 * 1024);
    const consumer = testConsumer((_message, tx) => {
      for (let i = 0; i < 3; i++) tx.create({ id: `blob-${i}`, blob });
    });

    expect(
      await poisonReason(
        processDelivery(consumer, delivery({ accountId: account, amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('batch-too-large');
    expect(await documentsIn(stack.container, `account:${account}`)).toEqual([]);
  });

  it('takes staged writes of exactly 2 MiB as JSON past its own check, and refuses one byte more', async () => {
    const account = nextAccount();
    const now = new Date('2026-12-01T00:00:00Z');
    const deliverBlob = (length: number): Promise<Error | undefined> =>
      processDelivery(
        testConsumer((_message, tx) => tx.create({ id: 'blob', blob: 'x'.repeat(length) })),
        delivery({ accountId: account, amount: 1 }, { messageId: 'exact' }),
        dependencies(stack.container, { now: () => now }),
      ).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
    // The check reports the exact bytes: size the blob so that the operations are 2 MiB exactly.
    const over = await deliverBlob(2_200_000);
    const bytes = Number(/The staged writes take (\d+) bytes/.exec(over?.message ?? '')?.[1]);
    const exact = 2_200_000 - (bytes - MAX_BATCH_BYTES);

    const atTheLimit = await deliverBlob(exact);
    const oneMore = await deliverBlob(exact + 1);

    expect(bytes).toBeGreaterThan(MAX_BATCH_BYTES);
    // Past the library's check, the store may still refuse the request (its body is not the same JSON).
    expect(atTheLimit?.message ?? 'committed').not.toMatch(/^The staged writes take/);
    expect(oneMore?.message).toBe(
      `The staged writes take ${MAX_BATCH_BYTES + 1} bytes; one transactional batch carries at most ${MAX_BATCH_BYTES}.`,
    );
  });

  it('1.6 MB of staged writes (the quick bound says maybe too large, the exact count says no) still fit', async () => {
    const account = nextAccount();
    const blob = 'x'.repeat(800 * 1024);
    const consumer = testConsumer((_message, tx) => {
      for (let i = 0; i < 2; i++) tx.create({ id: `blob-${i}`, blob });
    });

    const result = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    );

    expect(result.outcome).toBe('processed');
    expect(await documentsIn(stack.container, `account:${account}`)).toHaveLength(3);
  });

  it('a write Cosmos DB rejects outright (400) → rejected-by-store, nothing written', async () => {
    const account = nextAccount();
    await stack.container.items.create({ id: 'doc', partitionKey: `account:${account}` });
    const consumer = testConsumer((_message, tx) =>
      tx.patch('doc', [{ op: 'set', path: '/missing/parent', value: 1 }]),
    );

    expect(
      await poisonReason(
        processDelivery(consumer, delivery({ accountId: account, amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('rejected-by-store');
    expect((await documentsIn(stack.container, `account:${account}`)).map((doc) => doc.id)).toEqual(['doc']);
  });

  it('a handler may reject a message itself', async () => {
    const consumer = testConsumer(() => {
      throw new PoisonMessageError('rejected-by-handler', 'accounts in this region are closed');
    });

    expect(
      await poisonReason(
        processDelivery(consumer, delivery({ accountId: 'a', amount: 1 }), dependencies(stack.container)),
      ),
    ).toBe('rejected-by-handler');
  });
});

describe('processDelivery: conflicts and failures', () => {
  it('re-runs the handler with fresh reads after an ETag conflict, and counts the retry', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    await stack.container.items.create({ id: 'doc', partitionKey, value: 0 });
    let runs = 0;
    const etagRetries: string[] = [];
    const consumer = testConsumer(async (message, tx) => {
      runs++;
      const current = await tx.read<{ id: string; value: number }>('doc');
      if (runs === 1) {
        // Another writer slips in between this read and the commit.
        await stack.container.items.upsert({ id: 'doc', partitionKey, value: 100 });
      }
      tx.replace(
        { ...current!.document, value: current!.document.value + message.amount },
        { ifMatch: current!.etag },
      );
    });

    const result = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 5 }),
      dependencies(stack.container, { onEtagRetry: (name) => etagRetries.push(name) }),
    );
    const doc = (await stack.container.item('doc', partitionKey).read<{ value: number }>()).resource;

    expect(result).toMatchObject({ outcome: 'processed', attempts: 2 });
    expect(doc?.value).toBe(105);
    expect(etagRetries).toEqual(['test.consumer']);
  });

  it('gives up after maxAttempts conflicts, writes nothing, and throws ConcurrencyConflictError', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    await stack.container.items.create({ id: 'doc', partitionKey, value: 0 });
    let runs = 0;
    const consumer = testConsumer(async (_message, tx) => {
      runs++;
      const current = await tx.read<{ id: string; value: number }>('doc');
      await stack.container.items.upsert({ id: 'doc', partitionKey, value: -runs });
      tx.replace({ ...current!.document, value: 999 }, { ifMatch: current!.etag });
    });

    const error = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    ).catch((caught: unknown) => caught);
    const documents = await documentsIn(stack.container, partitionKey);

    expect(error).toBeInstanceOf(ConcurrencyConflictError);
    expect(runs).toBe(5);
    expect(documents.filter((doc) => doc.type === MARKER_TYPE)).toEqual([]);
    expect(documents.find((doc) => doc.id === 'doc')?.value).toBe(-5);
  });

  it('throws TransientStoreError when Cosmos DB throttles past the SDK retries or is unavailable; nothing written', async () => {
    const account = nextAccount();
    const consumer = testConsumer((message, tx) => tx.create({ id: 'effect', amount: message.amount }));
    const deps = dependencies(stack.container);

    stack.server.faults.inject({ kind: 'throttle', on: 'batch', times: 10, retryAfterMs: 1 });
    const throttled = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 1 }),
      deps,
    ).catch((e: unknown) => e);
    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });
    const unavailable = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 1 }),
      deps,
    ).catch((e: unknown) => e);

    expect(throttled).toBeInstanceOf(TransientStoreError);
    expect((throttled as TransientStoreError).statusCode).toBe(429);
    expect(unavailable).toBeInstanceOf(TransientStoreError);
    expect((unavailable as TransientStoreError).statusCode).toBe(503);
    expect(await documentsIn(stack.container, `account:${account}`)).toEqual([]);
  });
});
