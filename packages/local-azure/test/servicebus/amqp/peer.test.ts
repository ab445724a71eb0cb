import { once } from 'node:events';

import { AmqpAnnotatedMessage } from '@azure/core-amqp';
import {
  isServiceBusError,
  type ServiceBusReceivedMessage,
  type ServiceBusReceiver,
  type ServiceBusSender,
} from '@azure/service-bus';
import Long from 'long';

import { Entity } from '../../../src/servicebus/broker';
import { ORDERS, PAYMENTS, peekAll, rawExchange, receive, TOPIC, usePeer } from '../../../src/testing/peer';
import { connectRhea } from './rheaClient';

/**
 * The local AMQP peer, exercised only through the real @azure/service-bus client (and raw sockets
 * for what no client sends): what a producer, a consumer and an operator see.
 */
const fixture = usePeer({ maxDeliveryCount: 3 });
let sender: ServiceBusSender;
beforeEach(() => {
  sender = fixture.client.createSender(TOPIC);
});
const receiverFor = fixture.receiver;

/** The payment every receiving test starts from, on its way to the payments subscription. */
const sendPayment = (): Promise<void> =>
  sender.sendMessages({ body: payment, messageId: 'payment-PAY-1', subject: 'PaymentReceived' });

/** Sends the payment and receives it in peek-lock from the payments subscription. */
async function receivePayment(): Promise<{
  receiver: ServiceBusReceiver;
  message: ServiceBusReceivedMessage;
}> {
  await sendPayment();
  const receiver = receiverFor(PAYMENTS);
  const [message] = await receive(receiver, 1);
  if (!message) throw new Error('the payment was not received');
  return { receiver, message };
}

const payment = { paymentId: 'PAY-1', invoiceId: 'INV-1', amount: 12.5, currency: 'EUR' };

