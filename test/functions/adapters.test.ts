import {
  CircuitBreaker,
  type InboxRuntime,
  MARKER_TYPE,
  METRIC_NAMES,
  OUTBOX_TYPE,
  type OutboxMessage,
  type OutboxPublisher,
  PoisonMessageError,
  processDelivery,
} from '@idempotent-consumers/inbox/internal';
import { delivery, dependencies, documentsIn, testConsumer } from '@idempotent-consumers/inbox/testing';
import {
  type FunctionApp,
  loadFunctionApp,
  type LogLine,
  MetricsSink,
  useLocalStack,
} from '@idempotent-consumers/local-azure';

import { inboxRuntime } from '../../src/app';
import { relayChanges, runTimer } from '../support/deliveries';
import { onHandle, PUBLISHER_PROBE } from '../support/publisherProbe';

/**
 * The Azure Functions adapters (packages/inbox/src/azureFunctions.ts) as the host runs them, through the
 * worker path: what each delivery, timer run and change feed page logs (the level, which alerts
 * and Application Insights severity read, and the JSON fields the workbook parses) and counts.
 * The consumer is the test probe's (test/support/publisherProbe.ts); the timers and the relay are
 * the app's functions.
 */
const stack = useLocalStack();
let sink: MetricsSink;
let app: FunctionApp;
beforeAll(async () => {
  sink = MetricsSink.register(); // before the runtime builds its instruments
  app = await loadFunctionApp(PUBLISHER_PROBE);
});
afterAll(() => sink.stop());

interface Logged {
  level: string;
  message: string;
  fields: Record<string, unknown>;
}

/** The adapters' lines (`<message> <JSON fields>`), without the worker's own. */
function logged(lines: readonly LogLine[]): Logged[] {
  return lines
    .filter((line) => line.category === 'user')
    .map((line) => {
      const at = line.text.indexOf(' {');
      return {
        level: line.level,
        message: line.text.slice(0, at),
        fields: JSON.parse(line.text.slice(at + 1)) as Record<string, unknown>,
      };
    });
}

let runs = 0;
/** Delivers a probe message (its own account) and returns what the adapter logged. */
async function deliverProbe(
  handle: Parameters<typeof onHandle>[0],
  options: {
    messageId?: string;
    deliveryCount?: number;
    body?: string;
    account?: string;
    subject?: string | null;
  } = {},
): Promise<{ error: Error | undefined; lines: Logged[] }> {
  const account = options.account ?? `adapter-${++runs}`;
  onHandle(handle);
  const result = await app.invokeServiceBus('publisherProbe', {
    body: options.body ?? JSON.stringify({ accountId: account, amount: 4 }),
    ...(options.messageId === undefined ? {} : { messageId: options.messageId }),
    ...(options.subject === null ? {} : { subject: options.subject ?? 'Test' }),
    deliveryCount: options.deliveryCount ?? 1,
  });
  return { error: result.error, lines: logged(result.logs) };
}

/**
 * A breaker on real time without waits: no backoff, no hold, a probe every 10 ms that the test
 * answers, opening after `failureThreshold` transient failures (by default never, here).
 */
function quickBreaker(probe: () => Promise<unknown>, failureThreshold = 1_000): CircuitBreaker {
  const { options } = inboxRuntime().breaker;
  return new CircuitBreaker({
    ...options,
    limits: { ...options.limits, failureThreshold, holdMs: 0, probeIntervalMs: 10 },
    random: () => 0,
    probe,
    clock: {
      now: () => Date.now(),
      after: (ms, callback) => {
        const timer = setTimeout(callback, ms);
        return () => clearTimeout(timer);
      },
    },
  });
}

beforeEach(() => {
  inboxRuntime().breaker = quickBreaker(() => Promise.resolve());
});

/** Runs the timer once with the app's settings changed, then puts them back. */
async function withSettings(
  change: (settings: InboxRuntime['settings']) => InboxRuntime['settings'],
  timer: string,
): Promise<Awaited<ReturnType<typeof runTimer>>> {
  const runtime = inboxRuntime();
  const { settings } = runtime;
  runtime.settings = change(settings);
  try {
    return await runTimer(timer);
  } finally {
    runtime.settings = settings;
  }
}

