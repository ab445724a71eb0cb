import type { Container } from '@azure/cosmos';
import {
  defineInboxConsumer,
  type InboxConsumer,
  PoisonMessageError,
  SettingsError,
} from '@idempotent-consumers/inbox';
import {
  EVENT_KEY_TYPE,
  eventKeyId,
  MARKER_TYPE,
  markerId,
  MAX_EVENT_KEY_BYTES,
  processDelivery,
  type ProcessDependencies,
  type ProcessResult,
  runPurge,
  SUSPECTED_PRODUCER_DUPLICATE,
  TransientStoreError,
} from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';
import { z } from 'zod';

import { delivery, dependencies, documentsIn, ending } from '../src/testing';

/**
 * The opt-in event key (a consumer's `eventKey`): a producer that sends one event again under a
 * fresh MessageId is caught by a second document in the marker's batch, keyed on the business key
 * the consumer declares. Each case through processDelivery, the real SDK and the local Cosmos DB
 * server, asserting what was written and what the delivery ended in.
 */
const stack = useLocalStack();

const Payment = z.object({ accountId: z.string(), paymentId: z.string(), amount: z.number() });
type Payment = z.infer<typeof Payment>;

let accounts = 0;
const nextAccount = (): string => `event-key-${++accounts}`;

/** A consumer that records each message it applies as its own document: a duplicate effect is a second one. */
function paymentConsumer(
  eventKey: InboxConsumer<Payment>['eventKey'],
  handle: InboxConsumer<Payment>['handle'] = (payment, tx, { messageId }) =>
    tx.create({ id: `applied-${messageId}`, type: 'applied', paymentId: payment.paymentId }),
): InboxConsumer<Payment> {
  return defineInboxConsumer({
    name: 'test.payments',
    schema: Payment,
    partitionKey: (payment) => `account:${payment.accountId}`,
    handle,
    ...(eventKey === undefined ? {} : { eventKey }),
  });
}

const absorbing = paymentConsumer({ of: (payment) => payment.paymentId, onConflict: 'absorb' });
const flagging = paymentConsumer({ of: (payment) => payment.paymentId, onConflict: 'flag' });

function send(
  consumer: InboxConsumer<Payment>,
  body: Payment,
  messageId: string,
  deps: ProcessDependencies = dependencies(stack.container),
  deliveryCount = 1,
): Promise<ProcessResult> {
  return processDelivery(consumer, delivery(body, { messageId, deliveryCount }), deps);
}

async function stored(account: string): Promise<{ applied: string[]; markers: number; keys: number }> {
  const documents = await documentsIn(stack.container, `account:${account}`);
  return {
    applied: documents
      .filter((doc) => doc.type === 'applied')
      .map((doc) => String(doc.id))
      .sort(),
    markers: documents.filter((doc) => doc.type === MARKER_TYPE).length,
    keys: documents.filter((doc) => doc.type === EVENT_KEY_TYPE).length,
  };
}

/** The container, with `work` run right after each transactional batch is answered. */
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