describe('publishing to the topic', () => {
  it('copies a message to the subscriptions whose Subject filter matches, with every field the consumer reads', async () => {
    const sent = {
      body: payment,
      messageId: 'payment-PAY-1',
      subject: 'PaymentReceived',
      correlationId: 'order-flow-7',
      contentType: 'application/json',
      applicationProperties: { tenant: 'contoso', attempt: 2, replay: false },
    };
    await sender.sendMessages(sent);

    const [payments, orders] = await Promise.all([
      peekAll(receiverFor(PAYMENTS)),
      peekAll(receiverFor(ORDERS)),
    ]);

    expect(orders).toHaveLength(0);
    expect(payments).toHaveLength(1);
    expect(payments[0]).toMatchObject({ ...sent, deliveryCount: 0 });
    expect(payments[0]?.sequenceNumber?.toNumber()).toBeGreaterThan(0);
    expect(payments[0]?.enqueuedTimeUtc).toBeInstanceOf(Date);
  });

  it('carries the system properties as sent: To, ReplyTo, ReplyToSessionId, SessionId, PartitionKey, TimeToLive', async () => {
    const sent = {
      body: payment,
      messageId: 'payment-system-properties',
      subject: 'PaymentReceived',
      to: 'billing',
      replyTo: 'payments-replies',
      replyToSessionId: 'reply-session',
      sessionId: 'session-7',
      partitionKey: 'session-7',
      timeToLive: 3_600_000,
    };
    await sender.sendMessages(sent);

    const [received] = await peekAll(receiverFor(PAYMENTS));
    expect(received).toMatchObject(sent);
  });

  it('keeps a Date application property (an AMQP timestamp) as a Date', async () => {
    const at = new Date('2030-01-02T03:04:05.678Z');
    await sender.sendMessages({
      body: payment,
      messageId: 'payment-PAY-1',
      subject: 'PaymentReceived',
      applicationProperties: { requestedAt: at },
    });

    // The SDK turns a timestamp into its milliseconds unless asked not to.
    const receiver = fixture.client.createReceiver(TOPIC, PAYMENTS, { skipConvertingDate: true });
    const [received] = await receive(receiver, 1);
    await receiver.close();
    const [converted] = await peekAll(receiverFor(PAYMENTS));

    expect(received?.applicationProperties?.requestedAt).toEqual(at);
    expect(converted?.applicationProperties?.requestedAt).toBe(at.getTime());
  });

  it('drops a MessageId it accepted within the duplicate window, reporting success, and accepts it after', async () => {
    const message = { body: payment, messageId: 'payment-PAY-1', subject: 'PaymentReceived' };

    await sender.sendMessages(message);
    await sender.sendMessages(message);
    const inside = await peekAll(receiverFor(PAYMENTS));
    fixture.clock.advance(3_600_000 + 1);
    await sender.sendMessages(message);
    const after = await peekAll(receiverFor(PAYMENTS));

    expect(inside.map((m) => m.messageId)).toEqual(['payment-PAY-1']);
    expect(after.map((m) => m.messageId)).toEqual(['payment-PAY-1', 'payment-PAY-1']);
    expect(fixture.peer.broker.topic(TOPIC).stats.droppedAsDuplicate).toBe(1);
  });

  it('accepts a batch (sendMessages with an array) as separate messages', async () => {
    await sender.sendMessages([
      { body: { orderId: 'O-1' }, messageId: 'order-O-1', subject: 'OrderCreated' },
      { body: { orderId: 'O-2' }, messageId: 'order-O-2', subject: 'OrderCreated' },
      { body: payment, messageId: 'payment-PAY-1', subject: 'PaymentReceived' },
    ]);

    const orders = await peekAll(receiverFor(ORDERS));

    expect(orders.map((m): unknown[] => [m.messageId, m.body])).toEqual([
      ['order-O-1', { orderId: 'O-1' }],
      ['order-O-2', { orderId: 'O-2' }],
    ]);
  });

  it('keeps a body of bytes as bytes', async () => {
    await sender.sendMessages({
      body: Buffer.from([0, 1, 254, 255]),
      messageId: 'bin',
      subject: 'OrderCreated',
    });

    const [message] = await peekAll(receiverFor(ORDERS));

    expect(message?.body).toEqual(Buffer.from([0, 1, 254, 255]));
  });

  it('refuses what it would otherwise get wrong (an amqp-value body), with an error the sender sees', async () => {
    const valueBody = AmqpAnnotatedMessage.fromRheaMessage({
      body: 'text as amqp-value',
      subject: 'OrderCreated',
    });
    valueBody.bodyType = 'value';

    const error = await sender.sendMessages(valueBody).catch((caught: unknown) => caught);

    expect(isServiceBusError(error) || error instanceof Error).toBe(true);
    expect((error as Error).message).toMatch(/amqp-value/);
    expect(await peekAll(receiverFor(ORDERS))).toHaveLength(0);
  });

  it('refuses a single message over 256 KB with MessageSizeExceeded, and accepts one under it', async () => {
    const order = (bytes: number, messageId: string) => ({
      body: Buffer.alloc(bytes, 1),
      messageId,
      subject: 'OrderCreated',
    });

    const error = await sender.sendMessages(order(257 * 1024, 'big')).catch((caught: unknown) => caught);
    await sender.sendMessages(order(250 * 1024, 'fits'));

    expect(isServiceBusError(error) && error.code).toBe('MessageSizeExceeded');
    expect((await peekAll(receiverFor(ORDERS))).map((m) => m.messageId)).toEqual(['fits']);
  });

  it('answers a send to a topic it does not have with MessagingEntityNotFound', async () => {
    const error = await fixture.client
      .createSender('no-such-topic')
      .sendMessages({ body: 1 })
      .catch((caught: unknown) => caught);

    expect(isServiceBusError(error) && error.code).toBe('MessagingEntityNotFound');
  });
});

