import { Broker } from '../../src/servicebus/broker';
import type { Clock } from '../../src/servicebus/clock';
import {
  SessionCannotBeLockedError,
  SessionIdRequiredError,
  SessionLockLostError,
} from '../../src/servicebus/sessions';

/** Time moves only when the test says so. */
function manualClock(): Clock & { advance(ms: number): void } {
  let now = Date.UTC(2026, 11, 3);
  return {
    now: () => now,
    sleep: () => Promise.resolve(),
    after: () => () => undefined,
    advance(ms) {
      now += ms;
    },
  };
}

function setup(): { broker: Broker; clock: ReturnType<typeof manualClock> } {
  const clock = manualClock();
  const broker = new Broker({
    topology: { topics: [{ name: 'events', subscriptions: [] }] },
    clock,
    lockDurationMs: 60_000,
    maxDeliveryCount: 3,
    queues: [{ name: 'by-customer', requiresSession: true }],
  });
  return { broker, clock };
}

describe('sessions in the broker model', () => {
  it('refuses a send without a SessionId to a queue that requires sessions', () => {
    const { broker } = setup();

    expect(() => broker.queues.get('by-customer')!.send({ body: 'orphan' })).toThrow(SessionIdRequiredError);
    expect(broker.queue('by-customer').entity.peek()).toEqual([]);
  });

  it("dead-letters a topic's copy without a SessionId in a subscription that requires sessions", () => {
    const { broker } = setup();
    const topic = broker.topic('events');
    const subscription = broker.addSubscription(topic, 'by-customer', { requiresSession: true });

    topic.send({ body: 'orphan', messageId: 'm1' });

    expect(subscription.entity.peek()).toEqual([]);
    expect(subscription.deadLetterQueue.peek()).toMatchObject([
      { messageId: 'm1', deadLetter: { reason: 'Session id is null.' } },
    ]);
  });

  it('gives the next session by its oldest available message, skipping one that is held', () => {
    const { broker } = setup();
    const queue = broker.queues.get('by-customer')!;
    for (const sessionId of ['alice', 'bob', 'alice', 'carol']) queue.send({ body: sessionId, sessionId });
    const sessions = broker.queue('by-customer').entity.sessions!;

    const first = sessions.acceptNext();
    const second = sessions.acceptNext();

    expect([first?.sessionId, second?.sessionId]).toEqual(['alice', 'bob']);
    expect(() => sessions.accept('alice')).toThrow(SessionCannotBeLockedError);
    expect(first?.receive()?.message.body).toBe('alice');
    expect(first?.receive()?.message.body).toBe('alice');
    expect(first?.receive()).toBeUndefined();
  });

  it('locks a session’s messages as long as the session: renewed with it, released when it runs out', () => {
    const { broker, clock } = setup();
    const entity = broker.queue('by-customer').entity;
    broker.queues.get('by-customer')!.send({ body: 'a1', sessionId: 'alice' });
    const lease = entity.sessions!.accept('alice');
    const locked = lease.receive()!;
    clock.advance(50_000);
    entity.sessions!.renew('alice');
    clock.advance(50_000);

    expect(entity.lockedCount).toBe(1);
    clock.advance(10_001);
    expect(lease.held).toBe(false);
    expect(() => entity.sessions!.renew('alice')).toThrow(SessionLockLostError);
    expect(() => entity.complete(locked.lockToken)).toThrow();
    const next = entity.sessions!.accept('alice').receive();
    expect([next?.message.body, next?.deliveryNumber]).toEqual(['a1', 2]);
  });

  it('keeps session state apart from messages, only while the session is held', () => {
    const { broker } = setup();
    const sessions = broker.queue('by-customer').entity.sessions!;
    expect(() => sessions.state('alice')).toThrow(SessionLockLostError);
    const lease = sessions.accept('alice');

    sessions.setState('alice', Buffer.from('step-2'));
    lease.release();
    sessions.accept('alice');

    expect(sessions.state('alice')?.toString()).toBe('step-2');
    sessions.setState('alice', undefined);
    expect(sessions.state('alice')).toBeUndefined();
  });
});