describe('a producer that re-mints the MessageId of an event', () => {
  it('absorb: the copy is a duplicate with the cause suspected_producer_duplicate, and writes nothing', async () => {
    const account = nextAccount();
    const body = { accountId: account, paymentId: 'pay-1', amount: 25 };
    const first = await send(absorbing, body, 'minted-1');
    const copy = await send(absorbing, body, 'minted-2');

    expect(first).toMatchObject({ outcome: 'processed' });
    expect(first).not.toHaveProperty('duplicateCause');
    expect(first.suspectedProducerDuplicate).toBeUndefined();
    expect(copy).toMatchObject({
      outcome: 'duplicate',
      duplicateCause: SUSPECTED_PRODUCER_DUPLICATE,
      suspectedProducerDuplicate: {
        handling: 'absorbed',
        firstMessageId: 'minted-1',
        eventKey: { characters: 5, sha256: expect.stringMatching(/^[0-9a-f]{16}$/) as unknown },
      },
      attempts: 1,
      // the batch, then one read of the event key document
      requests: 2,
    });
    expect(copy.markerWrittenAt).toBeInstanceOf(Date);
    expect(copy.wrote).toBeUndefined();
    // One effect, one marker (the copy's batch rolled back), one event key.
    expect(await stored(account)).toEqual({ applied: ['applied-minted-1'], markers: 1, keys: 1 });
    expect(SUSPECTED_PRODUCER_DUPLICATE).toBe('suspected_producer_duplicate');
  });

  it('absorb: a redelivery of the absorbed copy is absorbed again, still writing nothing', async () => {
    const account = nextAccount();
    const body = { accountId: account, paymentId: 'pay-1', amount: 25 };
    await send(absorbing, body, 'redelivered-1');
    await send(absorbing, body, 'redelivered-2');
    const again = await send(absorbing, body, 'redelivered-2', dependencies(stack.container), 3);

    expect(again).toMatchObject({
      outcome: 'duplicate',
      duplicateCause: SUSPECTED_PRODUCER_DUPLICATE,
      suspectedProducerDuplicate: { handling: 'absorbed', firstMessageId: 'redelivered-1' },
    });
    expect(await stored(account)).toEqual({ applied: ['applied-redelivered-1'], markers: 1, keys: 1 });
  });

  it('flag: the copy is applied, with its own marker, and carries the cause suspected_producer_duplicate', async () => {
    const account = nextAccount();
    const body = { accountId: account, paymentId: 'pay-1', amount: 25 };
    await send(flagging, body, 'flagged-1');
    const copy = await send(flagging, body, 'flagged-2');

    expect(copy).toMatchObject({
      outcome: 'processed',
      duplicateCause: SUSPECTED_PRODUCER_DUPLICATE,
      suspectedProducerDuplicate: { handling: 'flagged', firstMessageId: 'flagged-1' },
      // the batch that met the key, the read of the key, the batch without it
      attempts: 2,
      requests: 3,
      wrote: { documents: [{ kind: 'create', id: 'applied-flagged-2' }] },
    });
    expect(await stored(account)).toEqual({
      applied: ['applied-flagged-1', 'applied-flagged-2'],
      markers: 2,
      keys: 1,
    });
    // The event key stays the first message's.
    const key = await stack.container
      .item(eventKeyId('test.payments', 'pay-1'), `account:${account}`)
      .read<Record<string, unknown>>();
    expect(key.resource).toMatchObject({
      messageId: 'flagged-1',
      markerId: markerId('test.payments', 'flagged-1'),
    });
    // Its redelivery meets its own marker: an ordinary duplicate.
    const redelivered = await send(flagging, body, 'flagged-2', dependencies(stack.container), 2);
    expect(redelivered).toMatchObject({ outcome: 'duplicate', duplicateCause: 'redelivery' });
  });

  it('flag: the run without the event key is not counted against INBOX_MAX_ATTEMPTS', async () => {
    const account = nextAccount();
    const body = { accountId: account, paymentId: 'pay-1', amount: 25 };
    const deps = dependencies(stack.container);
    const once = { ...deps, settings: { inbox: { ...deps.settings.inbox, maxAttempts: 1 } } };
    await send(flagging, body, 'one-attempt-1', once);

    expect(await ending(send(flagging, body, 'one-attempt-2', once))).toBe('processed');
    expect((await stored(account)).applied).toHaveLength(2);
  });

  it('flag: the alternative of a copy is applied too, with the cause', async () => {
    const account = nextAccount();
    const withAlternative = paymentConsumer(
      { of: (payment) => payment.paymentId, onConflict: 'flag' },
      (payment, tx, { messageId }) => {
        tx.create({ id: `applied-${messageId}`, type: 'applied', paymentId: payment.paymentId });
        tx.recordAlternative('held');
      },
    );
    const body = { accountId: account, paymentId: 'pay-1', amount: 25 };
    await send(withAlternative, body, 'alternative-1');

    expect(await send(withAlternative, body, 'alternative-2')).toMatchObject({
      outcome: 'alternative',
      alternative: 'held',
      duplicateCause: SUSPECTED_PRODUCER_DUPLICATE,
    });
  });

  it('distinct events with equal bodies but their own keys are each applied, none suspected', async () => {
    const account = nextAccount();
    const keyed = paymentConsumer({ of: (payment) => `${payment.paymentId}`, onConflict: 'absorb' });
    const results = [];
    for (const paymentId of ['pay-1', 'pay-2', 'pay-3']) {
      results.push(await send(keyed, { accountId: account, paymentId, amount: 25 }, `distinct-${paymentId}`));
    }

    expect(results.map((result) => [result.outcome, result.duplicateCause])).toEqual([
      ['processed', undefined],
      ['processed', undefined],
      ['processed', undefined],
    ]);
    expect(await stored(account)).toMatchObject({ markers: 3, keys: 3 });
  });

  it('the same MessageId again is an ordinary duplicate (the marker meets it first), not a suspected one', async () => {
    const account = nextAccount();
    const body = { accountId: account, paymentId: 'pay-1', amount: 25 };
    await send(absorbing, body, 'same-1');
    const again = await send(absorbing, body, 'same-1');

    expect(again).toMatchObject({ outcome: 'duplicate', duplicateCause: 'unknown' });
    expect(again.suspectedProducerDuplicate).toBeUndefined();
    expect(await stored(account)).toEqual({ applied: ['applied-same-1'], markers: 1, keys: 1 });
  });
});

