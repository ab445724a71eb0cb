import type { Container } from '@azure/cosmos';
import {
  buildOutboxDocument,
  discardUnsendable,
  isTopicRefusal,
  MAX_OUTGOING_MESSAGE_BYTES,
  OUTBOX_SENT_BY_PROPERTY,
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutboxMessage,
  type OutboxPublisher,
  outgoingMessageId,
  type PartitionTransaction,
  PoisonMessageError,
  processDelivery,
  type RelayDependencies,
  relayOutbox,
  resendUnsendable,
  serviceBusMessageOf,
  sweepOutbox,
  type SweepReport,
} from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { delivery, dependencies, documentsIn, OUTBOX_SETTINGS, testConsumer } from '../src/testing';

const stack = useLocalStack();

let accounts = 0;
const nextAccount = (): string => `outbox-acct-${++accounts}`;

/** An error as @azure/service-bus throws it: a ServiceBusError with its ServiceBusErrorCode. */
const serviceBusError = (code: string): Error =>
  Object.assign(new Error(`${code}: the namespace said no`), { name: 'ServiceBusError', code });

/** A publisher that records what it was given, and can be told to fail the next sends. */
class RecordingPublisher implements OutboxPublisher {
  readonly sent: { topic: string; message: OutboxMessage }[] = [];
  failures = 0;

  /** MessageIds to report as larger than Service Bus takes. */
  readonly tooLarge = new Set<string>();

