import {
  isServiceBusError,
  ServiceBusClient,
  type ServiceBusReceiver,
  type ServiceBusSessionReceiver,
} from '@azure/service-bus';

import { type PeerFixture, receive, startPeer, TOPIC } from '../../../src/testing/peer';

/**
 * Message sessions on a queue that requires them, through @azure/service-bus: a session's messages
 * go, in order, only to the one receiver that holds the session's lock.
 */
const QUEUE = 'orders-by-customer';
const PLAIN_QUEUE = 'work-items';
let fixture: PeerFixture;
const receivers: (ServiceBusReceiver | ServiceBusSessionReceiver)[] = [];

beforeEach(async () => {
  fixture = await startPeer({
    queues: [{ name: QUEUE, requiresSession: true }, PLAIN_QUEUE],
    maxDeliveryCount: 3,
  });
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
  await fixture.stop();
});

/** A session receiver that leaves its lock alone (the tests renew it themselves), closed after the test. */
async function acceptSession(
  sessionId: string,
  receiveMode: 'peekLock' | 'receiveAndDelete' = 'peekLock',
): Promise<ServiceBusSessionReceiver> {
  const receiver = await fixture.client.acceptSession(QUEUE, sessionId, {
    maxAutoLockRenewalDurationInMs: 0,
    receiveMode,
  });
  receivers.push(receiver);
  return receiver;
}

async function acceptNextSession(): Promise<ServiceBusSessionReceiver> {
  const receiver = await fixture.client.acceptNextSession(QUEUE, { maxAutoLockRenewalDurationInMs: 0 });
  receivers.push(receiver);
  return receiver;
}

async function send(...messages: { body: string; sessionId: string }[]): Promise<void> {
  await fixture.client.createSender(QUEUE).sendMessages(messages);
}

async function errorOf(operation: Promise<unknown>): Promise<unknown> {
  return operation.then(
    () => new Error('the operation succeeded'),
    (error: unknown) => error,
  );
}

function codeOf(error: unknown): string | undefined {
  return isServiceBusError(error) ? error.code : undefined;
}

describe('a queue that requires sessions', () => {
  it('hands a session its own messages only, in the order they were sent', async () => {
    await send(
      { body: 'a1', sessionId: 'alice' },
      { body: 'b1', sessionId: 'bob' },
      { body: 'a2', sessionId: 'alice' },
      { body: 'a3', sessionId: 'alice' },
    );
    const alice = await acceptSession('alice');
    const messages = await receive(alice, 3);
    for (const message of messages) await alice.completeMessage(message);

    expect(alice.sessionId).toBe('alice');
    expect(messages.map((m): unknown => [m.body, m.sessionId])).toEqual([
      ['a1', 'alice'],
      ['a2', 'alice'],
      ['a3', 'alice'],
    ]);
    expect(await alice.receiveMessages(1, { maxWaitTimeInMs: 200 })).toEqual([]);
    expect(
      fixture.peer.broker
        .queue(QUEUE)
        .entity.peek()
        .map((m) => m.sessionId),
    ).toEqual(['bob']);
  });

  it('accepts the next session that has messages and that no receiver holds', async () => {
    await send({ body: 'a1', sessionId: 'alice' }, { body: 'b1', sessionId: 'bob' });
    const first = await acceptSession('alice');
    const next = await acceptNextSession();

    expect(first.sessionId).toBe('alice');
    expect(next.sessionId).toBe('bob');
    const [message] = await receive(next, 1);
    expect(message?.body).toBe('b1');
  });

  it('refuses a second receiver for a session another receiver holds (SessionCannotBeLocked)', async () => {
    await send({ body: 'a1', sessionId: 'alice' });
    await acceptSession('alice');

    const error = await errorOf(fixture.client.acceptSession(QUEUE, 'alice'));

    expect(codeOf(error)).toBe('SessionCannotBeLocked');
  });

  it('answers acceptNextSession with ServiceTimeout when no session is free within its timeout', async () => {
    // The SDK asks the peer to wait its operation timeout (com.microsoft:timeout): a short one here.
    const client = new ServiceBusClient(fixture.peer.connectionString, {
      retryOptions: { maxRetries: 0, timeoutInMs: 1_000 },
    });
    await send({ body: 'a1', sessionId: 'alice' });
    await acceptSession('alice');

    const error = await errorOf(client.acceptNextSession(QUEUE, { maxAutoLockRenewalDurationInMs: 0 }));
    await client.close();

    expect(codeOf(error)).toBe('ServiceTimeout');
  });

  it('waits in acceptNextSession for a session to have a message', async () => {
    const accepting = acceptNextSession();
    // Sent once the attach is (most likely) waiting; sent before, it is accepted the same way.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await send({ body: 'late', sessionId: 'latecomer' });

    const receiver = await accepting;
    const [message] = await receive(receiver, 1);

    expect([receiver.sessionId, message?.body]).toEqual(['latecomer', 'late']);
  });

  it('refuses a message without a SessionId, in Service Bus words', async () => {
    const error = await errorOf(fixture.client.createSender(QUEUE).sendMessages({ body: 'orphan' }));

    expect((error as Error).message).toContain('The SessionId was not set on a message');
    expect(fixture.peer.broker.queue(QUEUE).entity.peek()).toEqual([]);
  });

  it('refuses a receiver without a session on it, and a session receiver on a queue without sessions', async () => {
    const plain = fixture.client.createReceiver(QUEUE);
    receivers.push(plain);
    const plainError = await errorOf(plain.receiveMessages(1, { maxWaitTimeInMs: 1_000 }));
    const sessionError = await errorOf(fixture.client.acceptSession(PLAIN_QUEUE, 'alice'));

    expect((plainError as Error).message).toContain(
      'It is not possible for an entity that requires sessions to create a non-sessionful message receiver',
    );
    expect((sessionError as Error).message).toContain(
      'A sessionful message receiver cannot be created on an entity that does not require sessions',
    );
  });
});