describe('the event key document', () => {
  it('is keyed on the consumer and the key, hashed: 55 legal characters, and the raw key is not stored', async () => {
    const account = nextAccount();
    // The longest key accepted, of characters Cosmos DB refuses in an id.
    const key = '/\\?#'.repeat(MAX_EVENT_KEY_BYTES / 4);
    const consumer = paymentConsumer({ of: () => key, onConflict: 'absorb' });
    await send(consumer, { accountId: account, paymentId: 'pay-1', amount: 1 }, 'long-key-1');

    const [document] = (await documentsIn(stack.container, `account:${account}`)).filter(
      (doc) => doc.type === EVENT_KEY_TYPE,
    );
    expect(document?.id).toBe(eventKeyId('test.payments', key));
    expect(document?.id).toMatch(/^inbox-event-[A-Za-z0-9_-]{43}$/);
    expect(JSON.stringify(document)).not.toContain('/\\\\?#');
    expect(document).toMatchObject({
      consumer: 'test.payments',
      messageId: 'long-key-1',
      markerId: markerId('test.payments', 'long-key-1'),
      keyHash: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) as unknown,
    });
    // Another consumer's key of the same text is another document.
    expect(eventKeyId('test.other', key)).not.toBe(eventKeyId('test.payments', key));
    expect(eventKeyId('ab', 'c')).not.toBe(eventKeyId('a', 'bc'));
  });

  it('expires after the option retention (default: the marker’s), with the TTL backstop on top', async () => {
    const account = nextAccount();
    const now = new Date('2026-12-01T00:00:00Z');
    const seconds = now.getTime() / 1000;
    const deps = dependencies(stack.container, { now: () => now });
    const week = paymentConsumer({
      of: (payment) => payment.paymentId,
      onConflict: 'absorb',
      retention: 'P7D',
    });
    await send(week, { accountId: account, paymentId: 'pay-week', amount: 1 }, 'retention-1', deps);
    await send(absorbing, { accountId: account, paymentId: 'pay-default', amount: 1 }, 'retention-2', deps);
    const noBackstop = {
      ...deps,
      settings: { inbox: { ...deps.settings.inbox, ttlBackstopSeconds: undefined } },
    };
    await send(
      absorbing,
      { accountId: account, paymentId: 'pay-no-ttl', amount: 1 },
      'retention-3',
      noBackstop,
    );

    const keys: Record<string, Record<string, unknown>> = Object.fromEntries(
      (await documentsIn(stack.container, `account:${account}`))
        .filter((doc) => doc.type === EVENT_KEY_TYPE)
        .map((doc) => [String(doc.messageId), doc]),
    );
    expect(keys['retention-1']).toMatchObject({
      processedAt: now.toISOString(),
      processedAtEpochSeconds: seconds,
      expiresAtEpochSeconds: seconds + 7 * 86_400,
      ttl: 14 * 86_400,
    });
    expect(keys['retention-2']).toMatchObject({
      expiresAtEpochSeconds: seconds + 30 * 86_400,
      ttl: 37 * 86_400,
    });
    expect(keys['retention-3']).not.toHaveProperty('ttl');
  });

  it('is purged once expired, with the markers, and only then may the event apply again', async () => {
    const account = nextAccount();
    const day = 86_400_000;
    const start = new Date('2026-12-01T00:00:00Z');
    const at = (days: number): ProcessDependencies =>
      dependencies(stack.container, { now: () => new Date(start.getTime() + days * day) });
    // The key outlives the marker (30 days) by 30 days.
    const longer = paymentConsumer({
      of: (payment) => payment.paymentId,
      onConflict: 'absorb',
      retention: 'P60D',
    });
    const body = { accountId: account, paymentId: 'pay-purged', amount: 1 };
    await send(longer, body, 'purged-1', at(0));

    const purge = (days: number): ReturnType<typeof runPurge> =>
      runPurge(stack.container, {
        now: new Date(start.getTime() + days * day),
        maxItems: 1000,
        maxDurationMs: 60_000,
      });
    const day31 = await purge(31);
    expect(await stored(account)).toMatchObject({ markers: 0, keys: 1 });
    expect(day31).toMatchObject({ expiredRemaining: 0 });

    // The marker is gone, the key is not: the same message again is an ordinary duplicate.
    const resent = await send(longer, body, 'purged-1', at(32));
    // Dated by the key document (no duplicate window is configured here, so the cause is unknown).
    expect(resent).toMatchObject({ outcome: 'duplicate', duplicateCause: 'unknown', markerWrittenAt: start });
    expect(resent.suspectedProducerDuplicate).toBeUndefined();
    expect(await stored(account)).toEqual({ applied: ['applied-purged-1'], markers: 0, keys: 1 });

    // A copy under a new id is still caught; after day 60 the key is purged too.
    expect(await send(longer, body, 'purged-2', at(33))).toMatchObject({
      duplicateCause: SUSPECTED_PRODUCER_DUPLICATE,
    });
    const day61 = await purge(61);
    expect(await stored(account)).toMatchObject({ markers: 0, keys: 0 });
    expect(day61.purged).toBeGreaterThanOrEqual(1);
    expect(await send(longer, body, 'purged-3', at(62))).toMatchObject({ outcome: 'processed' });
  });

  it('counts an expired key the purge has not reached as remaining, and not as a marker', async () => {
    const account = nextAccount();
    // Years before the other tests' documents, so that only this test's two have expired by `later`.
    const start = new Date('2020-01-01T00:00:00Z');
    await send(
      absorbing,
      { accountId: account, paymentId: 'pay-count', amount: 1 },
      'count-1',
      dependencies(stack.container, { now: () => start }),
    );
    const later = new Date(start.getTime() + 31 * 86_400_000);

    const capped = await runPurge(stack.container, { now: later, maxItems: 0, maxDurationMs: 60_000 });
    expect(capped).toMatchObject({ purged: 0, expiredRemaining: 2 });
    const done = await runPurge(stack.container, { now: later, maxItems: 1000, maxDurationMs: 60_000 });
    expect(done).toMatchObject({ purged: 2, expiredRemaining: 0 });
    expect(done.markers).toBe(capped.markers - 1);
    expect(await stored(account)).toMatchObject({ markers: 0, keys: 0 });
  });

  it('purged between the batch and its read: the message runs again as new and applies', async () => {
    const account = nextAccount();
    const body = { accountId: account, paymentId: 'pay-1', amount: 25 };
    await send(absorbing, body, 'vanishing-1');
    await stack.container.item(markerId('test.payments', 'vanishing-1'), `account:${account}`).delete();
    let deleted = false;
    const container = afterEachBatch(stack.container, async () => {
      if (deleted) return;
      deleted = true;
      await stack.container.item(eventKeyId('test.payments', 'pay-1'), `account:${account}`).delete();
    });

    const result = await send(absorbing, body, 'vanishing-2', dependencies(container));
    expect(result).toMatchObject({ outcome: 'processed', attempts: 2 });
    expect(result.duplicateCause).toBeUndefined();
    expect((await stored(account)).applied).toEqual(['applied-vanishing-1', 'applied-vanishing-2']);
  });

  it('refused with anything but 409: a transient store error, nothing written', async () => {
    const account = nextAccount();
    stack.server.faults.inject({ kind: 'status', status: 503, on: 'batch', operation: 1, times: 1 });

    const result = send(absorbing, { accountId: account, paymentId: 'pay-1', amount: 1 }, 'refused-1');
    await expect(result).rejects.toBeInstanceOf(TransientStoreError);
    await expect(result).rejects.toThrow('Cosmos DB refused the event key document with 503.');
    expect(await stored(account)).toEqual({ applied: [], markers: 0, keys: 0 });
  });

  it('cannot be written by a handler', async () => {
    const account = nextAccount();
    const forging = paymentConsumer(undefined, (payment, tx) =>
      tx.create({ id: 'forged', type: EVENT_KEY_TYPE, paymentId: payment.paymentId }),
    );

    expect(
      await ending(send(forging, { accountId: account, paymentId: 'pay-1', amount: 1 }, 'forged-1')),
    ).toBe('poison reserved-document');
    expect(EVENT_KEY_TYPE).toBe('inbox-event-key');
  });
});