describe('a Service Bus delivery', () => {
  const fieldsOf = (messageId: string) => ({
    consumer: 'test.consumer',
    messageId,
    deliveryCount: 1,
    subject: 'Test',
  });

  it('logs each completed outcome at its level, with the fields the workbook reads, and counts it', async () => {
    const messageId = `m-${runs + 1}`;
    const account = `adapter-${runs + 1}`;
    const processed = await deliverProbe((_m, tx) => tx.create({ id: 'balance' }), { messageId });
    const duplicate = await deliverProbe(() => undefined, {
      messageId,
      account: `adapter-${runs}`,
      deliveryCount: 1,
    });
    const mismatch = await deliverProbe(() => undefined, {
      messageId,
      body: JSON.stringify({ accountId: `adapter-${runs}`, amount: 5 }),
    });
    const alternative = await deliverProbe((_m, tx) => tx.recordAlternative('backorder'), {
      messageId: 'alt-1',
    });

    expect(processed.lines).toEqual([
      {
        level: 'information',
        message: 'Processed: marker and effect committed in one batch',
        fields: {
          ...fieldsOf(messageId),
          outcome: 'processed',
          attempts: 1,
          requestCharge: expect.any(Number) as unknown,
          durationMs: expect.any(Number) as unknown,
        },
      },
      // Which documents changed: at debug level, which host.json keeps out of Application Insights.
      {
        level: 'debug',
        message: 'Wrote',
        fields: {
          consumer: 'test.consumer',
          partitionKey: `account:${account}`,
          documents: ['create balance'],
          count: 1,
        },
      },
    ]);
    expect(processed.lines[0]?.fields.requestCharge).toBeGreaterThan(0);
    // Milliseconds since the delivery started, not since the process did.
    expect(processed.lines[0]?.fields.durationMs).toBeLessThan(60_000);
    expect(
      duplicate.lines.map(({ level, message, fields }) => [level, message, fields.outcome, fields.cause]),
    ).toEqual([
      [
        'information',
        'Duplicate: this consumer already applied this message; completed without writing',
        'duplicate',
        // A first delivery, unmarked, seconds after the marker: inside the window, so no known cause.
        'unknown',
      ],
    ]);
    // Only a duplicate's line names a cause.
    expect(processed.lines[0]?.fields).not.toHaveProperty('cause');
    expect(mismatch.lines[0]?.fields).not.toHaveProperty('cause');
    expect(mismatch.lines.map(({ level, message, fields }) => [level, message, fields.outcome])).toEqual([
      [
        'warning',
        'Duplicate MessageId with a different body: completed without applying it (producer bug?)',
        'payload_mismatch',
      ],
    ]);
    expect(alternative.lines[0]).toMatchObject({
      level: 'information',
      message: "Processed with the handler's alternative: marker and alternative committed in one batch",
      fields: { outcome: 'alternative', alternative: 'backorder' },
    });
    const consumer = { consumer: 'test.consumer' };
    expect(await sink.value(METRIC_NAMES.messages, { ...consumer, outcome: 'processed' })).toBe(1);
    expect(await sink.value(METRIC_NAMES.messages, { ...consumer, outcome: 'duplicate' })).toBe(1);
    expect(
      await sink.value(METRIC_NAMES.messages, { ...consumer, outcome: 'duplicate', cause: 'unknown' }),
    ).toBe(1);
    expect(await sink.value(METRIC_NAMES.messages, { ...consumer, cause: 'redelivery' })).toBe(0);
    expect(await sink.value(METRIC_NAMES.duration, { ...consumer, cause: 'unknown' })).toBe(0);
    expect(await sink.value(METRIC_NAMES.messages, { ...consumer, outcome: 'payload_mismatch' })).toBe(1);
    expect(await sink.value(METRIC_NAMES.duration, { ...consumer, outcome: 'processed' })).toBe(1);
    expect(await sink.value(METRIC_NAMES.requestCharge, { ...consumer, outcome: 'processed' })).toBe(1);
  });

  it('logs a poison message as an error with its reason, counts it, and names no MessageId it lacks', async () => {
    const rejected = await deliverProbe(
      () => {
        throw new PoisonMessageError('rejected-by-handler', 'closed invoice');
      },
      { messageId: 'poison-1' },
    );
    const anonymous = await deliverProbe(() => undefined, { subject: null });

    expect(rejected.error).toBeInstanceOf(PoisonMessageError);
    expect(rejected.lines).toEqual([
      {
        level: 'error',
        message: 'Poison message: nothing written; it will be dead-lettered once its deliveries run out',
        fields: {
          ...fieldsOf('poison-1'),
          outcome: 'poison',
          reason: 'rejected-by-handler',
          error: 'PoisonMessageError: closed invoice',
        },
      },
    ]);
    expect(anonymous.lines[0]?.fields).toMatchObject({
      messageId: null,
      subject: null,
      reason: 'missing-message-id',
    });
    expect(await sink.value(METRIC_NAMES.messages, { consumer: 'test.consumer', outcome: 'poison' })).toBe(2);
    // Milliseconds since each delivery started, failed ones too.
    const poisonMs = await sink.sum(METRIC_NAMES.duration, { consumer: 'test.consumer', outcome: 'poison' });
    expect(poisonMs).toBeGreaterThanOrEqual(0);
    expect(poisonMs).toBeLessThan(60_000);
  });

  it('tells a store failure from a failure of the handler, each given back', async () => {
    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });
    const transient = await deliverProbe((_m, tx) => tx.create({ id: 'balance' }), { messageId: 't-1' });
    const bug = await deliverProbe(
      () => {
        throw new TypeError('undefined is not a function');
      },
      { messageId: 'bug-1' },
    );

    expect(transient.lines.filter((line) => line.fields.outcome !== undefined)).toEqual([
      {
        level: 'warning',
        message: 'Cosmos DB failed transiently: giving the message back for redelivery',
        fields: {
          ...fieldsOf('t-1'),
          outcome: 'retried',
          error: expect.stringMatching(
            /^TransientStoreError: Cosmos DB failed the request with 503/,
          ) as unknown,
        },
      },
    ]);
    expect(bug.lines).toEqual([
      {
        level: 'error',
        message: 'Delivery failed: giving the message back for redelivery',
        fields: { ...fieldsOf('bug-1'), outcome: 'retried', error: 'TypeError: undefined is not a function' },
      },
    ]);
  });

  it('says on the last delivery that the message is about to be dead-lettered, and not before', async () => {
    const fail = (): never => {
      throw new TypeError('broken');
    };
    const ninth = await deliverProbe(fail, { messageId: 'last-1', deliveryCount: 9 });
    const tenth = await deliverProbe(fail, { messageId: 'last-1', deliveryCount: 10 });

    expect(ninth.lines.map((line) => line.message)).not.toContainEqual(
      expect.stringContaining('This was delivery'),
    );
    expect(tenth.lines.map(({ level, message }) => [level, message])).toContainEqual([
      'error',
      'This was delivery 10 of 10: Service Bus is about to move the message to the dead-letter queue',
    ]);
  });

  it('names at most ten of the documents a batch wrote, and counts them all', async () => {
    const { lines } = await deliverProbe(
      (_m, tx) => {
        for (let i = 0; i < 12; i++) tx.create({ id: `line-${i}` });
      },
      { messageId: 'many-1' },
    );

    expect(lines.at(-1)?.fields).toMatchObject({
      documents: Array.from({ length: 10 }, (_, i) => `create line-${i}`),
      count: 12,
    });
  });

  it('warns when the MessageId arrived JSON-parsed, and keys the marker by it and the payload', async () => {
    const { lines } = await deliverProbe((_m, tx) => tx.create({ id: 'balance' }), { messageId: '12345' });

    expect(lines[0]).toEqual({
      level: 'warning',
      message: expect.stringMatching(
        /^MessageId arrived JSON-parsed .*Use MessageIds that are not JSON/,
      ) as unknown,
      fields: fieldsOf('12345'),
    });
    expect(lines[1]?.fields.outcome).toBe('processed');
  });

  it('counts only consecutive store failures towards opening the breaker: a success starts again', async () => {
    inboxRuntime().breaker = quickBreaker(() => Promise.resolve(), 2);
    const create = (_m: unknown, tx: { create: (document: { id: string }) => void }): void =>
      tx.create({ id: 'b' });

    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });
    await deliverProbe(create, { messageId: 'cons-1' });
    await deliverProbe(create, { messageId: 'cons-2' });
    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });
    const afterOne = await deliverProbe(create, { messageId: 'cons-3' });
    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });
    const afterTwo = await deliverProbe(create, { messageId: 'cons-4' });

    expect(afterOne.lines.map((line) => line.message)).not.toContainEqual(
      expect.stringContaining('circuit breaker opened'),
    );
    expect(afterTwo.lines.map((line) => line.message)).toContainEqual(
      expect.stringContaining('circuit breaker opened'),
    );
  });

  it('logs the breaker opening, a delivery it held, and its closing, each once, on the deliveries that see them', async () => {
    let recovered = false;
    inboxRuntime().breaker = quickBreaker(
      () => (recovered ? Promise.resolve() : Promise.reject(new Error('still down'))),
      1,
    );
    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });

    const opening = await deliverProbe((_m, tx) => tx.create({ id: 'b' }), { messageId: 'brk-1' });
    const held = await deliverProbe((_m, tx) => tx.create({ id: 'b' }), { messageId: 'brk-2' });
    recovered = true;
    await new Promise((resolve) => setTimeout(resolve, 100)); // a probe succeeds
    const closing = await deliverProbe((_m, tx) => tx.create({ id: 'b' }), { messageId: 'brk-3' });

    const brief = (lines: Logged[]): [string, string][] =>
      lines.map(({ level, message }) => [level, message.split(':')[0] ?? '']);
    // The transition first: the breaker opened while the failure was counted.
    expect(brief(opening.lines)).toEqual([
      ['warning', 'Cosmos DB circuit breaker opened'],
      ['warning', 'Cosmos DB failed transiently'],
    ]);
    expect(opening.lines[0]?.fields).toMatchObject({ breaker: { state: 'open' } });
    expect(brief(held.lines)).toEqual([['warning', 'Held while the Cosmos DB circuit breaker was open']]);
    expect(held.lines[0]?.fields).toMatchObject({ outcome: 'retried' });
    expect(brief(closing.lines)).toEqual([
      ['information', 'Cosmos DB circuit breaker closed'],
      ['information', 'Processed'],
      ['debug', 'Wrote'],
    ]);
    expect(closing.lines[0]?.fields).toMatchObject({ breaker: { state: 'closed' } });
  });
});