describe('a subscription that requires sessions', () => {
  it('takes its topic’s messages by session, and dead-letters a copy without a SessionId', async () => {
    // Created as the administration endpoint creates one (topology.json has no session setting).
    const { broker } = fixture.peer;
    broker.addSubscription(broker.topic(TOPIC), 'by-customer', { requiresSession: true });
    await fixture.client.createSender(TOPIC).sendMessages([
      { body: 'a1', sessionId: 'alice', subject: 'Anything' },
      { body: 'orphan', messageId: 'no-session' },
    ]);

    const alice = await fixture.client.acceptSession(TOPIC, 'by-customer', 'alice', {
      maxAutoLockRenewalDurationInMs: 0,
    });
    receivers.push(alice);
    const [message] = await receive(alice, 1);
    await alice.completeMessage(message!);

    expect(message?.body).toBe('a1');
    expect(broker.subscription(TOPIC, 'by-customer').deadLetterQueue.peek()).toMatchObject([
      { messageId: 'no-session', deadLetter: { reason: 'Session id is null.' } },
    ]);
  });
});

describe('a session lock', () => {
  it('is renewed on request, and moves sessionLockedUntilUtc forward', async () => {
    await send({ body: 'a1', sessionId: 'alice' });
    const alice = await acceptSession('alice');
    const before = alice.sessionLockedUntilUtc.getTime();
    fixture.clock.advance(30_000);

    const renewed = await alice.renewSessionLock();

    expect(renewed.getTime()).toBeGreaterThanOrEqual(before + 30_000);
    expect(alice.sessionLockedUntilUtc).toEqual(renewed);
  });

  it('once lost, fails the receiver with SessionLockLost and frees the session, its message counted', async () => {
    await send({ body: 'a1', sessionId: 'alice' });
    const first = await acceptSession('alice');
    const [held] = await receive(first, 1);
    fixture.clock.advance(60_001);
    // The lock has run out: the peer detaches the receiver, as Service Bus does.
    while (!first.isClosed) await new Promise((resolve) => setTimeout(resolve, 10));

    const settleError = await errorOf(first.completeMessage(held!));
    const renewError = await errorOf(first.renewSessionLock());
    const second = await acceptSession('alice');
    const [again] = await receive(second, 1);
    await second.completeMessage(again!);

    expect(codeOf(settleError)).toBe('SessionLockLost');
    expect(codeOf(renewError)).toBe('SessionLockLost');
    expect([held?.deliveryCount, again?.body, again?.deliveryCount]).toEqual([0, 'a1', 1]);
  });

  it('is released when the receiver closes: the next receiver gets what was not settled', async () => {
    await send({ body: 'a1', sessionId: 'alice' });
    const first = await acceptSession('alice');
    await receive(first, 1);
    await first.close();

    const second = await acceptSession('alice');
    const [again] = await receive(second, 1);

    expect([again?.body, again?.deliveryCount]).toEqual(['a1', 1]);
  });
});

describe('a session lock that runs out while the receiver waits', () => {
  it('detaches the receiver with SessionLockLost, in real time', async () => {
    // A peer of its own, with a one-second lock: the loss is noticed by the peer, not by a call.
    const shortLock = await startPeer({
      queues: [{ name: QUEUE, requiresSession: true }],
      lockDurationMs: 1_000,
    });
    try {
      await shortLock.client.createSender(QUEUE).sendMessages({ body: 'a1', sessionId: 'alice' });
      const alice = await shortLock.client.acceptSession(QUEUE, 'alice', {
        maxAutoLockRenewalDurationInMs: 0,
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));

      const error = await errorOf(alice.receiveMessages(1, { maxWaitTimeInMs: 1_000 }));
      const next = await shortLock.client.acceptSession(QUEUE, 'alice', {
        maxAutoLockRenewalDurationInMs: 0,
      });
      const [message] = await receive(next, 1);

      expect(codeOf(error)).toBe('SessionLockLost');
      expect([message?.body, message?.deliveryCount]).toEqual(['a1', 0]);
      await next.close();
    } finally {
      await shortLock.stop();
    }
  });
});