  send(topic: string, messages: readonly OutboxMessage[]): Promise<readonly string[]> {
    if (this.failures > 0) {
      this.failures--;
      return Promise.reject(new Error('ServiceBusError: ServiceUnavailable'));
    }
    for (const message of messages)
      if (!this.tooLarge.has(message.messageId)) this.sent.push({ topic, message });
    return Promise.resolve(messages.filter((m) => this.tooLarge.has(m.messageId)).map((m) => m.messageId));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function relayDependencies(
  container: Container,
  publisher: OutboxPublisher,
  now = new Date(),
): RelayDependencies {
  return { container, publisher, now: () => now, settings: OUTBOX_SETTINGS };
}

const publishing = testConsumer((message, tx) => {
  tx.create({ id: 'balance', amount: message.amount });
  tx.publish({
    topic: 'business-events',
    subject: 'BalanceOpened',
    name: 'opened',
    body: { amount: message.amount },
  });
  tx.publish({ topic: 'business-events', subject: 'Audit', body: { amount: message.amount } });
});

const outboxIn = async (container: Container, partitionKey: string): Promise<OutboxDocument[]> =>
  (await documentsIn(container, partitionKey)).filter((d) => d.type === OUTBOX_TYPE) as OutboxDocument[];

/** The outbox documents `publishing` commits for a delivery of `account`, as of `now`. */
async function published(account: string, messageId: string, now = new Date()): Promise<OutboxDocument[]> {
  await processDelivery(
    publishing,
    delivery({ accountId: account, amount: 1 }, { messageId }),
    dependencies(stack.container, { now: () => now }),
  );
  return outboxIn(stack.container, `account:${account}`);
}

/** Request units the local server has charged all its clients so far. */
const chargedSoFar = (): number =>
  stack.server.usageByClient().reduce((sum, usage) => sum + usage.requestCharge, 0);

describe('tx.publish: outbox documents in the same batch as the marker and the effect', () => {
  it('commits one pending outbox document per publish, with a MessageId derived from the consumer, the message and the name', async () => {
    const account = nextAccount();
    const now = new Date('2026-12-01T08:00:00Z');
    const result = await processDelivery(
      publishing,
      delivery({ accountId: account, amount: 7 }, { messageId: 'm-1', correlationId: 'conversation-9' }),
      dependencies(stack.container, { now: () => now }),
    );
    const outbox = await outboxIn(stack.container, `account:${account}`);

    expect(result).toMatchObject({ outcome: 'processed', published: 2 });
    expect(outbox.map((d) => d.messageId).sort()).toEqual(
      [
        outgoingMessageId('test.consumer', 'm-1', `account:${account}`, 'opened'),
        outgoingMessageId('test.consumer', 'm-1', `account:${account}`, '#1'),
      ].sort(),
    );
    const opened = outbox.find((d) => d.subject === 'BalanceOpened');
    expect(opened).toMatchObject({
      id: `outbox-${outgoingMessageId('test.consumer', 'm-1', `account:${account}`, 'opened')}`,
      partitionKey: `account:${account}`,
      status: 'pending',
      consumer: 'test.consumer',
      sourceMessageId: 'm-1',
      createdAtEpochSeconds: now.getTime() / 1000,
      pendingSinceEpochSeconds: now.getTime() / 1000,
      messageId: outgoingMessageId('test.consumer', 'm-1', `account:${account}`, 'opened'),
      topic: 'business-events',
      subject: 'BalanceOpened',
    });
    expect(JSON.parse(opened?.message ?? '')).toEqual({
      messageId: outgoingMessageId('test.consumer', 'm-1', `account:${account}`, 'opened'),
      topic: 'business-events',
      subject: 'BalanceOpened',
      body: { amount: 7 },
      contentType: 'application/json',
      correlationId: 'conversation-9',
      partitionKey: `account:${account}`,
    });
    expect(opened?.ttl).toBeUndefined();
  });

  it('keeps the message as JSON text, so that what is sent is what was staged, ISO date strings included', async () => {
    const account = nextAccount();
    const at = '2026-12-01T10:00:00.120+02:00';
    const dated = testConsumer((_message, tx) => {
      tx.publish({ topic: 'business-events', subject: 'Dated', body: { at }, correlationId: at });
    });
    await processDelivery(dated, delivery({ accountId: account, amount: 1 }), dependencies(stack.container));
    const publisher = new RecordingPublisher();
    const page = await documentsIn(stack.container, `account:${account}`);

    // The Cosmos DB trigger re-reads documents with Json.NET, which rewrites date-like strings but
    // not the inside of a string: only the copies kept for triage could change.
    expect(page.find((d) => d.type === OUTBOX_TYPE)?.message).toEqual(expect.any(String));
    await relayOutbox(page, relayDependencies(stack.container, publisher));
    expect(publisher.sent.map((s) => [s.message.body, s.message.correlationId])).toEqual([[{ at }, at]]);
  });

  it('publishes nothing for a batch that did not commit: a duplicate, or the run whose condition failed', async () => {
    const account = nextAccount();
    const body = { accountId: account, amount: 3 };
    await processDelivery(publishing, delivery(body, { messageId: 'm-2' }), dependencies(stack.container));
    const again = await processDelivery(
      publishing,
      delivery(body, { messageId: 'm-2' }),
      dependencies(stack.container),
    );

    // The second delivery ran the handler and staged the same two publishes; its batch failed on the marker.
    expect(again.outcome).toBe('duplicate');
    expect(await outboxIn(stack.container, `account:${account}`)).toHaveLength(2);

    const other = nextAccount();
    const reserving = testConsumer((_message, tx) => {
      if (tx.failed('reserve', 404)) {
        tx.publish({ topic: 'business-events', subject: 'Rejected', name: 'rejected', body: {} });
        return;
      }
      tx.patch('missing', [{ op: 'incr', path: '/stock', value: -1 }], { name: 'reserve' });
      tx.publish({ topic: 'business-events', subject: 'Reserved', name: 'reserved', body: {} });
    });
    const result = await processDelivery(
      reserving,
      delivery({ accountId: other, amount: 1 }, { messageId: 'm-3' }),
      dependencies(stack.container),
    );
    const outbox = await outboxIn(stack.container, `account:${other}`);

    expect(result).toMatchObject({ outcome: 'processed', attempts: 2, published: 1 });
    expect(outbox.map((d) => d.subject)).toEqual(['Rejected']);
  });

  it('counts publishes in the 100 operations of one batch', async () => {
    const consumer = testConsumer((_message, tx) => {
      for (let i = 0; i < 98; i++) tx.create({ id: `doc-${i}` });
      tx.publish({ topic: 'business-events', subject: 'One', body: {} });
      tx.publish({ topic: 'business-events', subject: 'Two', body: {} });
    });
    const error = await processDelivery(
      consumer,
      delivery({ accountId: nextAccount(), amount: 1 }),
      dependencies(stack.container),
    ).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(PoisonMessageError);
    expect((error as PoisonMessageError).reason).toBe('too-many-operations');
  });

  it.each([
    [
      'a topic Service Bus would refuse',
      { topic: 'no spaces', subject: 'S', body: {} },
      /the topic "no spaces"/,
    ],
    ['an empty subject', { topic: 't', subject: '', body: {} }, /the subject "" must be text/],
    ['an undefined body', { topic: 't', subject: 'S', body: undefined }, /the body is undefined/],
    [
      'a body over the limit',
      { topic: 't', subject: 'S', body: { text: 'x'.repeat(MAX_OUTGOING_MESSAGE_BYTES) } },
      new RegExp(`at most ${MAX_OUTGOING_MESSAGE_BYTES}`),
    ],
  ])('makes %s poison (invalid-outgoing-message), writing nothing', async (_what, message, reason) => {
    const account = nextAccount();
    const consumer = testConsumer((_message, tx) => {
      tx.create({ id: 'balance' });
      tx.publish(message);
    });
    const error = await processDelivery(
      consumer,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    ).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(PoisonMessageError);
    expect((error as PoisonMessageError).reason).toBe('invalid-outgoing-message');
    expect((error as Error).message).toMatch(reason);
    expect(await documentsIn(stack.container, `account:${account}`)).toEqual([]);
  });

  it('refuses a topic that does not list the consumer among its publishers, when the app says which it may use', async () => {
    const account = nextAccount();
    const error = await processDelivery(
      publishing,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container, { outboxRoutes: () => new Map([['other-topic', new Set(['X'])]]) }),
    ).catch((caught: unknown) => caught);

    expect((error as PoisonMessageError).reason).toBe('invalid-outgoing-message');
    expect((error as Error).message).toContain('does not list test.consumer among its publishers');
    expect(await documentsIn(stack.container, `account:${account}`)).toEqual([]);
  });

  it.each([
    [
      'a document typed as an outbox document',
      (tx: PartitionTransaction) => tx.create({ id: 'x', type: OUTBOX_TYPE }),
    ],
    ['a marker id', (tx: PartitionTransaction) => tx.upsert({ id: 'inbox-abc' })],
    ['an outbox id', (tx: PartitionTransaction) => tx.delete('outbox-abc')],
  ])('refuses %s: only the inbox writes its own documents (reserved-document)', async (_what, write) => {
    const account = nextAccount();
    const error = await processDelivery(
      testConsumer((_message, tx) => write(tx)),
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    ).catch((caught: unknown) => caught);

    expect((error as PoisonMessageError).reason).toBe('reserved-document');
    expect(await documentsIn(stack.container, `account:${account}`)).toEqual([]);
  });

  it('takes an outbox document already there (its marker purged) for a duplicate, not a conflict', async () => {
    const account = nextAccount();
    const first = await processDelivery(
      publishing,
      delivery({ accountId: account, amount: 2 }, { messageId: 'old-1' }),
      dependencies(stack.container),
    );
    const marker = (await documentsIn(stack.container, `account:${account}`)).find(
      (d) => d.type === 'inbox-marker',
    );
    await stack.container.item(String(marker?.id), `account:${account}`).delete();

    // The balance document exists too: without the outbox's 409 the create of it would conflict first.
    const other = testConsumer((message, tx) => {
      tx.publish({
        topic: 'business-events',
        subject: 'BalanceOpened',
        name: 'opened',
        body: { amount: message.amount },
      });
    });
    const again = await processDelivery(
      other,
      delivery({ accountId: account, amount: 2 }, { messageId: 'old-1' }),
      dependencies(stack.container),
    );

    expect(first.outcome).toBe('processed');
    expect(again).toMatchObject({ outcome: 'duplicate', attempts: 1 });
  });

  it('refuses one name for two publishes of a run', async () => {
    const consumer = testConsumer((_message, tx) => {
      tx.publish({ topic: 't', subject: 'A', name: 'same', body: 1 });
      tx.publish({ topic: 't', subject: 'B', name: 'same', body: 2 });
    });
    const error = await processDelivery(
      consumer,
      delivery({ accountId: nextAccount(), amount: 1 }),
      dependencies(stack.container),
    ).catch((caught: unknown) => caught);

    expect((error as PoisonMessageError).reason).toBe('invalid-outgoing-message');
    expect((error as Error).message).toContain('the name "same" is used twice');
  });
});

describe('the relay and the sweeper', () => {
  it('sends the pending outbox documents of a change feed page, then marks them dispatched with a ttl', async () => {
    const account = nextAccount();
    const now = new Date();
    const pending = await published(account, 'relay-1', now);
    const publisher = new RecordingPublisher();
    // A page of changes holds every kind of document: markers and business documents are skipped.
    const page = await documentsIn(stack.container, `account:${account}`);

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher, now));
    const after = await outboxIn(stack.container, `account:${account}`);

    expect(page.length).toBeGreaterThan(pending.length);
    expect(report).toMatchObject({ sent: 2, marked: 2, alreadyMarked: 0 });
    expect(publisher.sent.map((s) => s.message.messageId).sort()).toEqual(
      pending.map((d) => d.messageId).sort(),
    );
    // Marked as the relay's send, for a consumer that absorbs it twice (duplicateCause.ts).
    expect(publisher.sent.map((s) => s.message.applicationProperties?.[OUTBOX_SENT_BY_PROPERTY])).toEqual([
      'relay',
      'relay',
    ]);
    expect(after.every((d) => d.status === 'dispatched' && d.ttl === 86_400)).toBe(true);
    expect(after.every((d) => d.pendingSinceEpochSeconds === undefined)).toBe(true);

    // The same page again (a retried batch): sent again, for the broker to drop; the marks find them done.
    const again = await relayOutbox(page, relayDependencies(stack.container, publisher, now));
    expect(again).toMatchObject({ sent: 2, marked: 0, alreadyMarked: 2 });
  });

