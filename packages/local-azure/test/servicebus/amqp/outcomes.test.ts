import { once } from 'node:events';

import type { Delivery, Receiver } from 'rhea';

import type { Entity } from '../../../src/servicebus/broker';
import { PAYMENTS, peekAll, receive, TOPIC, usePeer } from '../../../src/testing/peer';
import { connectRhea, type RheaClient } from './rheaClient';

/**
 * The outcome a receiver settles a delivery with, as the peer applies it, sent by a plain AMQP
 * client (rhea) since each SDK sends only some of them:
 *   released                       the receiver never had the message (the .NET client releases what
 *                                  arrives on credit left after a receive timed out): available
 *                                  again, its delivery not counted (AMQP 1.0 §3.4.4; Service Bus
 *                                  does not count it)
 *   modified                       abandon, counted, whether delivery-failed is set or not: both
 *                                  SDKs' abandonMessage send modified without delivery-failed, and
 *                                  Service Bus counts an abandon
 *   modified undeliverable-here    defer, not counted
 *   rejected                       dead-letter
 */
const fixture = usePeer({ maxDeliveryCount: 3 });
let client: RheaClient;
afterEach(async () => {
  await client?.close();
});

const entity = (): Entity => fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity;

/** The payment, sent, and a rhea client's peek-lock receiver on its subscription, with no credit yet. */
async function paymentReceiver(): Promise<Receiver> {
  client = await connectRhea(fixture.peer);
  const receiver = client.receiver(`${TOPIC}/Subscriptions/${PAYMENTS}`);
  await once(receiver, 'receiver_open');
  await fixture.client.createSender(TOPIC).sendMessages({
    body: { paymentId: 'PAY-1' },
    messageId: 'payment-PAY-1',
    subject: 'PaymentReceived',
  });
  return receiver;
}

/** The next delivery, on one more unit of credit. */
async function next(receiver: Receiver): Promise<Delivery> {
  const delivered = client.next(receiver);
  receiver.add_credit(1);
  return (await delivered).delivery;
}

/** Settles with `outcome` and waits for the peer to settle in turn. */
async function settle(delivery: Delivery, outcome: (delivery: Delivery) => void): Promise<void> {
  const settled = once(delivery.link, 'settled');
  outcome(delivery);
  await settled;
}

it('released: the message is available again at once, its delivery not counted', async () => {
  const receiver = await paymentReceiver();

  await settle(await next(receiver), (d) => d.release());
  const [peeked] = await peekAll(fixture.receiver(PAYMENTS));
  const [again] = await receive(fixture.receiver(PAYMENTS), 1);

  expect(peeked?.deliveryCount).toBe(0);
  expect(again).toMatchObject({ messageId: 'payment-PAY-1', deliveryCount: 0 });
});

it('released as often as the maximum delivery count: still not counted, not dead-lettered', async () => {
  const receiver = await paymentReceiver();

  for (let time = 0; time < 3; time++) await settle(await next(receiver), (d) => d.release());
  const peeked = await peekAll(fixture.receiver(PAYMENTS));
  const deadLettered = await peekAll(fixture.receiver(PAYMENTS, true));

  expect(peeked.map((m) => m.deliveryCount)).toEqual([0]);
  expect(deadLettered).toEqual([]);
});

it.each([
  ['with delivery-failed', { delivery_failed: true }],
  ['without delivery-failed (the SDKs’ abandon)', {}],
])('modified %s: abandoned, its delivery counted', async (_, params) => {
  const receiver = await paymentReceiver();

  await settle(await next(receiver), (d) => d.modified(params));
  const [peeked] = await peekAll(fixture.receiver(PAYMENTS));

  expect(peeked?.deliveryCount).toBe(1);
});

it('modified undeliverable-here: deferred, not counted', async () => {
  const receiver = await paymentReceiver();

  await settle(await next(receiver), (d) => d.modified({ undeliverable_here: true }));
  const [peeked] = await peekAll(fixture.receiver(PAYMENTS));

  expect(entity().deferredCount).toBe(1);
  expect(peeked?.deliveryCount).toBe(0);
});

it('rejected: dead-lettered', async () => {
  const receiver = await paymentReceiver();

  await settle(await next(receiver), (d) =>
    d.reject({ condition: 'amqp:internal-error', description: 'cannot' }),
  );
  const deadLettered = await peekAll(fixture.receiver(PAYMENTS, true));

  expect(deadLettered.map((m) => m.messageId)).toEqual(['payment-PAY-1']);
  expect(entity().activeCount).toBe(0);
});