describe('receiving in peek-lock', () => {
  it('locks a message with a lock token and lock expiry, and completing removes it', async () => {
    const { receiver, message } = await receivePayment();
    await receiver.completeMessage(message);

    expect(message?.lockToken).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(message?.lockedUntilUtc?.getTime()).toBeGreaterThan(
      message?.enqueuedTimeUtc?.getTime() ?? Infinity,
    );
    expect(message?.deliveryCount).toBe(0);
    expect(await peekAll(receiverFor(PAYMENTS))).toHaveLength(0);
    expect(
      fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity.completed.map((m) => m.messageId),
    ).toEqual(['payment-PAY-1']);
  });

  it('redelivers an abandoned message with its delivery count raised', async () => {
    await sendPayment();
    const receiver = receiverFor(PAYMENTS);

    const [first] = await receive(receiver, 1);
    await receiver.abandonMessage(first!);
    const [second] = await receive(receiver, 1);
    await receiver.completeMessage(second!);

    expect(second?.messageId).toBe('payment-PAY-1');
    expect([first?.deliveryCount, second?.deliveryCount]).toEqual([0, 1]);
  });

  it('applies the properties an abandon modifies to the application properties, on the link and through $management', async () => {
    await sender.sendMessages({
      body: payment,
      messageId: 'payment-PAY-1',
      subject: 'PaymentReceived',
      applicationProperties: { tenant: 'contoso', attempt: 0 },
    });
    const first = receiverFor(PAYMENTS);
    const [onLink] = await receive(first, 1);
    await first.abandonMessage(onLink!, { attempt: 1, lastError: 'timeout' });
    const [again] = await receive(first, 1);
    await first.close();
    await receiverFor(PAYMENTS).abandonMessage(again!, { attempt: 2 });
    const [peeked] = await peekAll(receiverFor(PAYMENTS));

    expect(again?.applicationProperties).toEqual({ tenant: 'contoso', attempt: 1, lastError: 'timeout' });
    expect(peeked?.applicationProperties).toEqual({ tenant: 'contoso', attempt: 2, lastError: 'timeout' });
  });

  it('counts a delivery when it ends: a peek shows 0 while the first delivery holds the lock, 1 once it ran out', async () => {
    const { receiver } = await receivePayment();
    const [whileLocked] = await peekAll(receiverFor(PAYMENTS));
    fixture.clock.advance(60_001);
    const [afterExpiry] = await peekAll(receiverFor(PAYMENTS));
    const [redelivered] = await receive(receiver, 1);

    expect(whileLocked?.deliveryCount).toBe(0);
    expect(afterExpiry?.deliveryCount).toBe(1);
    expect(redelivered?.deliveryCount).toBe(1);
  });

  it('renews a lock, and refuses to settle once the lock has run out (MessageLockLost)', async () => {
    const { receiver, message } = await receivePayment();
    const lockedUntilMs = message.lockedUntilUtc!.getTime();

    fixture.clock.advance(30_000);
    const renewedUntil = await receiver.renewMessageLock(message);
    fixture.clock.advance(60_001);
    const error = await receiver.completeMessage(message).catch((caught: unknown) => caught);

    expect(renewedUntil.getTime()).toBeGreaterThanOrEqual(lockedUntilMs + 30_000);
    expect(isServiceBusError(error) && error.code).toBe('MessageLockLost');
    expect(await peekAll(receiverFor(PAYMENTS))).toHaveLength(1);
  });

  it('settles through $management when the receiving link is gone', async () => {
    await sendPayment();
    const first = receiverFor(PAYMENTS);
    const [message] = await receive(first, 1);
    await first.close();

    await receiverFor(PAYMENTS).completeMessage(message!);

    expect(await peekAll(receiverFor(PAYMENTS))).toHaveLength(0);
  });

  it('streams messages to a subscribe() handler, as a long-running consumer receives them', async () => {
    const receiver = receiverFor(ORDERS);
    const handled: string[] = [];
    const done = new Promise<void>((resolve, reject) => {
      receiver.subscribe(
        {
          processMessage: async (message) => {
            handled.push(String(message.messageId));
            if (handled.length === 2) resolve();
            return Promise.resolve();
          },
          processError: (args) => {
            reject(args.error);
            return Promise.resolve();
          },
        },
        { autoCompleteMessages: true },
      );
    });

    await sender.sendMessages({ body: { n: 1 }, messageId: 'order-1', subject: 'OrderCreated' });
    await sender.sendMessages({ body: { n: 2 }, messageId: 'order-2', subject: 'OrderCreated' });
    await done;

    expect(handled).toEqual(['order-1', 'order-2']);
  });
  it('answers a receive from a queue it does not have with MessagingEntityNotFound, and one from a topic by naming its subscriptions', async () => {
    const fromQueue = fixture.client.createReceiver('no-such-queue');
    const fromTopic = fixture.client.createReceiver(TOPIC);

    const [queue, topic] = await Promise.all([
      fromQueue.receiveMessages(1, { maxWaitTimeInMs: 1_000 }).catch((caught: unknown) => caught),
      fromTopic.receiveMessages(1, { maxWaitTimeInMs: 1_000 }).catch((caught: unknown) => caught),
    ]);

    expect(isServiceBusError(queue) && queue.code).toBe('MessagingEntityNotFound');
    expect((topic as Error).message).toContain(
      `'${TOPIC}' is a topic: receive from one of its subscriptions ('${TOPIC}/Subscriptions/`,
    );
  });

  it('answers a receive or a peek on a subscription it does not have with MessagingEntityNotFound', async () => {
    const receiver = receiverFor('no-such-subscription');

    const [received, peeked] = await Promise.all([
      receiver.receiveMessages(1, { maxWaitTimeInMs: 1_000 }).catch((caught: unknown) => caught),
      receiver.peekMessages(1).catch((caught: unknown) => caught),
    ]);

    expect(isServiceBusError(received) && received.code).toBe('MessagingEntityNotFound');
    expect(isServiceBusError(peeked) && peeked.code).toBe('MessagingEntityNotFound');
  });
});