describe('the batch with an event key', () => {
  it('still tells the handler which staged write failed (a condition, then the alternative)', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    await stack.container.items.create({ id: 'limit', partitionKey, left: 0 });
    const reserving = paymentConsumer(
      { of: (payment) => payment.paymentId, onConflict: 'absorb' },
      (payment, tx) => {
        if (tx.failed('reserve', 412)) {
          tx.create({ id: `refused-${payment.paymentId}`, type: 'refused' });
          tx.recordAlternative('refused');
          return;
        }
        tx.create({ id: `note-${payment.paymentId}`, type: 'note' });
        tx.patch('limit', [{ op: 'incr', path: '/left', value: -1 }], {
          name: 'reserve',
          condition: 'from c where c.left > 0',
        });
      },
    );

    expect(
      await send(reserving, { accountId: account, paymentId: 'pay-1', amount: 1 }, 'condition-1'),
    ).toMatchObject({
      outcome: 'alternative',
      attempts: 2,
    });
  });

  it('re-reads after an ETag conflict on a staged write (the write found past the event key)', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    await stack.container.items.create({ id: 'counter', partitionKey, value: 0 });
    let runs = 0;
    const retries: string[] = [];
    const racing = paymentConsumer(
      { of: (payment) => payment.paymentId, onConflict: 'absorb' },
      async (_payment, tx) => {
        const read = await tx.read<{ id: string; value: number }>('counter');
        if (runs++ === 0)
          await stack.container
            .item('counter', partitionKey)
            .replace({ id: 'counter', partitionKey, value: 10 });
        tx.replace({ id: 'counter', value: (read?.document.value ?? 0) + 1 }, { ifMatch: read?.etag ?? '' });
      },
    );

    const result = await send(
      racing,
      { accountId: account, paymentId: 'pay-1', amount: 1 },
      'etag-1',
      dependencies(stack.container, { onEtagRetry: (name) => retries.push(name) }),
    );
    expect(result).toMatchObject({ outcome: 'processed', attempts: 2 });
    expect(retries).toEqual(['test.payments']);
    expect(
      (await stack.container.item('counter', partitionKey).read<{ value: number }>()).resource?.value,
    ).toBe(11);
  });

  it('holds 98 staged writes at most: the marker and the event key take two of the 100 operations', async () => {
    const account = nextAccount();
    const staging = (count: number): InboxConsumer<Payment> =>
      paymentConsumer({ of: (payment) => payment.paymentId, onConflict: 'absorb' }, (_payment, tx) => {
        for (let i = 0; i < count; i++) tx.create({ id: `w-${i}`, type: 'w' });
      });

    const error = await send(
      staging(99),
      { accountId: account, paymentId: 'pay-99', amount: 1 },
      'ops-99',
    ).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PoisonMessageError);
    expect(error).toMatchObject({ reason: 'too-many-operations' });
    expect((error as Error).message).toContain(
      'staged 99 writes and publishes; with the marker and the event key that exceeds',
    );
    expect(
      await ending(send(staging(98), { accountId: account, paymentId: 'pay-98', amount: 1 }, 'ops-98')),
    ).toBe('processed');
    // Without an event key the marker alone is counted.
    const plain = paymentConsumer(undefined, (_payment, tx) => {
      for (let i = 0; i < 100; i++) tx.create({ id: `w-${i}`, type: 'w' });
    });
    await expect(
      send(plain, { accountId: account, paymentId: 'pay-100', amount: 1 }, 'ops-100'),
    ).rejects.toThrow('staged 100 writes and publishes; with the marker that exceeds');
  });
});

