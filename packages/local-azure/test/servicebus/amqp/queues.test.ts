import {
  isServiceBusError,
  type PeekMessagesOptions,
  type ServiceBusReceivedMessage,
  type ServiceBusReceiver,
} from '@azure/service-bus';

import { type PeerFixture, receive, startPeer } from '../../../src/testing/peer';

/**
 * Queues on the local peer, through @azure/service-bus: the same semantics as a subscription
 * (peek-lock, delivery counts, dead-letter queue, duplicate detection, scheduling), with no filter:
 * a queue takes every message sent to it.
 */
const QUEUE = 'work-items';
let fixture: PeerFixture;

beforeEach(async () => {
  fixture = await startPeer({ queues: [QUEUE], maxDeliveryCount: 2 });
});
afterEach(async () => {
  await fixture.stop();
});

describe('a queue', () => {
  it('takes every message sent to it, with or without a subject, and hands each out once under a lock', async () => {
    await fixture.client.createSender(QUEUE).sendMessages([
      { body: 'one', messageId: 'm1' },
      { body: 'two', messageId: 'm2', subject: 'Anything' },
    ]);
    const receiver = fixture.client.createReceiver(QUEUE);
    const messages = await receive(receiver, 2);
    for (const message of messages) await receiver.completeMessage(message);

    expect(
      messages.map((m): unknown[] => [
        m.messageId,
        m.body as unknown,
        m.deliveryCount,
        m.lockToken !== undefined,
      ]),
    ).toEqual([
      ['m1', 'one', 0, true],
      ['m2', 'two', 0, true],
    ]);
    expect(fixture.peer.broker.queue(QUEUE).entity.activeCount).toBe(0);
  });

  it('gives a message sent without a MessageId one of its own, as Service Bus does, so two such sends are two messages', async () => {
    const sender = fixture.client.createSender(QUEUE);
    await sender.sendMessages({ body: 'one' });
    await sender.sendMessages({ body: 'two' });

    const ids = (await fixture.client.createReceiver(QUEUE).peekMessages(10)).map((m) => m.messageId);
    expect(ids).toEqual([expect.stringMatching(/^[0-9a-f]{32}$/), expect.stringMatching(/^[0-9a-f]{32}$/)]);
    expect(ids[0]).not.toBe(ids[1]);
  });

  it('drops a MessageId it saw within the window, as a topic does', async () => {
    const sender = fixture.client.createSender(QUEUE);
    await sender.sendMessages({ body: 'first', messageId: 'same' });
    await sender.sendMessages({ body: 'again', messageId: 'same' });

    const peeked = await fixture.client.createReceiver(QUEUE).peekMessages(10);
    expect(peeked.map((m): unknown => m.body)).toEqual(['first']);
  });

  it('redelivers an abandoned message, then dead-letters it at the maximum delivery count', async () => {
    await fixture.client.createSender(QUEUE).sendMessages({ body: 'poison', messageId: 'p1' });
    const receiver = fixture.client.createReceiver(QUEUE);
    for (let delivery = 0; delivery < 2; delivery++) {
      const [message] = await receive(receiver, 1);
      expect(message?.deliveryCount).toBe(delivery);
      await receiver.abandonMessage(message!);
    }
    const deadLetters = fixture.client.createReceiver(QUEUE, { subQueueType: 'deadLetter' });
    const [dead] = await receive(deadLetters, 1);

    expect(dead).toMatchObject({ messageId: 'p1', deadLetterReason: 'MaxDeliveryCountExceeded' });
    await deadLetters.completeMessage(dead!);
    expect(fixture.peer.broker.queue(QUEUE).deadLetterQueue.activeCount).toBe(0);
  });

  it('dead-letters with a reason, schedules and cancels through the queue', async () => {
    const sender = fixture.client.createSender(QUEUE);
    await sender.sendMessages({ body: 'bad', messageId: 'd1' });
    const receiver = fixture.client.createReceiver(QUEUE);
    const [bad] = await receive(receiver, 1);
    await receiver.deadLetterMessage(bad!, {
      deadLetterReason: 'Malformed',
      deadLetterErrorDescription: 'no id',
    });
    // The peer's timers run on the wall clock: a schedule two seconds ahead.
    const later = new Date(Date.now() + 2_000);
    const [kept, cancelled] = await sender.scheduleMessages(
      [
        { body: 'kept', messageId: 's1' },
        { body: 'cancelled', messageId: 's2' },
      ],
      later,
    );
    await sender.cancelScheduledMessages(cancelled!);

    const [dead] = await fixture.client.createReceiver(QUEUE, { subQueueType: 'deadLetter' }).peekMessages(1);
    expect(dead).toMatchObject({
      messageId: 'd1',
      deadLetterReason: 'Malformed',
      deadLetterErrorDescription: 'no id',
    });
    expect(kept?.toNumber()).toBeGreaterThan(0);
    expect(fixture.peer.broker.queue(QUEUE).entity.activeCount).toBe(0);
    const queue = fixture.peer.broker.queue(QUEUE).entity;
    while (queue.activeCount === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await receiver.peekMessages(10)).map((m): unknown => m.body)).toEqual(['kept']);
  });

  it('peeks without the bodies when asked (omitMessageBody), and still hands the messages out whole', async () => {
    await fixture.client.createSender(QUEUE).sendMessages({ body: 'payload', messageId: 'b1' });
    const receiver = fixture.client.createReceiver(QUEUE, { receiveMode: 'receiveAndDelete' });

    // @azure/service-bus 7.9.5 sends it (omit-message-body) though its types do not name the option.
    const omitBody = { omitMessageBody: true } as PeekMessagesOptions;
    const [peeked] = await receiver.peekMessages(1, omitBody);
    const [received] = await receive(receiver, 1);

    expect(peeked?.messageId).toBe('b1');
    expect(peeked?.body).toBeUndefined();
    expect(received?.body).toBe('payload');
  });

  describe('properties to modify, on every settlement that takes them', () => {
    const modify = { customProperty: 'set on settlement' };
    const receivedAfter = async (
      settle: (receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage) => Promise<void>,
      deferFirst: boolean,
    ) => {
      await fixture.client.createSender(QUEUE).sendMessages({ body: 'body', messageId: 'props' });
      const receiver = fixture.client.createReceiver(QUEUE);
      let [message] = await receive(receiver, 1);
      if (deferFirst) {
        await receiver.deferMessage(message!);
        [message] = await receiver.receiveDeferredMessages(message!.sequenceNumber!);
      }
      await settle(receiver, message!);
      return { receiver, sequenceNumber: message!.sequenceNumber! };
    };

    it.each([false, true])(
      'dead-lettering (deferred first: %s) keeps the reason, the description and the property',
      async (deferFirst) => {
        await receivedAfter(
          (receiver, message) =>
            receiver.deadLetterMessage(message, {
              deadLetterReason: 'reason',
              deadLetterErrorDescription: 'description',
              ...modify,
            }),
          deferFirst,
        );
        const [dead] = await receive(fixture.client.createReceiver(QUEUE, { subQueueType: 'deadLetter' }), 1);

        expect(dead).toMatchObject({ deadLetterReason: 'reason', deadLetterErrorDescription: 'description' });
        expect(dead?.applicationProperties?.['customProperty']).toBe(modify.customProperty);
      },
    );

    it.each([false, true])('deferring (deferred first: %s) keeps the property', async (deferFirst) => {
      const { receiver, sequenceNumber } = await receivedAfter(
        (r, message) => r.deferMessage(message, modify),
        deferFirst,
      );
      const [deferred] = await receiver.receiveDeferredMessages(sequenceNumber);

      expect(deferred?.applicationProperties?.['customProperty']).toBe(modify.customProperty);
    });

    it('abandoning a deferred message keeps it deferred, with the property', async () => {
      const { receiver, sequenceNumber } = await receivedAfter(
        (r, message) => r.abandonMessage(message, modify),
        true,
      );
      const [abandoned] = await receiver.receiveDeferredMessages(sequenceNumber);

      expect(abandoned?.applicationProperties?.['customProperty']).toBe(modify.customProperty);
    });
  });

  it('is not found under a name the peer does not serve, for sending and receiving', async () => {
    const sent = await fixture.client
      .createSender('no-such-queue')
      .sendMessages({ body: 'x' })
      .catch((error: unknown) => error);
    const received = await fixture.client
      .createReceiver('no-such-queue')
      .receiveMessages(1, { maxWaitTimeInMs: 1_000 })
      .catch((error: unknown) => error);

    expect(isServiceBusError(sent) && sent.code).toBe('MessagingEntityNotFound');
    expect(isServiceBusError(received) && received.code).toBe('MessagingEntityNotFound');
  });
});