describe('session state', () => {
  it('is set, read back and cleared through the session receiver, with or without messages', async () => {
    const alice = await acceptSession('alice');
    const initial: unknown = await alice.getSessionState();
    await alice.setSessionState('step-2');
    const set: unknown = await alice.getSessionState();
    await alice.close();
    const again = await acceptSession('alice');
    const kept: unknown = await again.getSessionState();
    await again.setSessionState(null);
    const cleared: unknown = await again.getSessionState();

    expect(initial).toBeNull();
    expect(String(set)).toBe('step-2');
    expect(String(kept)).toBe('step-2');
    expect(cleared).toBeNull();
  });
});

describe('settling within a session', () => {
  it('completes, abandons, defers and dead-letters, and receives a deferred message by its sequence number', async () => {
    await send(
      { body: 'complete-me', sessionId: 'alice' },
      { body: 'abandon-me', sessionId: 'alice' },
      { body: 'defer-me', sessionId: 'alice' },
      { body: 'dead-letter-me', sessionId: 'alice' },
    );
    const alice = await acceptSession('alice');
    const [toComplete, toAbandon, toDefer, toDeadLetter] = await receive(alice, 4);
    await alice.completeMessage(toComplete!);
    await alice.abandonMessage(toAbandon!);
    await alice.deferMessage(toDefer!);
    await alice.deadLetterMessage(toDeadLetter!, {
      deadLetterReason: 'Poison',
      deadLetterErrorDescription: 'test',
    });
    const [redelivered] = await receive(alice, 1);
    const [deferred] = await alice.receiveDeferredMessages(toDefer!.sequenceNumber!);
    await alice.completeMessage(redelivered!);
    await alice.completeMessage(deferred!);

    const deadLetters = fixture.client.createReceiver(QUEUE, {
      subQueueType: 'deadLetter',
      maxAutoLockRenewalDurationInMs: 0,
    });
    receivers.push(deadLetters);
    const [dead] = await receive(deadLetters, 1);
    expect([redelivered?.body, redelivered?.deliveryCount]).toEqual(['abandon-me', 1]);
    expect(deferred?.body).toBe('defer-me');
    expect([dead?.body, dead?.deadLetterReason, dead?.sessionId]).toEqual([
      'dead-letter-me',
      'Poison',
      'alice',
    ]);
    expect(fixture.peer.broker.queue(QUEUE).entity.peek()).toEqual([]);
  });

  it('peeks only its own session', async () => {
    await send(
      { body: 'a1', sessionId: 'alice' },
      { body: 'b1', sessionId: 'bob' },
      { body: 'a2', sessionId: 'alice' },
    );
    const alice = await acceptSession('alice');

    const peeked = await alice.peekMessages(10);

    expect(peeked.map((m): unknown => m.body)).toEqual(['a1', 'a2']);
  });

  it('receives and deletes in receiveAndDelete mode', async () => {
    await send({ body: 'a1', sessionId: 'alice' }, { body: 'a2', sessionId: 'alice' });
    const alice = await acceptSession('alice', 'receiveAndDelete');

    const messages = await receive(alice, 2);

    expect(messages.map((m): unknown => m.body)).toEqual(['a1', 'a2']);
    expect(fixture.peer.broker.queue(QUEUE).entity.peek()).toEqual([]);
  });
});

describe('a session receiver that subscribes', () => {
  it('is handed its session’s messages one at a time, in order', async () => {
    await send(
      { body: 'a1', sessionId: 'alice' },
      { body: 'b1', sessionId: 'bob' },
      { body: 'a2', sessionId: 'alice' },
    );
    const alice = await acceptSession('alice');
    const handled: unknown[] = [];
    const done = new Promise<void>((resolve, reject) => {
      alice.subscribe({
        processMessage: async (message) => {
          handled.push(message.body);
          await alice.completeMessage(message);
          if (handled.length === 2) resolve();
        },
        processError: (args) => {
          reject(args.error);
          return Promise.resolve();
        },
      });
    });
    await done;

    expect(handled).toEqual(['a1', 'a2']);
    expect(
      fixture.peer.broker
        .queue(QUEUE)
        .entity.peek()
        .map((m) => m.sessionId),
    ).toEqual(['bob']);
  });
});