describe('receiving in receiveAndDelete', () => {
  it('hands a message out once, already settled, and it is gone from the subscription', async () => {
    await sendPayment();
    const taker = fixture.client.createReceiver(TOPIC, PAYMENTS, { receiveMode: 'receiveAndDelete' });

    const [message] = await receive(taker, 1);
    await taker.close();

    expect(message).toMatchObject({ messageId: 'payment-PAY-1', body: payment });
    expect(await peekAll(receiverFor(PAYMENTS))).toEqual([]);
    expect(await receiverFor(PAYMENTS).receiveMessages(1, { maxWaitTimeInMs: 300 })).toEqual([]);
    expect(fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity.activeCount).toBe(0);
  });
});

describe('deferred messages', () => {
  it('sets a deferred message aside: no receive takes it, a peek shows it, its sequence number receives it', async () => {
    const { receiver, message } = await receivePayment();

    await receiver.deferMessage(message, { deferredBy: 'test' });

    expect(await receiverFor(PAYMENTS).receiveMessages(1, { maxWaitTimeInMs: 300 })).toEqual([]);
    expect((await peekAll(receiverFor(PAYMENTS))).map((m) => m.messageId)).toEqual(['payment-PAY-1']);
    const entity = fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity;
    expect([entity.activeCount, entity.deferredCount]).toEqual([0, 1]);

    const [deferred] = await receiver.receiveDeferredMessages(message.sequenceNumber!);
    expect(deferred).toMatchObject({
      messageId: 'payment-PAY-1',
      body: payment,
      applicationProperties: { deferredBy: 'test' },
    });
    expect(deferred!.lockedUntilUtc!.getTime()).toBeGreaterThan(Date.now());

    await receiver.completeMessage(deferred!);
    expect([entity.activeCount, entity.deferredCount]).toEqual([0, 0]);
  });

  it('keeps an abandoned deferred message deferred, counting the delivery', async () => {
    const { receiver, message } = await receivePayment();
    await receiver.deferMessage(message);

    const [first] = await receiver.receiveDeferredMessages(message.sequenceNumber!);
    await receiver.abandonMessage(first!);
    const [second] = await receiver.receiveDeferredMessages(message.sequenceNumber!);

    expect(second!.deliveryCount).toBe(first!.deliveryCount! + 1);
    expect(fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity.deferredCount).toBe(1);
    await receiver.deadLetterMessage(second!, {
      deadLetterReason: 'given-up',
      deadLetterErrorDescription: 'deferred too long',
    });
    expect(fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity.deferredCount).toBe(0);
    expect((await peekAll(receiverFor(PAYMENTS, true)))[0]).toMatchObject({ deadLetterReason: 'given-up' });
  });

  it('receives a deferred message in receiveAndDelete, gone once received', async () => {
    const { receiver, message } = await receivePayment();
    await receiver.deferMessage(message);
    const taker = fixture.client.createReceiver(TOPIC, PAYMENTS, { receiveMode: 'receiveAndDelete' });

    const [taken] = await taker.receiveDeferredMessages(message.sequenceNumber!);
    await taker.close();

    expect(taken?.messageId).toBe('payment-PAY-1');
    expect(await peekAll(receiverFor(PAYMENTS))).toEqual([]);
  });

  it('answers a sequence number of no deferred message with MessageNotFound', async () => {
    const { receiver, message } = await receivePayment();

    const notDeferred = await receiver
      .receiveDeferredMessages(message.sequenceNumber!)
      .catch((caught: unknown) => caught);
    const unknown = await receiver
      .receiveDeferredMessages(Long.fromNumber(999))
      .catch((caught: unknown) => caught);

    expect(isServiceBusError(notDeferred) && notDeferred.code).toBe('MessageNotFound');
    expect(isServiceBusError(unknown) && unknown.code).toBe('MessageNotFound');
  });
});

