import {
  loadSettings,
  METRIC_NAMES,
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutboxPublisher,
  processDelivery,
} from '@idempotent-consumers/inbox/internal';
import { delivery, dependencies, documentsIn, testConsumer } from '@idempotent-consumers/inbox/testing';
import {
  MetricsSink,
  ORDERS,
  type PeerFixture,
  receive,
  startPeer,
  TOPIC,
  useLocalStack,
} from '@idempotent-consumers/local-azure';

import { inboxRuntime } from '../../src/app';
import { serviceBusPublisher } from '../../src/serviceBusPublisher';
import { relayChanges, runTimer } from '../support/deliveries';

/**
 * One broken topic does not hold the others: the outbox relay and sweeper functions through the
 * worker path, sending with the app's publisher (the real @azure/service-bus client) to the local
 * Service Bus peer, which answers a send to a topic it does not have as Service Bus does
 * (MessagingEntityNotFound): a topic deleted, or one the app lost its Data Sender role on.
 */
const stack = useLocalStack();
const RETIRED = 'retired-events';
let peer: PeerFixture;
let sink: MetricsSink;
let original: OutboxPublisher;

beforeAll(async () => {
  sink = MetricsSink.register(); // before the app's instruments exist
  peer = await startPeer();
  const runtime = inboxRuntime();
  original = runtime.publisher;
  runtime.publisher = serviceBusPublisher(
    loadSettings({ ...process.env, ServiceBusConnection: peer.peer.connectionString }),
  );
});
afterAll(async () => {
  const runtime = inboxRuntime();
  await runtime.publisher.close();
  runtime.publisher = original;
  await peer.stop();
  await sink.stop();
});

/** Stages `count` messages to `topic` (1 to 99 per delivery) in the account's partition, committed `ago` ms back. */
async function staged(
  account: string,
  topic: string,
  subject: string,
  count: number,
  ago = 0,
): Promise<void> {
  const publishing = testConsumer((_message, tx) => {
    for (let index = 0; index < count; index++)
      tx.publish({ topic, subject, name: `n${index}`, body: { account, index } });
  });
  await processDelivery(
    publishing,
    delivery({ accountId: account, amount: 1 }, { messageId: `${account}-${topic}` }),
    dependencies(stack.container, { now: () => new Date(Date.now() - ago) }),
  );
}

/** The body as the relay sends it: JSON text in a data section. */
const bodyOf = (message: { body: unknown }): { account?: string } =>
  JSON.parse(
    Buffer.isBuffer(message.body) ? message.body.toString('utf8') : JSON.stringify(message.body),
  ) as {
    account?: string;
  };

const outboxOf = async (account: string): Promise<OutboxDocument[]> =>
  (await documentsIn(stack.container, `account:${account}`)).filter(
    (d) => d.type === OUTBOX_TYPE,
  ) as OutboxDocument[];

describe('a topic that refuses its messages', () => {
  it('costs the relay only its own documents: the page goes on (no retry), the other topic is sent', async () => {
    await staged('relay-a', RETIRED, 'Retired', 2);
    await staged('relay-a2', TOPIC, 'OrderCreated', 1);
    const page = [
      ...(await documentsIn(stack.container, 'account:relay-a')),
      ...(await documentsIn(stack.container, 'account:relay-a2')),
    ];

    const result = await relayChanges('outbox-relay', page);
    const received = await receive(peer.client.createReceiver(TOPIC, ORDERS), 1);
    const logs = result.logs.map((line) => line.text).join('\n');

    expect(result.error).toBeUndefined();
    expect(received.map((m) => [m.subject, bodyOf(m).account])).toEqual([['OrderCreated', 'relay-a2']]);
    expect((await outboxOf('relay-a2')).map((d) => d.status)).toEqual(['dispatched']);
    expect((await outboxOf('relay-a')).map((d) => d.status)).toEqual(['pending', 'pending']);
    expect(logs).toContain(`Topic ${RETIRED} refused 2 outbox messages: left pending for the sweeper`);
    expect(logs).toContain('ServiceBusError (MessagingEntityNotFound)');
    expect(await sink.value(METRIC_NAMES.outboxSendFailures, { topic: RETIRED, source: 'relay' })).toBe(1);
  });

  it('costs the sweeper only its own documents: 150 older ones do not stand in front of another topic', async () => {
    const hour = 3_600_000;
    // More than a page of the sweeper's query, all older than the other topic's message.
    await staged('sweep-a', RETIRED, 'Retired', 75, 2 * hour);
    await staged('sweep-b', RETIRED, 'Retired', 75, 2 * hour);
    await staged('sweep-c', TOPIC, 'OrderCreated', 1, hour);

    const run = await runTimer('outbox-sweeper');
    const received = await receive(peer.client.createReceiver(TOPIC, ORDERS), 1);
    const logs = run.logs.map((line) => line.text).join('\n');

    expect(received.map((m) => bodyOf(m).account)).toEqual(['sweep-c']);
    expect((await outboxOf('sweep-c')).map((d) => d.status)).toEqual(['dispatched']);
    expect((await outboxOf('sweep-a')).every((d) => d.status === 'pending')).toBe(true);
    expect(logs).toContain(`Outbox sweeper: topic ${RETIRED} refused its messages`);
    expect(logs).toMatch(/Resent 1 outbox messages/);
    // The run still fails, so that the function's failures show the topic's trouble too.
    expect(run.error?.message).toContain(`'${RETIRED}' could not be found`);
    expect(logs).toContain('ServiceBusError (MessagingEntityNotFound)');
    expect(await sink.value(METRIC_NAMES.outboxSendFailures, { topic: RETIRED, source: 'sweeper' })).toBe(1);
  });
});