  it('tries a mark that failed for a passing reason again at once: two 503s cost no page retry', async () => {
    const account = nextAccount();
    const now = new Date();
    await published(account, 'relay-4', now);
    const publisher = new RecordingPublisher();
    const page = await documentsIn(stack.container, `account:${account}`);
    const faults = stack.server.faults.inject({ kind: 'unavailable', on: 'write', times: 2 });

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher, now));

    expect(faults.hits).toBe(2);
    expect(report).toMatchObject({ sent: 2, marked: 2, alreadyMarked: 0 });
    expect(report).not.toHaveProperty('retry');
    expect((await outboxIn(stack.container, `account:${account}`)).map((d) => d.status)).toEqual([
      'dispatched',
      'dispatched',
    ]);
  });

  it('asks for the page again once a mark failed three times, and the retry sends and marks what is still pending', async () => {
    const account = nextAccount();
    const now = new Date();
    await published(account, 'relay-5', now);
    const publisher = new RecordingPublisher();
    const page = await documentsIn(stack.container, `account:${account}`);
    // Three attempts of each of the two marks.
    stack.server.faults.inject({ kind: 'unavailable', on: 'write', times: 6 });

    const first = await relayOutbox(page, relayDependencies(stack.container, publisher, now));
    const statuses = (await outboxIn(stack.container, `account:${account}`)).map((d) => d.status);
    const retried = await relayOutbox(page, relayDependencies(stack.container, publisher, now), true);

    expect(first.retry?.message).toMatch(/503|unavailable/i);
    expect(first).toMatchObject({ sent: 2, marked: 0 });
    expect(statuses).toEqual(['pending', 'pending']);
    expect(retried).toMatchObject({ sent: 2, marked: 2, alreadyMarked: 0 });
    expect(publisher.sent).toHaveLength(4);
  });

  /** Mark deadlines that end after `realMs` of real time, recorded: what each asked for, and how many were cancelled. */
  function deadlines(realMs: number): {
    after: NonNullable<RelayDependencies['after']>;
    asked: number[];
    cancelled: () => number;
  } {
    const asked: number[] = [];
    let cancelled = 0;
    return {
      asked,
      cancelled: () => cancelled,
      after: (ms, callback) => {
        asked.push(ms);
        const timer = setTimeout(callback, realMs);
        return () => {
          cancelled++;
          clearTimeout(timer);
        };
      },
    };
  }

  it('gives up a mark Cosmos DB holds past its 5-s deadline and tries it again at once: the page goes on', async () => {
    const account = nextAccount();
    const now = new Date();
    await published(account, 'relay-7', now);
    const page = await documentsIn(stack.container, `account:${account}`);
    const held = stack.server.faults.inject({ kind: 'latency', on: 'write', ms: 400, times: 1 });
    const deadline = deadlines(50);

    const report = await relayOutbox(page, {
      ...relayDependencies(stack.container, new RecordingPublisher(), now),
      after: deadline.after,
    });

    expect(held.hits).toBe(1);
    expect(report).toMatchObject({ sent: 2, marked: 2, alreadyMarked: 0 });
    expect(report).not.toHaveProperty('retry');
    // Two marks and the one attempt again, each with the same deadline, each timer cancelled.
    expect(deadline.asked).toEqual([5_000, 5_000, 5_000]);
    expect(deadline.cancelled()).toBe(3);
  });

  it('gives the page back when a mark runs past its deadline on every attempt, saying so', async () => {
    const account = nextAccount();
    const now = new Date();
    await published(account, 'relay-8', now);
    const page = await documentsIn(stack.container, `account:${account}`);
    stack.server.faults.inject({ kind: 'latency', on: 'write', ms: 400, times: 6 });

    const report = await relayOutbox(page, {
      ...relayDependencies(stack.container, new RecordingPublisher(), now),
      after: deadlines(20).after,
    });

    expect(report.retry?.message).toBe(
      'Cosmos DB did not answer a dispatch mark within 5 s (the last of its 3 attempts)',
    );
    // What the SDK threw when the deadline aborted the last attempt.
    expect((report.retry?.cause as Error | undefined)?.name).toBe('AbortError');
    expect(report).toMatchObject({ sent: 2, marked: 0 });
  });

  it('does not try again a mark Cosmos DB refuses for good (400): the page is given back at once', async () => {
    const account = nextAccount();
    const now = new Date();
    await published(account, 'relay-6', now);
    const page = await documentsIn(stack.container, `account:${account}`);
    const faults = stack.server.faults.inject({ kind: 'status', status: 400, on: 'write', times: 2 });

    const report = await relayOutbox(page, relayDependencies(stack.container, new RecordingPublisher(), now));

    expect(faults.hits).toBe(2);
    expect(report.retry?.message).toMatch(/400|bad request/i);
    expect(report).toMatchObject({ sent: 2, marked: 0 });
  });

  async function twoTopicsPage(account: string): Promise<Record<string, unknown>[]> {
    const twoTopics = testConsumer((_message, tx) => {
      tx.publish({ topic: 'accepting', subject: 'A', body: 1 });
      tx.publish({ topic: 'refusing', subject: 'B', body: 2 });
    });
    await processDelivery(
      twoTopics,
      delivery({ accountId: account, amount: 1 }),
      dependencies(stack.container),
    );
    return documentsIn(stack.container, `account:${account}`);
  }

  const failingOn = (topic: string, error: Error, sent: string[]): OutboxPublisher => ({
    send: (to, messages) =>
      to === topic
        ? Promise.reject(error)
        : Promise.resolve((sent.push(...messages.map((m) => m.subject)), [])),
    close: () => Promise.resolve(),
  });

  it('leaves the messages of a topic that refuses them pending, marks the others, and goes on (no retry)', async () => {
    const account = nextAccount();
    const sent: string[] = [];
    const publisher = failingOn('refusing', serviceBusError('UnauthorizedAccess'), sent);
    const page = await twoTopicsPage(account);

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher));
    const outbox = await outboxIn(stack.container, `account:${account}`);

    expect(report.retry).toBeUndefined();
    expect(report.failedTopics).toMatchObject([{ topic: 'refusing', messages: 1, refused: true }]);
    expect(sent).toEqual(['A']);
    expect(outbox.map((d) => [d.topic, d.status]).sort()).toEqual([
      ['accepting', 'dispatched'],
      ['refusing', 'pending'],
    ]);
  });

  it('asks for the page again when a send fails for another reason, after marking what another topic took', async () => {
    const account = nextAccount();
    const sent: string[] = [];
    const publisher = failingOn('refusing', serviceBusError('ServiceTimeout'), sent);
    const page = await twoTopicsPage(account);

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher));
    const outbox = await outboxIn(stack.container, `account:${account}`);

    expect(report.retry?.message).toContain('ServiceTimeout');
    expect(report.failedTopics).toMatchObject([{ topic: 'refusing', refused: false }]);
    expect(outbox.map((d) => [d.topic, d.status]).sort()).toEqual([
      ['accepting', 'dispatched'],
      ['refusing', 'pending'],
    ]);
  });

  it.each([
    ['MessagingEntityNotFound', true],
    ['UnauthorizedAccess', true],
    ['MessagingEntityDisabled', true],
    ['QuotaExceeded', true],
    ['ServiceBusy', false],
    ['ServiceCommunicationProblem', false],
    ['GeneralError', false],
  ])('takes a ServiceBusError %s for a refusal by the topic: %s', (code, refused) => {
    expect(isTopicRefusal(serviceBusError(code))).toBe(refused);
  });

  it('takes no other error for a refusal, whatever its message says', () => {
    expect(isTopicRefusal(new Error('MessagingEntityNotFound'))).toBe(false);
    expect(isTopicRefusal(Object.assign(new Error('x'), { code: 'UnauthorizedAccess' }))).toBe(false);
    expect(isTopicRefusal('UnauthorizedAccess')).toBe(false);
    expect(isTopicRefusal(null)).toBe(false);
  });

  it('sets aside a message Service Bus can never take (too large), and marks the others', async () => {
    const account = nextAccount();
    const now = new Date();
    const pending = await published(account, 'relay-5', now);
    const publisher = new RecordingPublisher();
    const [tooLarge] = pending;
    publisher.tooLarge.add(tooLarge?.messageId ?? '');
    const page = await documentsIn(stack.container, `account:${account}`);

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher, now));
    const statuses = Object.fromEntries(
      (await outboxIn(stack.container, `account:${account}`)).map((d) => [d.messageId, d.status]),
    );

    expect(report).toMatchObject({ sent: 1, marked: 1, unsendable: 1 });
    expect(report.setAside).toMatchObject([{ reason: 'too-large', topic: 'business-events' }]);
    expect(statuses[tooLarge?.messageId ?? '']).toBe('unsendable');
  });

  it('marks in the partition its JSON text names, whatever the trigger did to the partitionKey property', async () => {
    const account = nextAccount();
    const now = new Date();
    await published(account, 'relay-6', now);
    const publisher = new RecordingPublisher();
    // As if Json.NET had rewritten a date-like partition key on the way to the relay.
    const page = (await documentsIn(stack.container, `account:${account}`)).map((d) => ({
      ...d,
      partitionKey: '2026-01-01T00:00:00+00:00',
    }));

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher, now));

    expect(report).toMatchObject({ sent: 2, marked: 2 });
    expect((await outboxIn(stack.container, `account:${account}`)).map((d) => d.status)).toEqual([
      'dispatched',
      'dispatched',
    ]);
  });

  it('asks for a retry when Service Bus fails, leaving the documents pending for the retry or the sweeper', async () => {
    const account = nextAccount();
    const now = new Date();
    await published(account, 'relay-2', now);
    const publisher = Object.assign(new RecordingPublisher(), { failures: 1 });
    const page = await documentsIn(stack.container, `account:${account}`);

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher, now));

    expect(report.retry?.message).toContain('ServiceUnavailable');
    expect((await outboxIn(stack.container, `account:${account}`)).every((d) => d.status === 'pending')).toBe(
      true,
    );
  });

  it('sets aside an outbox document that holds no sendable message, once, instead of failing on it forever', async () => {
    const account = nextAccount();
    const now = new Date();
    await published(account, 'relay-3', now);
    const partitionKey = `account:${account}`;
    const broken = {
      id: 'outbox-broken',
      partitionKey,
      type: OUTBOX_TYPE,
      status: 'pending',
      pendingSinceEpochSeconds: 0,
      message: JSON.stringify({ topic: 'business-events' }),
    };
    await stack.container.items.create(broken);
    // A foreign document without the pending field: setting it aside must not remove what is not there.
    await stack.container.items.create({
      id: 'outbox-foreign',
      partitionKey,
      type: OUTBOX_TYPE,
      status: 'pending',
    });
    const publisher = new RecordingPublisher();
    const page = await documentsIn(stack.container, partitionKey);

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher, now));
    const stored = (await stack.container.item(broken.id, partitionKey).read<Record<string, unknown>>())
      .resource;

    expect(report).toMatchObject({ sent: 2, marked: 2, unsendable: 2 });
    expect(report.setAside.map((d) => [d.id, d.reason, d.detail]).sort()).toEqual([
      ['outbox-broken', 'unreadable', 'its "message" has no messageId.'],
      ['outbox-foreign', 'unreadable', 'it has no "message" text.'],
    ]);
    expect(stored).toMatchObject({
      status: 'unsendable',
      unsendableReason: 'unreadable',
      unsendableDetail: 'its "message" has no messageId.',
      unsendableSinceEpochSeconds: Math.floor(now.getTime() / 1000),
    });
    expect(stored?.pendingSinceEpochSeconds).toBeUndefined();
    expect(stored?.ttl).toBeUndefined();
  });

  it('the sweeper resends only what is pending longer than OUTBOX_SWEEP_AGE, and measures what is pending', async () => {
    // Its own container: the sweep queries across partitions.
    const database = stack.client.database(stack.container.database.id);
    const { container } = await database.containers.createIfNotExists({
      id: `sweep-${Date.now()}`,
      partitionKey: { paths: ['/partitionKey'] },
    });
    const now = new Date('2026-12-01T09:00:00Z');
    const old = new Date(now.getTime() - 600_000);
    const young = new Date(now.getTime() - 60_000);
    const oldAccount = nextAccount();
    const youngAccount = nextAccount();
    await processDelivery(
      publishing,
      delivery({ accountId: oldAccount, amount: 1 }, { messageId: 'sweep-old' }),
      dependencies(container, { now: () => old }),
    );
    await processDelivery(
      publishing,
      delivery({ accountId: youngAccount, amount: 1 }, { messageId: 'sweep-young' }),
      dependencies(container, { now: () => young }),
    );
    const publisher = new RecordingPublisher();

    const report = await sweepOutbox(relayDependencies(container, publisher, now));

    expect(report).toMatchObject({
      sent: 2,
      marked: 2,
      pending: 4,
      oldestPendingAgeSeconds: 600,
      capped: false,
    });
    expect(new Set(publisher.sent.map((s) => s.message.correlationId))).toEqual(new Set(['sweep-old']));
    expect(publisher.sent.map((s) => s.message.applicationProperties?.[OUTBOX_SENT_BY_PROPERTY])).toEqual([
      'sweeper',
      'sweeper',
    ]);
    const next = await sweepOutbox(relayDependencies(container, publisher, now));
    expect(next).toMatchObject({ sent: 0, pending: 2, oldestPendingAgeSeconds: 60 });

    const capped = await sweepOutbox({
      ...relayDependencies(container, publisher, new Date(now.getTime() + 3_600_000)),
      settings: { outbox: { ...OUTBOX_SETTINGS.outbox, sweepMaxItems: 1 } },
    });
    expect(capped).toMatchObject({ sent: 1, capped: true });
    await container.delete();
  });

  it('leaves alone what a page holds but is not pending: dispatched, set aside, or a business document that says pending', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    const now = new Date();
    await published(account, 'relay-not-pending', now);
    const publisher = new RecordingPublisher();
    await relayOutbox(
      await documentsIn(stack.container, partitionKey),
      relayDependencies(stack.container, publisher, now),
    );
    await stack.container.items.create({
      id: 'order-1',
      partitionKey,
      status: 'pending',
      topic: 'business-events',
    });
    await stack.container.items.create({
      id: 'outbox-aside',
      partitionKey,
      type: OUTBOX_TYPE,
      status: 'unsendable',
      unsendableReason: 'invalid',
      message: '{}',
    });
    // The same documents as the change feed shows them now: marked, set aside, or not the outbox's.
    const page = await documentsIn(stack.container, partitionKey);
    const before = JSON.stringify(page);
    const sent = publisher.sent.length;

    const report = await relayOutbox(page, relayDependencies(stack.container, publisher, now));

    expect(
      page
        .filter((d) => d.type === OUTBOX_TYPE)
        .map((d) => d.status)
        .sort(),
    ).toEqual(['dispatched', 'dispatched', 'unsendable']);
    expect(report).toMatchObject({ sent: 0, marked: 0, alreadyMarked: 0, unsendable: 0, failedTopics: [] });
    expect(publisher.sent.length).toBe(sent);
    const after = await documentsIn(stack.container, partitionKey);
    expect(JSON.stringify(after.map(({ _ts, ...rest }) => rest))).toBe(
      JSON.stringify((JSON.parse(before) as Record<string, unknown>[]).map(({ _ts, ...rest }) => rest)),
    );
  });

  it('the sweeper on an empty outbox: nothing pending, an oldest age of 0, nothing sent, not capped', async () => {
    const database = stack.client.database(stack.container.database.id);
    const { container } = await database.containers.createIfNotExists({
      id: `sweep-empty-${Date.now()}`,
      partitionKey: { paths: ['/partitionKey'] },
    });
    await container.items.create({ id: 'order-1', partitionKey: 'p', status: 'pending' });
    const publisher = new RecordingPublisher();

    const report = await sweepOutbox(relayDependencies(container, publisher));

    expect(report).toEqual({
      sent: 0,
      marked: 0,
      alreadyMarked: 0,
      unsendable: 0,
      setAside: [],
      failedTopics: [],
      requestCharge: expect.any(Number) as unknown,
      pending: 0,
      oldestPendingAgeSeconds: 0,
      unsendableKept: 0,
      capped: false,
    });
    expect(publisher.sent).toEqual([]);
    await container.delete();
  });
});