describe('scheduled messages', () => {
  const scheduledPayment = (messageId: string): { body: object; messageId: string; subject: string } => ({
    body: payment,
    messageId,
    subject: 'PaymentReceived',
  });
  const topic = (): ReturnType<typeof fixture.peer.broker.topic> => fixture.peer.broker.topic(TOPIC);

  it('holds a scheduled message in the topic until its time, then delivers it with that time', async () => {
    const at = new Date(Date.now() + 1_000);

    const [sequenceNumber] = await sender.scheduleMessages(scheduledPayment('later-1'), at);

    expect(sequenceNumber!.toNumber()).toBeGreaterThan(0);
    expect(topic().scheduledCount).toBe(1);
    expect(await peekAll(receiverFor(PAYMENTS))).toEqual([]);
    const [message] = await receive(receiverFor(PAYMENTS), 1);
    expect(message).toMatchObject({ messageId: 'later-1', body: payment, scheduledEnqueueTimeUtc: at });
    expect(message!.enqueuedTimeUtc!.getTime()).toBeGreaterThanOrEqual(at.getTime());
    expect(topic().scheduledCount).toBe(0);
  });

  it('holds a message scheduled 30 days ahead (past setTimeout’s 24.8 days) until the clock reaches it', async () => {
    const month = 30 * 24 * 3_600_000;
    await sender.scheduleMessages(scheduledPayment('next-month'), new Date(fixture.clock.now() + month));

    const now = await receiverFor(PAYMENTS).receiveMessages(1, { maxWaitTimeInMs: 500 });
    fixture.clock.advance(month);
    const [then] = await receive(receiverFor(PAYMENTS), 1);

    expect(now).toEqual([]);
    expect(then).toMatchObject({ messageId: 'next-month' });
    expect(topic().scheduledCount).toBe(0);
  });

  it('schedules a message sent with a scheduled enqueue time, and enqueues at once one whose time has come', async () => {
    await sender.sendMessages({
      ...scheduledPayment('later-2'),
      scheduledEnqueueTimeUtc: new Date(Date.now() + 60_000),
    });
    await sender.scheduleMessages(scheduledPayment('due-already'), new Date(Date.now() - 1_000));

    expect(topic().scheduledCount).toBe(1);
    expect((await peekAll(receiverFor(PAYMENTS))).map((m) => m.messageId)).toEqual(['due-already']);
  });

  it('cancels a scheduled message by its sequence number; cancelling it again is MessageNotFound', async () => {
    const [sequenceNumber] = await sender.scheduleMessages(
      scheduledPayment('cancelled'),
      new Date(Date.now() + 500),
    );

    await sender.cancelScheduledMessages(sequenceNumber!);
    const again = await sender.cancelScheduledMessages(sequenceNumber!).catch((caught: unknown) => caught);

    expect(topic().scheduledCount).toBe(0);
    expect(isServiceBusError(again) && again.code).toBe('MessageNotFound');
    expect(await receiverFor(PAYMENTS).receiveMessages(1, { maxWaitTimeInMs: 1_500 })).toEqual([]);
  });

  it('applies duplicate detection when a message is scheduled, as to any send', async () => {
    await sender.scheduleMessages(scheduledPayment('twice'), new Date(Date.now() + 60_000));
    await sender.scheduleMessages(scheduledPayment('twice'), new Date(Date.now() + 60_000));

    expect(topic().scheduledCount).toBe(1);
    expect(topic().stats.droppedAsDuplicate).toBe(1);
  });
});