describe('the purge timer', () => {
  async function expiredMarkers(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      await stack.container.items.create({
        id: `inbox-expired-${runs}-${i}`,
        partitionKey: `purge-${runs}`,
        type: MARKER_TYPE,
        expiresAtEpochSeconds: 1,
      });
    }
  }

  it('says how many it purged, and warns, with the count, when some remain for the next run', async () => {
    runs++;
    await expiredMarkers(3);
    const partial = logged(
      (
        await withSettings(
          (settings) => ({ ...settings, purge: { ...settings.purge, maxItems: 1 } }),
          'purge-expired-markers',
        )
      ).logs,
    );
    const rest = logged((await runTimer('purge-expired-markers')).logs);

    expect(partial).toEqual([
      {
        level: 'warning',
        message: 'Purged 1 expired markers; 2 remain for the next run',
        fields: expect.objectContaining({ purged: 1, expiredRemaining: 2, stoppedBy: 'item-cap' }) as unknown,
      },
    ]);
    expect(rest).toEqual([
      {
        level: 'information',
        message: 'Purged 2 expired markers',
        fields: expect.objectContaining({ purged: 2, expiredRemaining: 0, stoppedBy: 'done' }) as unknown,
      },
    ]);
    // Request units to two decimals, as the workbook shows them.
    for (const { fields } of [...partial, ...rest]) {
      expect(fields.requestCharge).toBeGreaterThan(0);
      expect(fields.requestCharge).toBeLessThan(100);
      expect(Math.round((fields.requestCharge as number) * 100)).toBe((fields.requestCharge as number) * 100);
    }
    expect(await sink.value(METRIC_NAMES.purgedMarkers)).toBe(3);
  });
});