describe("an operator's resend and discard of an unsendable outbox document", () => {
  const setAsideAt = new Date('2026-12-01T10:00:00Z');

  /** An outbox document set aside as unsendable, stored; `legacy` lacks the reason fields older versions did not write. */
  async function unsendable(legacy = false): Promise<OutboxDocument & { _etag: string }> {
    const partitionKey = `account:${nextAccount()}`;
    const built = buildOutboxDocument(
      { topic: 'billing-events', subject: 'Applied', body: { n: 1 } },
      0,
      { consumer: 'test.consumer', key: 'k', messageId: `m-${accounts}`, correlationId: undefined },
      partitionKey,
      setAsideAt,
    );
    const document: OutboxDocument = {
      ...built,
      // Left out of the stored JSON, as when the relay set it aside.
      pendingSinceEpochSeconds: undefined,
      status: 'unsendable',
      ...(legacy
        ? {}
        : {
            unsendableSinceEpochSeconds: setAsideAt.getTime() / 1000,
            unsendableReason: 'too-large',
            unsendableDetail: 'larger than the namespace takes',
          }),
    };
    const { resource } = await stack.container.items.create(document);
    return resource as unknown as OutboxDocument & { _etag: string };
  }
  const stored = async (document: OutboxDocument): Promise<Record<string, unknown> | undefined> =>
    (await stack.container.item(document.id, document.partitionKey).read<Record<string, unknown>>()).resource;

  it('resend puts it back to pending as of now, without its reason, also when an older version wrote none', async () => {
    const now = new Date('2026-12-02T08:00:00Z');
    for (const legacy of [false, true]) {
      const document = await unsendable(legacy);

      expect(await resendUnsendable(stack.container, document, now)).toBe(true);
      const after = await stored(document);
      expect(after).toMatchObject({ status: 'pending', pendingSinceEpochSeconds: now.getTime() / 1000 });
      expect(Object.keys(after ?? {}).filter((key) => key.startsWith('unsendable'))).toEqual([]);
    }
  });

  it('resend changes nothing, and says so, when the document is no longer unsendable or is gone', async () => {
    const pending = await unsendable();
    await stack.container
      .item(pending.id, pending.partitionKey)
      .patch([{ op: 'set', path: '/status', value: 'pending' }]);
    const gone = await unsendable();
    await stack.container.item(gone.id, gone.partitionKey).delete();

    expect(await resendUnsendable(stack.container, pending, new Date())).toBe(false);
    expect(await stored(pending)).toMatchObject({ status: 'pending', unsendableReason: 'too-large' });
    expect(await resendUnsendable(stack.container, gone, new Date())).toBe(false);
    expect(await stored(gone)).toBeUndefined();
  });

  it('discard deletes it only as it was read: not after a change, not when it is not unsendable, not twice', async () => {
    const document = await unsendable();
    const changed = await unsendable();
    await stack.container
      .item(changed.id, changed.partitionKey)
      .patch([{ op: 'set', path: '/unsendableDetail', value: 'new' }]);

    expect(await discardUnsendable(stack.container, { ...document, status: 'pending' })).toBe(false);
    expect(await stored(document)).toBeDefined();
    expect(await discardUnsendable(stack.container, changed)).toBe(false);
    expect(await stored(changed)).toBeDefined();
    expect(await discardUnsendable(stack.container, document)).toBe(true);
    expect(await stored(document)).toBeUndefined();
    expect(await discardUnsendable(stack.container, document)).toBe(false);
  });

  it('a failure of Cosmos DB other than 404 or 412 reaches the operator', async () => {
    const document = await unsendable();
    stack.server.faults.inject({ kind: 'status', status: 503, times: 2 });

    await expect(resendUnsendable(stack.container, document, new Date())).rejects.toMatchObject({
      code: 503,
    });
    await expect(discardUnsendable(stack.container, document)).rejects.toMatchObject({ code: 503 });
    stack.server.faults.clear();
  });
});