describe('competing receivers and a backlog', () => {
  /** `count` orders, sent as one batch. */
  const sendOrders = (count: number): Promise<void> =>
    sender.sendMessages(
      Array.from({ length: count }, (_, i) => ({
        body: { orderId: `O-${i + 1}` },
        messageId: `order-O-${i + 1}`,
        subject: 'OrderCreated',
      })),
    );
  const ids = (messages: ServiceBusReceivedMessage[]): string[] =>
    messages.map((message) => String(message.messageId)).sort();

  it('locks only what a receiver asked for: a second receiver gets the others', async () => {
    await sendOrders(20);
    const first = receiverFor(ORDERS);
    const second = receiverFor(ORDERS);

    const firstBatch = await first.receiveMessages(5, { maxWaitTimeInMs: 2_000 });
    const secondBatch = await receive(second, 15, 2_000);

    expect(firstBatch).toHaveLength(5);
    expect(secondBatch).toHaveLength(15);
    expect(new Set([...ids(firstBatch), ...ids(secondBatch)]).size).toBe(20);
    expect(fixture.peer.broker.subscription(TOPIC, ORDERS).entity.lockedCount).toBe(20);
  });

  it('leaves what a receiver did not take receivable at once when it closes', async () => {
    await sendOrders(5);
    const first = receiverFor(ORDERS);
    const [taken] = await first.receiveMessages(1, { maxWaitTimeInMs: 2_000 });
    await first.close();

    const rest = await receive(receiverFor(ORDERS), 4, 2_000);

    expect(ids(rest)).not.toContain(taken?.messageId);
    expect(rest).toHaveLength(4);
  });

  it('hands a backlog longer than one lock to a slow handler without a lock running out', async () => {
    await sendOrders(8);
    const receiver = receiverFor(ORDERS);
    const handled: string[] = [];
    await new Promise<void>((resolve, reject) => {
      receiver.subscribe(
        {
          processMessage: async (message) => {
            // Each message takes a third of the one-minute lock, on the peer's clock.
            fixture.clock.advance(20_000);
            await receiver.completeMessage(message);
            handled.push(String(message.messageId));
            if (handled.length === 8) resolve();
          },
          // A lock that ran out (MessageLockLost) fails the test here.
          processError: async (args) => {
            reject(args.error);
            return Promise.resolve();
          },
        },
        { autoCompleteMessages: false, maxConcurrentCalls: 1 },
      );
    });
    await receiver.close();

    expect(handled.sort()).toEqual(Array.from({ length: 8 }, (_, i) => `order-O-${i + 1}`).sort());
    expect(fixture.peer.broker.subscription(TOPIC, ORDERS).entity.completed).toHaveLength(8);
    expect(await peekAll(receiverFor(ORDERS, true))).toHaveLength(0);
  });
});

describe('the dead-letter queue', () => {
  it('receives a message a consumer dead-lettered, with its reason and description', async () => {
    const { receiver, message } = await receivePayment();

    await receiver.deadLetterMessage(message, {
      deadLetterReason: 'SchemaViolation',
      deadLetterErrorDescription: 'amount must be positive',
    });
    const deadLetters = receiverFor(PAYMENTS, true);
    const [peeked] = await peekAll(deadLetters);
    const [received] = await receive(deadLetters, 1);
    await deadLetters.completeMessage(received!);

    expect(await peekAll(receiverFor(PAYMENTS))).toHaveLength(0);
    expect(peeked).toMatchObject({
      messageId: 'payment-PAY-1',
      subject: 'PaymentReceived',
      body: payment,
      deadLetterReason: 'SchemaViolation',
      deadLetterErrorDescription: 'amount must be positive',
      // Dead-lettering ends a delivery without counting it (only an abandon or an expired lock does).
      deliveryCount: 0,
    });
    expect(received?.deadLetterReason).toBe('SchemaViolation');
    expect(await peekAll(receiverFor(PAYMENTS, true))).toHaveLength(0);
  });

  it('takes a message abandoned maxDeliveryCount times, as MaxDeliveryCountExceeded', async () => {
    await sendPayment();
    const receiver = receiverFor(PAYMENTS);

    for (let delivery = 1; delivery <= 3; delivery++) {
      const [message] = await receive(receiver, 1);
      await receiver.abandonMessage(message!);
    }
    const [deadLetter] = await peekAll(receiverFor(PAYMENTS, true));

    expect(await peekAll(receiverFor(PAYMENTS))).toHaveLength(0);
    expect(deadLetter?.messageId).toBe('payment-PAY-1');
    expect(deadLetter?.deadLetterReason).toBe('MaxDeliveryCountExceeded');
    expect(deadLetter?.deliveryCount).toBe(3);
  });

  it('takes a message whose lock runs out on its last allowed delivery, and delivers it no more', async () => {
    await sendPayment();
    const receiver = receiverFor(PAYMENTS);
    for (let delivery = 1; delivery <= 2; delivery++) {
      const [message] = await receive(receiver, 1);
      await receiver.abandonMessage(message!);
    }
    const [last] = await receive(receiver, 1);

    fixture.clock.advance(60_001);
    const after = await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 });
    const [deadLetter] = await peekAll(receiverFor(PAYMENTS, true));

    expect(last?.deliveryCount).toBe(2);
    expect(after).toHaveLength(0);
    expect(deadLetter).toMatchObject({ deadLetterReason: 'MaxDeliveryCountExceeded', deliveryCount: 3 });
  });
});

