import type { ServiceBusSender } from '@azure/service-bus';
import { RETRY_COPIES } from '@idempotent-consumers/devkit';
import {
  type Delivery,
  METRIC_NAMES,
  RETRY_PROPERTIES,
  RETRY_SUBJECT,
} from '@idempotent-consumers/inbox/internal';
import {
  dependencyFailures,
  FunctionsHost,
  type HostFaults,
  loadFunctionApp,
  MetricsSink,
  type PeerFixture,
  scaledClock,
  startPeer,
  useLocalStack,
} from '@idempotent-consumers/local-azure';

import { inboxRuntime } from '../../src/app';
import {
  bystanderSaw,
  DELAYED_RETRY_PROBE,
  onCall,
  RETRY_TOPIC,
  RETRY_TOPOLOGY,
} from '../support/delayedRetryProbe';

/**
 * Delayed retry (issue 25, packages/inbox/src/delayedRetry.ts) as Azure runs it: the host model receives
 * from the local Service Bus peer and invokes the probe consumer through the worker path; the app's
 * runtime schedules each copy with its own @azure/service-bus publisher over AMQP, and the peer
 * holds the copy until its ScheduledEnqueueTimeUtc on its clock, which runs SCALE times faster than
 * the wall clock (the runtime reads the same clock). The probe's policy: 2 failed deliveries, then
 * a copy 30 s later, then one 45 s later (60 s capped), then dead-letter (maxDeliveryCount 3).
 */
const SCALE = 10;
/** Shorter than the first delay: an original whose completion is lost comes back before its copy. */
const LOCK_MS = 20_000;
const MAX_DELIVERY_COUNT = 3;
/** runtime.random is fixed, so each delay is its base × 1.05 (jitter up to 10 %). */
const JITTER = 1.05;

const stack = useLocalStack();
const clock = scaledClock(SCALE);
const faults: HostFaults = {};
let fixture: PeerFixture;
let sender: ServiceBusSender;
let host: FunctionsHost;
let sink: MetricsSink;

beforeAll(async () => {
  fixture = await startPeer({
    retryCopies: RETRY_COPIES,
    topology: RETRY_TOPOLOGY,
    clock,
    lockDurationMs: LOCK_MS,
    maxDeliveryCount: MAX_DELIVERY_COUNT,
  });
  Object.assign(process.env, {
    ServiceBusConnection: fixture.peer.connectionString,
    SERVICEBUS_MAX_DELIVERY_COUNT: String(MAX_DELIVERY_COUNT),
    // One Cosmos DB failure opens the breaker: a handler's failure taken for one would show.
    BREAKER_FAILURE_THRESHOLD: '1',
  });
  sink = MetricsSink.register(); // before the runtime builds its instruments
  const app = await loadFunctionApp(DELAYED_RETRY_PROBE);
  const runtime = inboxRuntime();
  runtime.now = () => new Date(clock.now());
  runtime.random = () => 0.5;
  sender = fixture.client.createSender(RETRY_TOPIC);
  host = new FunctionsHost(fixture.peer.broker, app.serviceBus, { clock, faults });
  host.start();
});
afterAll(async () => {
  await host.stop();
  await inboxRuntime().publisher.close();
  await sender.close();
  await fixture.stop();
  await sink.stop();
  delete process.env.ServiceBusConnection;
  delete process.env.SERVICEBUS_MAX_DELIVERY_COUNT;
  delete process.env.BREAKER_FAILURE_THRESHOLD;
});
afterEach(() => {
  onCall(() => Promise.resolve());
  delete faults.completionLost;
});

interface Call {
  messageId: string | undefined;
  subject: string | undefined;
  deliveryCount: number;
  copy: string | undefined;
  attempt: number | undefined;
  enqueuedAt: number | undefined;
  /** Model ms when the handler called its dependency. */
  at: number;
}

/** Records each call of the probe's dependency, then fails the calls `fail` says to fail. */
function dependency(fail: (call: Call) => boolean): Call[] {
  const calls: Call[] = [];
  onCall((delivery: Delivery) => {
    const call = {
      messageId: delivery.messageId,
      subject: delivery.subject,
      deliveryCount: delivery.deliveryCount,
      copy: delivery.retry?.copyMessageId,
      attempt: delivery.retry?.attempt,
      enqueuedAt: delivery.enqueuedTimeUtc?.getTime(),
      at: clock.now(),
    };
    calls.push(call);
    return fail(call) ? Promise.reject(new Error('the pricing service timed out')) : Promise.resolve();
  });
  return calls;
}

let sent = 0;
/** Sends a payment; `extra` adds top-level body properties (which the host lays over the metadata). */
async function send(extra: Record<string, unknown> = {}): Promise<string> {
  const messageId = `payment-${++sent}-${Date.now()}`;
  await sender.sendMessages({
    messageId,
    subject: 'PaymentReceived',
    contentType: 'application/json',
    body: { accountId: `account-${sent}`, amount: 5, ...extra },
  });
  return messageId;
}