describe('the sweeper, measured and bounded', () => {
  const now = new Date('2026-12-01T09:00:00Z');
  const nowSeconds = now.getTime() / 1000;

  /** A container of its own (the sweep queries across partitions) holding `pending` due documents and `unsendable` set-aside ones. */
  async function outboxWith(
    pending: number,
    unsendable = 0,
    topics = ['business-events'],
  ): Promise<Container> {
    const database = stack.client.database(stack.container.database.id);
    const { container } = await database.containers.createIfNotExists({
      id: `sweep-${Date.now()}-${++accounts}`,
      partitionKey: { paths: ['/partitionKey'] },
    });
    for (let index = 0; index < pending + unsendable; index++) {
      const document = buildOutboxDocument(
        { topic: topics[index % topics.length]!, subject: 'Counted', body: { index } },
        0,
        { consumer: 'test.consumer', key: `k${index}`, messageId: `m${index}`, correlationId: undefined },
        `account:sweep-${index % 7}`,
        // Each a second older than the next, all older than OUTBOX_SWEEP_AGE.
        new Date(now.getTime() - 3_600_000 + index * 1000),
      );
      await container.items.create(
        index < pending
          ? document
          : {
              ...document,
              pendingSinceEpochSeconds: undefined,
              status: 'unsendable',
              unsendableSinceEpochSeconds: nowSeconds - 60,
              unsendableReason: 'too-large',
            },
      );
    }
    return container;
  }
  const sweep = (container: Container, publisher: OutboxPublisher, sweepMaxItems: number) =>
    sweepOutbox({
      ...relayDependencies(container, publisher, now),
      settings: { outbox: { ...OUTBOX_SETTINGS.outbox, sweepMaxItems } },
    });

  it('takes at most OUTBOX_SWEEP_MAX_ITEMS, capped only when more were due: within a page, at its end, on the next page', async () => {
    const [cutInPage, exactlyAll, atPageEnd, onNextPage] = await Promise.all([
      outboxWith(3),
      outboxWith(3),
      outboxWith(101),
      outboxWith(102),
    ]);
    const results = [];
    for (const [container, limit] of [
      [cutInPage, 2],
      [cutInPage, 5],
      [exactlyAll, 3],
      [atPageEnd, 100],
      [atPageEnd, 100],
      [onNextPage, 101],
      [onNextPage, 100],
    ] as const) {
      const publisher = new RecordingPublisher();
      const report = await sweep(container, publisher, limit);
      results.push([report.sent, report.marked, report.capped, publisher.sent.length]);
      expect(report).not.toHaveProperty('failure');
    }

    expect(results).toEqual([
      [2, 2, true, 2],
      [1, 1, false, 1],
      [3, 3, false, 3],
      [100, 100, true, 100],
      [1, 1, false, 1],
      [101, 101, true, 101],
      [1, 1, false, 1],
    ]);
    await Promise.all([cutInPage, exactlyAll, atPageEnd, onNextPage].map((container) => container.delete()));
  });

  it('leaves out every topic that refuses, one after another, and sends the rest', async () => {
    const container = await outboxWith(6, 0, ['first-refusing', 'second-refusing', 'accepting']);
    const sent: string[] = [];
    const publisher: OutboxPublisher = {
      send: (topic, messages) => {
        if (topic.endsWith('-refusing')) return Promise.reject(serviceBusError('MessagingEntityNotFound'));
        sent.push(...messages.map(() => topic));
        return Promise.resolve([]);
      },
      close: () => Promise.resolve(),
    };

    const report = await sweep(container, publisher, 500);

    expect(report.failedTopics.map((failure) => [failure.topic, failure.refused]).sort()).toEqual([
      ['first-refusing', true],
      ['second-refusing', true],
    ]);
    expect(report).not.toHaveProperty('failure');
    expect(sent).toEqual(['accepting', 'accepting']);
    await container.delete();
  });

  it('adds up what it set aside across pages, listing the first ten', async () => {
    const container = await outboxWith(102);
    const publisher = new RecordingPublisher();
    // Documents 90 to 101 are too large: ten on the first page of 100, two on the second.
    const { resources } = await container.items
      .query<OutboxDocument>('SELECT * FROM c ORDER BY c.pendingSinceEpochSeconds')
      .fetchAll();
    const tooLarge = resources.slice(90, 102);
    for (const document of tooLarge) publisher.tooLarge.add(document.messageId);

    const report = await sweep(container, publisher, 500);

    expect(report).toMatchObject({ sent: 90, marked: 90, unsendable: 12 });
    // Marks run concurrently within a page: which ten, not in what order.
    expect(report.setAside.map((entry) => entry.id).sort()).toEqual(
      tooLarge
        .slice(0, 10)
        .map((document) => document.id)
        .sort(),
    );
    await container.delete();
  });

  it('reports the pending, the oldest and the unsendable kept, and the request units Cosmos DB charged', async () => {
    // What a sweep spends that no report can see (the SDK's own requests before its queries, which
    // the local server charges too) is the same whatever the outbox holds: measured on an empty one.
    const unseen = async (container: Container): Promise<{ report: SweepReport; unreported: number }> => {
      await container.items.query('SELECT VALUE COUNT(1) FROM c').fetchAll();
      const before = chargedSoFar();
      const report = await sweep(container, new RecordingPublisher(), 500);
      return { report, unreported: chargedSoFar() - before - report.requestCharge };
    };
    const empty = await outboxWith(0);
    const container = await outboxWith(3, 2);

    const baseline = await unseen(empty);
    const { report, unreported } = await unseen(container);

    expect(report).toMatchObject({
      pending: 3,
      oldestPendingAgeSeconds: 3600,
      unsendableKept: 2,
      sent: 3,
      marked: 3,
    });
    expect(report.requestCharge).toBeGreaterThan(baseline.report.requestCharge);
    expect(unreported).toBeCloseTo(baseline.unreported, 6);
    await Promise.all([empty.delete(), container.delete()]);
  });

  it('stops at a mark Cosmos DB fails, with the failure, having measured what is pending, and is not capped', async () => {
    const container = await outboxWith(3);
    stack.server.faults.inject({ kind: 'status', status: 503, on: 'write' });

    const report = await sweep(container, new RecordingPublisher(), 2);
    stack.server.faults.clear();

    expect(report).toMatchObject({ pending: 3, sent: 2, marked: 0, capped: false });
    expect(report.failure?.message).toMatch(/503|Service Unavailable/i);
    expect(report).not.toHaveProperty('retry');
    await container.delete();
  });
});