describe('the outbox relay and sweeper', () => {
  const sent: OutboxMessage[] = [];
  let sending: (topic: string) => Promise<void> = () => Promise.resolve();
  const recording: OutboxPublisher = {
    send: async (topic, messages) => {
      await sending(topic);
      sent.push(...messages);
      return [];
    },
    close: () => Promise.resolve(),
  };
  let original: OutboxPublisher;
  beforeAll(() => {
    original = inboxRuntime().publisher;
    inboxRuntime().publisher = recording;
  });
  afterAll(() => {
    inboxRuntime().publisher = original;
  });
  beforeEach(() => {
    sent.length = 0;
    sending = () => Promise.resolve();
  });

  const refusal = (): Error =>
    Object.assign(new Error('The messaging entity could not be found.'), {
      name: 'ServiceBusError',
      code: 'MessagingEntityNotFound',
    });

  /** A committed outbox document on `topic`, `ageMs` old, and its page of changes. */
  async function committed(topic: string, ageMs = 0): Promise<Record<string, unknown>[]> {
    const account = `relay-${++runs}`;
    await processDelivery(
      testConsumer((_m, tx) => {
        tx.publish({ topic, subject: 'OrderPlaced', body: {} });
      }),
      delivery({ accountId: account, amount: 1 }, { messageId: `relay-${runs}` }),
      dependencies(stack.container, { now: () => new Date(Date.now() - ageMs) }),
    );
    return (await documentsIn(stack.container, `account:${account}`)).filter((d) => d.type === OUTBOX_TYPE);
  }

  it('logs what a page relayed, and on a retry leaves out what was marked since', async () => {
    const page = await committed('orders');

    const first = await relayChanges('outbox-relay', page);
    const retried = await relayChanges('outbox-relay', page, { retryCount: 1, maxRetryCount: 8 });

    expect(logged(first.logs)).toEqual([
      {
        level: 'information',
        message: 'Relayed 1 outbox messages',
        fields: expect.objectContaining({ changes: 1, sent: 1, marked: 1, failedTopics: [] }) as unknown,
      },
    ]);
    expect(logged(first.logs)[0]?.fields.durationMs).toBeLessThan(60_000);
    expect(logged(first.logs)[0]?.fields.requestCharge).toBeGreaterThan(0);
    expect(logged(first.logs)[0]?.fields.requestCharge).toBeLessThan(100);
    // The page as the trigger hands it again says pending; the store says dispatched.
    expect(sent).toHaveLength(1);
    expect(logged(retried.logs)).toEqual([]);
  });

  it('logs a topic that refuses as an error and goes on; a failed send is a warning and a retry', async () => {
    const refusedPage = await committed('orders');
    sending = () => Promise.reject(refusal());
    const refused = await relayChanges('outbox-relay', refusedPage);
    const failedPage = await committed('orders');
    sending = () => Promise.reject(new Error('ServiceCommunicationProblem'));
    const failed = await relayChanges('outbox-relay', failedPage, { retryCount: 2, maxRetryCount: -1 });

    expect(refused.error).toBeUndefined();
    expect(logged(refused.logs).map(({ level, message }) => [level, message.split(':')[0]])).toEqual([
      ['error', 'Topic orders refused 1 outbox messages'],
    ]);
    expect(failed.error?.message).toBe('ServiceCommunicationProblem');
    expect(logged(failed.logs).map(({ level, message }) => [level, message])).toEqual([
      ['warning', 'Sending 1 outbox messages to topic orders failed: the page will be retried'],
      // A policy of no retries (maxRetryCount -1) has none to spend.
      ['warning', 'Outbox relay failed: the change feed page will be retried'],
    ]);
    expect(logged(failed.logs)[1]?.fields).toEqual({
      changes: 1,
      retryCount: 2,
      maxRetryCount: -1,
      error: 'Error: ServiceCommunicationProblem',
    });
  });

  it('trusts a page on its first delivery (no retry context: no reads), and says when no retry is left', async () => {
    const page = await committed('orders');
    await relayChanges('outbox-relay', page);
    const sentBefore = sent.length;

    // As the host hands a page to a function without a retry policy: no retry context.
    const again = await app.invokeCosmosDB('outbox-relay', page);
    sending = () => Promise.reject(new Error('ServiceCommunicationProblem'));
    const failing = await app.invokeCosmosDB('outbox-relay', page);
    const spent = await relayChanges('outbox-relay', page, { retryCount: 0, maxRetryCount: 0 });

    // Sent again (the broker drops the copy by its MessageId); the mark finds it marked already.
    expect(sent.length - sentBefore).toBe(1);
    expect(logged(again.logs)[0]?.fields).toMatchObject({ sent: 1, marked: 0, alreadyMarked: 1 });
    expect(logged(failing.logs).at(-1)).toMatchObject({
      message: 'Outbox relay failed: the change feed page will be retried',
      fields: { retryCount: 0, maxRetryCount: 0 },
    });
    expect(logged(spent.logs).at(-1)?.message).toBe(
      'Outbox relay failed and its retries are spent: the change feed moves on, and the sweeper resends what is still pending',
    );
  });

  it('names the topics that failed among those relayed, and logs what it set aside as unsendable', async () => {
    const orders = await committed('orders');
    const audit = await committed('audit');
    const broken = {
      id: `outbox-broken-${runs}`,
      partitionKey: `account:relay-${runs}`,
      type: OUTBOX_TYPE,
      status: 'pending',
      pendingSinceEpochSeconds: 0,
      message: JSON.stringify({ topic: 'orders' }),
    };
    await stack.container.items.create(broken);
    sending = (topic) => (topic === 'audit' ? Promise.reject(refusal()) : Promise.resolve());

    const result = await relayChanges('outbox-relay', [...orders, ...audit, broken]);

    expect(result.error).toBeUndefined();
    expect(logged(result.logs).map(({ level, message }) => [level, message.split(' (')[0]])).toEqual([
      ['error', '1 outbox documents set aside as unsendable, kept for an operator'],
      ['error', expect.stringMatching(/^Topic audit refused 1 outbox messages/) as unknown],
      ['information', 'Relayed 1 outbox messages'],
    ]);
    expect(logged(result.logs)[0]?.fields).toEqual({
      unsendable: 1,
      documents: [expect.objectContaining({ id: broken.id, reason: 'unreadable' }) as unknown],
    });
    expect(logged(result.logs)[2]?.fields).toMatchObject({ failedTopics: ['audit'], unsendable: 1 });
  });

  it('logs what the sweeper resent, what waits, and what is set aside, and fails the run for a topic that failed', async () => {
    await committed('orders', 3_600_000);
    const resentRun = await runTimer('outbox-sweeper');
    const quietRun = await runTimer('outbox-sweeper');
    const [resent, quiet] = [logged(resentRun.logs), logged(quietRun.logs)];
    expect([resentRun.error, quietRun.error]).toEqual([undefined, undefined]);
    await committed('audit', 3_600_000);
    sending = () => Promise.reject(refusal());
    const refusedRun = await runTimer('outbox-sweeper');

    // The broken document the relay set aside waits for an operator, and every run says so.
    expect(resent.map(({ level, message }) => [level, message])).toEqual([
      [
        'error',
        'Outbox: 1 messages are set aside as unsendable and wait for an operator (npm run outbox -- list --unsendable)',
      ],
      ['warning', 'Resent 1 outbox messages pending longer than OUTBOX_SWEEP_AGE'],
    ]);
    expect(resent[0]?.fields).toEqual({ unsendableKept: 1 });
    expect(resent[1]?.fields).toMatchObject({ sent: 1, capped: false });
    const pendingThen = quiet[1]?.fields.pending as number;
    expect(quiet.slice(1)).toEqual([
      {
        level: 'information',
        message: `Outbox: ${pendingThen} pending`,
        fields: expect.objectContaining({ sent: 0 }) as unknown,
      },
    ]);
    expect(refusedRun.error?.name).toBe('ServiceBusError');
    expect(logged(refusedRun.logs).map(({ level, message }) => [level, message.split(' (')[0]])).toEqual([
      [
        'error',
        'Outbox sweeper: topic audit refused its messages; they wait, pending, for the next run, and the other topics go on',
      ],
      ['error', 'Outbox: 1 messages are set aside as unsendable and wait for an operator'],
      ['information', `Outbox: ${pendingThen + 1} pending`],
    ]);
  });

  it('says when more remain than one run resends, when a topic failed, and when the run could not finish', async () => {
    await committed('orders', 3_600_000);
    await committed('orders', 3_600_000);
    const capped = logged(
      (
        await withSettings(
          (settings) => ({ ...settings, outbox: { ...settings.outbox, sweepMaxItems: 1 } }),
          'outbox-sweeper',
        )
      ).logs,
    );
    sending = () => Promise.reject(new Error('ServiceCommunicationProblem'));
    const failedRun = await runTimer('outbox-sweeper');
    sending = () => Promise.resolve();
    // Its send goes through; marking the document dispatched fails.
    stack.server.faults.inject({ kind: 'unavailable', on: 'write', times: 5 });
    const stoppedRun = await runTimer('outbox-sweeper');
    stack.server.faults.clear();

    expect(capped.map((line) => line.message)).toContainEqual(
      'Resent 1 outbox messages pending longer than OUTBOX_SWEEP_AGE; more remain for the next run',
    );
    expect(failedRun.error?.message).toBe('ServiceCommunicationProblem');
    expect(logged(failedRun.logs).map((line) => line.message)).toContainEqual(
      expect.stringMatching(/^Outbox sweeper: topic orders failed its messages;/),
    );
    expect(stoppedRun.error).toBeInstanceOf(Error);
    expect(logged(stoppedRun.logs).at(-1)).toMatchObject({
      level: 'warning',
      message: expect.stringMatching(
        /^Outbox sweeper could not finish: \d+ messages wait, pending, for the next run$/,
      ) as unknown,
      fields: { error: expect.stringMatching(/503|ServiceUnavailable|unavailable/i) as unknown },
    });
  });
});