describe('what an event key costs', () => {
  // packages/inbox/README.md quotes these figures: the local Cosmos DB server charges as Azure's model does.
  it('one more write in the batch per message; an absorbed copy costs its batch and one read', async () => {
    const account = nextAccount();
    const plain = paymentConsumer(undefined);
    const without = await send(plain, { accountId: account, paymentId: 'pay-1', amount: 1 }, 'cost-plain');
    const withKey = await send(
      absorbing,
      { accountId: account, paymentId: 'pay-2', amount: 1 },
      'cost-keyed',
    );
    const copy = await send(absorbing, { accountId: account, paymentId: 'pay-2', amount: 1 }, 'cost-copy');
    const flagged = await send(
      flagging,
      { accountId: account, paymentId: 'pay-3', amount: 1 },
      'cost-flag-1',
    );
    const flaggedCopy = await send(
      flagging,
      { accountId: account, paymentId: 'pay-3', amount: 1 },
      'cost-flag-2',
    );

    // A 1 KB write is about 5 RU: the event key document is one more, in the same request.
    expect({
      without: without.requestCharge,
      withKey: withKey.requestCharge,
      flagged: flagged.requestCharge,
      // the batch that fails on the key, and the read of the key document
      copy: copy.requestCharge,
      // the same, then the batch without the key
      flaggedCopy: flaggedCopy.requestCharge,
    }).toEqual({ without: 10, withKey: 15, flagged: 15, copy: 2, flaggedCopy: 12 });
    expect([without.requests, withKey.requests, copy.requests, flaggedCopy.requests]).toEqual([1, 1, 2, 3]);
  });
});