describe('the relay retrying a page', () => {
  it('reads each document again, leaves out one marked or gone since, sets aside one it cannot read, and reports what it was charged', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    const [kept, gone] = await published(account, 'retry-read');
    await stack.container.item(gone!.id, partitionKey).delete();
    const unreadable = { ...kept!, id: `${kept!.id}-x`, message: '{oops' } as OutboxDocument;
    await stack.container.items.create(unreadable);
    const publisher = new RecordingPublisher();
    const before = chargedSoFar();

    const report = await relayOutbox(
      [kept, gone, unreadable],
      relayDependencies(stack.container, publisher),
      true,
    );
    const spent = chargedSoFar() - before;

    expect(report).toMatchObject({ sent: 1, marked: 1, alreadyMarked: 1, unsendable: 1 });
    expect(publisher.sent.map((s) => s.message.messageId)).toEqual([kept!.messageId]);
    expect(report).not.toHaveProperty('retry');
    expect(report.requestCharge).toBeCloseTo(spent, 6);
  });
});

describe('the relay marking what it sent', () => {
  it('takes a document gone before its mark (404) for marked, and asks for no retry', async () => {
    const account = nextAccount();
    const partitionKey = `account:${account}`;
    const page = await published(account, 'gone');
    for (const document of page) await stack.container.item(document.id, partitionKey).delete();

    const report = await relayOutbox(page, relayDependencies(stack.container, new RecordingPublisher()));

    expect(report).toMatchObject({ sent: 2, marked: 0, alreadyMarked: 2 });
    expect(report).not.toHaveProperty('retry');
  });

  it('reports a document it can neither read nor mark (no partition key), and leaves it as it is', async () => {
    const [document] = await published(nextAccount(), 'no-key');
    const broken = { ...document!, message: '{oops', partitionKey: undefined } as unknown as OutboxDocument;

    const report = await relayOutbox([broken], relayDependencies(stack.container, new RecordingPublisher()));

    expect(report).toMatchObject({ sent: 0, marked: 0, unsendable: 1 });
    expect(report.setAside).toEqual([expect.objectContaining({ id: document!.id, reason: 'unreadable' })]);
    expect(await stack.container.item(document!.id, document!.partitionKey).read()).toMatchObject({
      resource: expect.objectContaining({ status: 'pending' }) as unknown,
    });
  });
});

