import { isTopicRefusal, loadSettings, type OutboxMessage } from '@idempotent-consumers/inbox/internal';
import { ORDERS, PAYMENTS, receive, TOPIC, usePeer } from '@idempotent-consumers/local-azure';

import { serviceBusPublisher } from '../../src/serviceBusPublisher';

/**
 * The outbox relay's publisher (src/serviceBusPublisher.ts), the real @azure/service-bus client,
 * against the local AMQP peer: what reaches a subscription is what the relay meant to send.
 */
const fixture = usePeer();

const message = (messageId: string, subject: string, body: unknown): OutboxMessage => ({
  messageId,
  topic: TOPIC,
  subject,
  body,
  contentType: 'application/json',
  correlationId: 'conversation-1',
  applicationProperties: { origin: 'inventory.stock-reserver', attempt: 1 },
});

function publisher(): ReturnType<typeof serviceBusPublisher> {
  const settings = loadSettings({
    COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/',
    ServiceBusConnection: fixture.peer.connectionString,
  });
  return serviceBusPublisher(settings);
}

describe('the outbox publisher on @azure/service-bus', () => {
  it('sends a batch with the MessageId, Subject, CorrelationId, properties and the JSON body', async () => {
    const relay = publisher();
    await relay.send(TOPIC, [
      message('a1', 'OrderCreated', { orderId: 'O-1', quantity: 2 }),
      message('a2', 'PaymentReceived', { paymentId: 'P-1' }),
      message('a3', 'OrderCreated', { orderId: 'O-2', quantity: 1 }),
    ]);
    await relay.close();
    const orders = await receive(fixture.receiver(ORDERS), 2);
    const payments = await receive(fixture.receiver(PAYMENTS), 1);

    expect(orders.map((m) => m.messageId)).toEqual(['a1', 'a3']);
    expect(orders[0]).toMatchObject({
      subject: 'OrderCreated',
      contentType: 'application/json',
      correlationId: 'conversation-1',
      applicationProperties: { origin: 'inventory.stock-reserver', attempt: 1 },
    });
    // The body travels as JSON text in a data section, as every producer of the template sends it.
    const body = orders[0]?.body as unknown;
    expect(Buffer.isBuffer(body) ? (JSON.parse(body.toString('utf8')) as unknown) : body).toEqual({
      orderId: 'O-1',
      quantity: 2,
    });
    expect(payments.map((m) => m.messageId)).toEqual(['a2']);
  });

  it('sends a resend with the same MessageId, which duplicate detection drops', async () => {
    const relay = publisher();
    const first = message('dup-1', 'OrderCreated', { orderId: 'O-3', quantity: 1 });
    await relay.send(TOPIC, [first]);
    await relay.send(TOPIC, [first]);
    await relay.close();

    expect(fixture.peer.broker.topic(TOPIC).stats).toMatchObject({ accepted: 1, droppedAsDuplicate: 1 });
  });

  it('splits what does not fit one batch into several sends, in order', async () => {
    const relay = publisher();
    // About 200 KB each: a Standard namespace's 256 KB batch takes one at a time.
    const big = Array.from({ length: 3 }, (_, i) =>
      message(`big-${i}`, 'OrderCreated', { orderId: `O-big-${i}`, padding: 'x'.repeat(200_000) }),
    );
    await relay.send(TOPIC, big);
    await relay.close();
    const received = await receive(fixture.receiver(ORDERS), 3);

    expect(received.map((m) => m.messageId)).toEqual(['big-0', 'big-1', 'big-2']);
  });

  it('fails a send to a topic Service Bus does not have with an error the relay takes for a refusal', async () => {
    const relay = publisher();
    const error = await relay
      .send('retired-events', [message('gone-1', 'OrderCreated', {})])
      .catch((caught: unknown) => caught);
    await relay.close();

    expect(error).toMatchObject({ name: 'ServiceBusError', code: 'MessagingEntityNotFound' });
    expect(isTopicRefusal(error)).toBe(true);
  });

  it('says which setting is missing when it has neither a namespace nor a local connection string', async () => {
    const relay = serviceBusPublisher(
      loadSettings({ COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/' }),
    );

    await expect(relay.send(TOPIC, [message('x', 'OrderCreated', {})])).rejects.toThrow(
      /ServiceBusConnection__fullyQualifiedNamespace is not set/,
    );
  });
});