describe('an event key the message does not yield', () => {
  const keyed = (of: (payment: Payment) => unknown): InboxConsumer<Payment> =>
    paymentConsumer({ of: of as (payment: Payment) => string, onConflict: 'absorb' });
  const body = (): Payment => ({ accountId: nextAccount(), paymentId: 'pay-1', amount: 1 });

  it('is poison (no-event-key), nothing written, and the error never echoes the key', async () => {
    const thrown = new Error('no payment id');
    const cases = [
      keyed(() => {
        throw thrown;
      }),
      keyed(() => ''),
      keyed(() => 42),
      keyed(() => null),
      keyed(() => 'é'.repeat(MAX_EVENT_KEY_BYTES / 2 + 1)),
    ];
    const errors = [];
    for (const [index, consumer] of cases.entries()) {
      const message = body();
      errors.push(await send(consumer, message, `no-key-${index}`).catch((caught: unknown) => caught));
      expect(await stored(message.accountId)).toEqual({ applied: [], markers: 0, keys: 0 });
    }

    expect(errors.map((error) => (error as PoisonMessageError).reason)).toEqual(
      Array(5).fill('no-event-key'),
    );
    expect(errors.map((error) => (error as Error).message)).toEqual([
      'The event key could not be derived: no payment id',
      'The message yields no usable event key (got a string of 0 bytes); it must be a non-empty string of at most 2048 bytes.',
      'The message yields no usable event key (got number); it must be a non-empty string of at most 2048 bytes.',
      'The message yields no usable event key (got null); it must be a non-empty string of at most 2048 bytes.',
      'The message yields no usable event key (got a string of 2050 bytes); it must be a non-empty string of at most 2048 bytes.',
    ]);
    expect((errors[0] as Error).cause).toBe(thrown);
    expect(MAX_EVENT_KEY_BYTES).toBe(2048);
  });
});

describe('defineInboxConsumer with an event key', () => {
  const define = (eventKey: Record<string, unknown>): unknown =>
    defineInboxConsumer({
      name: 'test.payments',
      schema: Payment,
      partitionKey: (payment) => payment.accountId,
      handle: () => undefined,
      eventKey: eventKey as unknown as NonNullable<InboxConsumer<Payment>['eventKey']>,
    });
  const problems = (eventKey: Record<string, unknown>): readonly string[] => {
    try {
      define(eventKey);
    } catch (error) {
      if (error instanceof SettingsError) return error.problems;
      throw error;
    }
    return [];
  };
  const of = (payment: Payment): string => payment.paymentId;

  it('takes absorb or flag, with a retention of whole seconds from PT1M', () => {
    expect(problems({ of, onConflict: 'absorb' })).toEqual([]);
    expect(problems({ of, onConflict: 'flag', retention: 'PT1M' })).toEqual([]);
    expect(problems({ of, onConflict: 'flag', retention: 'P90D' })).toEqual([]);
  });

  it('refuses anything else, naming the consumer and the field', () => {
    expect(problems({ of, onConflict: 'ignore' })).toEqual([
      `test.payments: eventKey.onConflict must be 'absorb' or 'flag', not "ignore".`,
    ]);
    expect(problems({ of: 'paymentId', onConflict: 'absorb' })).toEqual([
      'test.payments: eventKey.of must be a function of the message.',
    ]);
    expect(problems({ of, onConflict: 'absorb', retention: 'PT59S' })).toEqual([
      "test.payments: eventKey.retention='PT59S' must be whole seconds, at least PT1M.",
    ]);
    expect(problems({ of, onConflict: 'absorb', retention: 'PT90.5S' })).toEqual([
      "test.payments: eventKey.retention='PT90.5S' must be whole seconds, at least PT1M.",
    ]);
    expect(problems({ of, onConflict: 'absorb', retention: 'P1M' })[0]).toContain(
      "test.payments: eventKey.retention='P1M' is not an ISO-8601 duration",
    );
  });
});