describe('serviceBusMessageOf (the form the relay sends)', () => {
  const message: OutboxMessage = {
    messageId: 'out-1',
    topic: 'business-events',
    subject: 'StockReserved',
    body: { sku: 'café', quantity: 2 },
    contentType: 'application/json',
    correlationId: undefined,
    applicationProperties: undefined,
  };

  it('sends the body as UTF-8 JSON text and leaves out what the message does not carry', () => {
    const sent = serviceBusMessageOf(message);

    expect(sent).toEqual({
      messageId: 'out-1',
      subject: 'StockReserved',
      contentType: 'application/json',
      body: Buffer.from('{"sku":"café","quantity":2}', 'utf8'),
    });
    expect(Object.keys(sent)).not.toContain('correlationId');
    expect(Object.keys(sent)).not.toContain('applicationProperties');
  });

  it("stamps the trace context beside the message's own properties, and keeps its CorrelationId", () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

    const sent = serviceBusMessageOf({
      ...message,
      correlationId: 'checkout-7',
      applicationProperties: { tenant: 'contoso' },
      trace: { traceparent, tracestate: 'vendor=1' },
    });

    expect(sent.correlationId).toBe('checkout-7');
    expect(sent.applicationProperties).toEqual({
      tenant: 'contoso',
      traceparent,
      tracestate: 'vendor=1',
      'Diagnostic-Id': traceparent,
    });
  });
});