/**
 * Waits until `done` holds. Not a timing assert: the limit only turns a state that never comes into
 * a failure that says what came instead.
 */
async function until(done: () => boolean | Promise<boolean>, what: () => unknown): Promise<void> {
  const giveUp = Date.now() + 25_000; // inside the test's 30 s, so that a state that never comes says what came
  while (!(await done())) {
    if (Date.now() > giveUp) throw new Error(`Gave up waiting; saw ${JSON.stringify(what(), null, 1)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function effectsOf(messageId: string): Promise<{ messageId: string; subject: string; copy: string }[]> {
  for (;;) {
    try {
      const { resources } = await stack.container.items
        .query({
          query: "SELECT c.messageId, c.subject, c.copy FROM c WHERE c.type = 'effect' AND c.messageId = @id",
          parameters: [{ name: '@id', value: messageId }],
        })
        .fetchAll();
      return resources as { messageId: string; subject: string; copy: string }[];
    } catch (error) {
      // A dependency case below throttles every query while the handler makes its own: read again.
      if ((error as { code?: unknown }).code !== 429) throw error;
    }
  }
}

/** The probe's deliveries of the message and its copies, in the order the host settled them. */
const settled = (messageId: string) =>
  host.deliveries.filter(
    (d) =>
      d.function === 'delayedRetryProbe' &&
      (d.messageId === messageId || d.messageId?.startsWith(`${messageId}:retry:`)),
  );

it('schedules copies on its bounded exponential schedule, for its own subscription only, and applies the effect once as the original', async () => {
  // The dependency is slow for the original's two deliveries and the first copy's: the second copy succeeds.
  const calls = dependency((call) => call.attempt !== 2);
  const scheduled = await sink.value(METRIC_NAMES.delayedRetries, { result: 'scheduled' });
  const messageId = await send();

  await until(
    async () => (await effectsOf(messageId)).length > 0,
    () => settled(messageId),
  );

  expect(calls.map(({ copy, deliveryCount }) => [copy ?? null, deliveryCount])).toEqual([
    [null, 1],
    [null, 2],
    [`${messageId}:retry:test.delayed-retry:1`, 1],
    [`${messageId}:retry:test.delayed-retry:1`, 2],
    [`${messageId}:retry:test.delayed-retry:2`, 1],
  ]);
  // Every copy is seen as the original: its MessageId and Subject, and which copy it is.
  expect(new Set(calls.map((call) => call.messageId))).toEqual(new Set([messageId]));
  expect(new Set(calls.map((call) => call.subject))).toEqual(new Set(['PaymentReceived']));
  expect(calls.map((call) => call.attempt ?? 0)).toEqual([0, 0, 1, 1, 2]);
  // The schedule: copy 1 waits 30 s × 1.05 after the delivery that scheduled it, copy 2 45 s × 1.05
  // (30 s × 2 = 60 s, capped at maxDelaySeconds). The peer never enqueues a copy early; each is taken
  // within half its delay (a tolerance the scaled clock's timers keep with room to spare).
  for (const [scheduling, copy, delayMs] of [
    [calls[1]!, calls[2]!, 30_000 * JITTER],
    [calls[3]!, calls[4]!, 45_000 * JITTER],
  ] as const) {
    expect(copy.enqueuedAt! - scheduling.at).toBeGreaterThanOrEqual(delayMs);
    expect(copy.at).toBeGreaterThanOrEqual(copy.enqueuedAt!);
    expect(copy.at - scheduling.at).toBeLessThan(delayMs * 1.5);
  }
  expect(await effectsOf(messageId)).toEqual([
    { messageId, subject: 'PaymentReceived', copy: `${messageId}:retry:test.delayed-retry:2` },
  ]);
  // The bystander takes the same subject: it got the original, never a copy.
  expect(bystanderSaw.filter((saw) => saw.messageId?.startsWith(messageId))).toEqual([
    { messageId, subject: 'PaymentReceived' },
  ]);
  expect(settled(messageId).map((d) => [d.messageId, d.settlement])).toEqual([
    [messageId, 'abandoned'],
    [messageId, 'completed'],
    [`${messageId}:retry:test.delayed-retry:1`, 'abandoned'],
    [`${messageId}:retry:test.delayed-retry:1`, 'completed'],
    [`${messageId}:retry:test.delayed-retry:2`, 'completed'],
  ]);
  expect((await sink.value(METRIC_NAMES.delayedRetries, { result: 'scheduled' })) - scheduled).toBe(2);
});

it('loses no effect and applies none twice when the completion is lost after the copy was scheduled: the redelivery applies it, and the copy is a duplicate', async () => {
  // Fails the original's first two deliveries: the second schedules copy 1 (31.5 s later), and its
  // completion is lost. The lock runs out first (20 s): the original comes back and succeeds.
  const calls = dependency((call) => {
    faults.completionLost = call.copy === undefined && call.deliveryCount === 2 ? 1 : 0;
    return call.copy === undefined && call.deliveryCount <= 2;
  });
  const messageId = await send();

  await until(
    () => settled(messageId).length === 4,
    () => settled(messageId),
  );

  expect(settled(messageId).map((d) => [d.messageId, d.settlement, d.outcome ?? null])).toEqual([
    [messageId, 'abandoned', 'retried'],
    [messageId, 'completion-lost', 'retried'],
    [messageId, 'completed', 'processed'],
    // The copy scheduled before the lost completion found the marker the original wrote.
    [`${messageId}:retry:test.delayed-retry:1`, 'completed', 'duplicate'],
  ]);
  // The copy's handler ran (its dependency answered); its batch met the marker and committed nothing.
  expect(calls.map((call) => call.copy ?? null)).toEqual([
    null,
    null,
    null,
    `${messageId}:retry:test.delayed-retry:1`,
  ]);
  expect(await effectsOf(messageId)).toHaveLength(1);
});

it('schedules a copy once when a lost completion makes the redelivery fail and schedule it again: duplicate detection drops the second', async () => {
  // As above, but the original fails again when it comes back, and schedules copy 1 again, under
  // the same MessageId.
  const calls = dependency((call) => {
    faults.completionLost = call.copy === undefined && call.deliveryCount === 2 ? 1 : 0;
    return call.copy === undefined;
  });
  const dropped = fixture.peer.broker.topic(RETRY_TOPIC).stats.droppedAsDuplicate;
  const messageId = await send();

  await until(
    () => settled(messageId).length === 4,
    () => settled(messageId),
  );

  expect(settled(messageId).map((d) => [d.messageId, d.settlement])).toEqual([
    [messageId, 'abandoned'],
    [messageId, 'completion-lost'],
    [messageId, 'completed'],
    [`${messageId}:retry:test.delayed-retry:1`, 'completed'],
  ]);
  expect(fixture.peer.broker.topic(RETRY_TOPIC).stats.droppedAsDuplicate - dropped).toBe(1);
  expect(calls.filter((call) => call.copy !== undefined)).toHaveLength(1);
  expect(await effectsOf(messageId)).toHaveLength(1);
});

it('dead-letters the last copy once its deliveries run out, with the failure note of the original', async () => {
  dependency(() => true);
  const spent = await sink.value(METRIC_NAMES.delayedRetries, { result: 'spent' });
  const messageId = await send();
  const deadLetters = fixture.peer.broker.subscription(RETRY_TOPIC, 'test.delayed-retry').deadLetterQueue;
  const before = deadLetters.activeCount;

  await until(
    () => deadLetters.activeCount > before,
    () => settled(messageId),
  );

  expect(settled(messageId).map((d) => [d.messageId, d.deliveryCount, d.settlement])).toEqual([
    [messageId, 1, 'abandoned'],
    [messageId, 2, 'completed'],
    [`${messageId}:retry:test.delayed-retry:1`, 1, 'abandoned'],
    [`${messageId}:retry:test.delayed-retry:1`, 2, 'completed'],
    [`${messageId}:retry:test.delayed-retry:2`, 1, 'abandoned'],
    [`${messageId}:retry:test.delayed-retry:2`, 2, 'abandoned'],
    [`${messageId}:retry:test.delayed-retry:2`, 3, 'abandoned'],
  ]);
  const receiver = fixture.client.createReceiver(RETRY_TOPIC, 'test.delayed-retry', {
    subQueueType: 'deadLetter',
  });
  try {
    const dead = (await receiver.peekMessages(50)).find(
      (m) => m.messageId === `${messageId}:retry:test.delayed-retry:2`,
    );
    expect(dead).toMatchObject({
      subject: RETRY_SUBJECT,
      deadLetterReason: 'MaxDeliveryCountExceeded',
      applicationProperties: {
        [RETRY_PROPERTIES.of]: messageId,
        [RETRY_PROPERTIES.for]: 'test.delayed-retry',
        [RETRY_PROPERTIES.attempt]: 2,
        [RETRY_PROPERTIES.subject]: 'PaymentReceived',
      },
    });
  } finally {
    await receiver.close();
  }
  // The note npm run dead-letters reads, keyed by the original MessageId, as its marker would be.
  const { resources: notes } = await stack.container.items
    .query({
      query: "SELECT * FROM c WHERE c.type = 'inbox-failure-note' AND c.messageId = @id",
      parameters: [{ name: '@id', value: messageId }],
    })
    .fetchAll();
  expect(notes).toMatchObject([{ consumer: 'test.delayed-retry', reason: 'failed', deliveryCount: 3 }]);
  expect(await effectsOf(messageId)).toEqual([]);
  expect((await sink.value(METRIC_NAMES.delayedRetries, { result: 'spent' })) - spent).toBe(2);
});

/**
 * The host lays a JSON body's top-level properties over the trigger metadata (packages/local-azure/src/host/toRpcServiceBus.ts),
 * so a body with `subject` and `label` hides the broker's Subject, `inbox.retry` included. A copy is
 * known by what a body cannot hide: its family properties and its MessageId.
 */
describe('a body with top-level subject and label', () => {
  const shadowing = { subject: 'from the body', label: 'from the body too' };

  it('applies the effect once when the original, whose completion was lost after scheduling, and its copy both come', async () => {
    const calls = dependency((call) => {
      faults.completionLost = call.copy === undefined && call.deliveryCount === 2 ? 1 : 0;
      return call.copy === undefined && call.deliveryCount <= 2;
    });
    const messageId = await send(shadowing);

    await until(
      () => settled(messageId).length === 4,
      () => settled(messageId),
    );

    expect(settled(messageId).map((d) => [d.messageId, d.settlement, d.outcome ?? null])).toEqual([
      [messageId, 'abandoned', 'retried'],
      [messageId, 'completion-lost', 'retried'],
      [messageId, 'completed', 'processed'],
      [`${messageId}:retry:test.delayed-retry:1`, 'completed', 'duplicate'],
    ]);
    // The copy was seen as the original: its MessageId, and which copy it is.
    expect(calls.map((call) => [call.messageId, call.copy ?? null])).toEqual([
      [messageId, null],
      [messageId, null],
      [messageId, null],
      [messageId, `${messageId}:retry:test.delayed-retry:1`],
    ]);
    expect(await effectsOf(messageId)).toHaveLength(1);
  });

  it('ends the chain in the dead-letter queue after the last copy, never scheduling a copy of a copy', async () => {
    dependency(() => true);
    const messageId = await send(shadowing);
    const deadLetters = fixture.peer.broker.subscription(RETRY_TOPIC, 'test.delayed-retry').deadLetterQueue;
    const before = deadLetters.activeCount;

    await until(
      () => deadLetters.activeCount > before,
      () => settled(messageId),
    );

    expect(settled(messageId).map((d) => [d.messageId, d.deliveryCount, d.settlement])).toEqual([
      [messageId, 1, 'abandoned'],
      [messageId, 2, 'completed'],
      [`${messageId}:retry:test.delayed-retry:1`, 1, 'abandoned'],
      [`${messageId}:retry:test.delayed-retry:1`, 2, 'completed'],
      [`${messageId}:retry:test.delayed-retry:2`, 1, 'abandoned'],
      [`${messageId}:retry:test.delayed-retry:2`, 2, 'abandoned'],
      [`${messageId}:retry:test.delayed-retry:2`, 3, 'abandoned'],
    ]);
    expect(await effectsOf(messageId)).toEqual([]);
  });
});

/**
 * Where a failure comes from decides, never its shape (DESIGN "Where a failure comes from"): what
 * the handler's own dependencies throw carries a `code` as Cosmos DB's errors do, and is the
 * handler's all the same. So delayed retry takes it, the breaker does not count it (one Cosmos DB
 * failure would open it here), and the log does not blame Cosmos DB.
 */
describe("a failure of the handler's own dependency, whatever code it carries", () => {
  it.each(dependencyFailures(stack))("is delayed-retried, not the breaker's: %s", async (_case, call) => {
    const thrown = (await call().catch((error: unknown) => error)) as Error;
    // The original fails with the dependency's error; its copy succeeds.
    onCall(async (delivery: Delivery) => {
      if (delivery.retry === undefined) await call();
    });
    const messageId = await send();

    await until(
      async () => (await effectsOf(messageId)).length > 0,
      () => settled(messageId),
    );

    expect(settled(messageId).map((d) => [d.messageId, d.settlement, d.outcome ?? null])).toEqual([
      [messageId, 'abandoned', 'retried'],
      [messageId, 'completed', 'retried'],
      [`${messageId}:retry:test.delayed-retry:1`, 'completed', 'processed'],
    ]);
    // Given back as it was thrown, not as a Cosmos DB failure. (A DOMException made outside jest's
    // sandbox is no Error inside it, so the worker path names it inside an Error's message.)
    const { error } = settled(messageId)[0]!;
    expect(error).toContain(`${thrown.name}: `);
    expect(error).not.toMatch(/TransientStoreError|PoisonMessageError|Cosmos DB/);
    expect(inboxRuntime().breaker.state).toBe('closed');
  });
});