describe('robustness', () => {
  const AMQP_HEADER = Buffer.from('414d515000010000', 'hex');
  const OPEN_FRAME = Buffer.from('0000001b02000000005310d00000000b00000001a10570726f6265', 'hex');

  async function stillServing(): Promise<void> {
    await sender.sendMessages({
      body: 'alive',
      messageId: `alive-${Math.random()}`,
      subject: 'OrderCreated',
    });
    expect((await peekAll(receiverFor(ORDERS))).at(-1)?.body).toBe('alive');
  }

  it('answers a $management request it does not implement with an error, not silence', async () => {
    const rules = fixture.client.createRuleManager(TOPIC, PAYMENTS);

    // A rule action: the peer keeps rules but does not run actions.
    const refused = await rules
      .createRule('stamp', { sqlExpression: '1=1' }, { sqlExpression: "SET stamped = 'yes'" })
      .catch((caught: unknown) => caught);

    expect(refused).toMatchObject({ code: 'GeneralError' });
    expect((refused as Error).message).toMatch(/does not run rule actions/);
    await stillServing();
  });

  it('answers bytes that are not AMQP with its protocol header, then closes, and keeps serving', async () => {
    const answer = await rawExchange(fixture.peer.port, [Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')]);

    expect(answer).toEqual(AMQP_HEADER);
    await stillServing();
  });

  it('closes a connection that sends an unreadable frame with amqp:decode-error, and keeps serving', async () => {
    const garbage = Buffer.from('000000100200000000deadbeefcafe00', 'hex');

    const answer = await rawExchange(fixture.peer.port, [AMQP_HEADER, OPEN_FRAME, garbage]);

    expect(answer.subarray(0, 8)).toEqual(AMQP_HEADER);
    expect(answer.toString('latin1')).toContain('amqp:decode-error');
    await stillServing();
  });

  it('closes with amqp:internal-error the connection whose hand-out fails unexpectedly, and keeps serving', async () => {
    // A failure no request should cause, in the model, once there is a message to hand out.
    // The model's own method, called through for every other entity.
    const receive = Object.getOwnPropertyDescriptors(Entity.prototype).receive.value!;
    jest.spyOn(console, 'error').mockImplementation(() => undefined);
    jest.spyOn(Entity.prototype, 'receive').mockImplementation(function (this: Entity, ...args) {
      if (this.path.endsWith(PAYMENTS) && this.activeCount > 0) throw new TypeError('unexpected');
      return receive.apply(this, args);
    });
    const client = await connectRhea(fixture.peer);
    const receiver = client.receiver(`${TOPIC}/Subscriptions/${PAYMENTS}`);
    await once(receiver, 'receiver_open');
    receiver.add_credit(1);

    await sendPayment();
    const closed = await client.closed;
    jest.restoreAllMocks();

    expect(closed).toMatchObject({ condition: 'amqp:internal-error' });
    await stillServing();
  });

  it('checks the expiry of a token valid for a year without overflowing a timer', async () => {
    // Node fires a timer set past 2^31 - 1 ms after 1 ms: the peer would check the token every ms.
    const timeout = jest.spyOn(global, 'setTimeout');
    const client = await connectRhea(fixture.peer, 365 * 24 * 3_600_000);
    const receiver = client.receiver(`${TOPIC}/Subscriptions/${PAYMENTS}`);
    await once(receiver, 'receiver_open');
    const delays = timeout.mock.calls.map(([, ms]) => ms ?? 0);
    timeout.mockRestore();
    await client.close();

    expect(delays.filter((ms) => ms > 2 ** 31 - 1)).toEqual([]);
  });

  it('forgets a client that hangs up in the middle of a frame, and keeps serving', async () => {
    const answer = await rawExchange(fixture.peer.port, [AMQP_HEADER, OPEN_FRAME.subarray(0, 12)], {
      hangUp: true,
    });

    expect(answer.subarray(0, 8)).toEqual(AMQP_HEADER);
    await stillServing();
  });
});
