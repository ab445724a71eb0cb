import {
  Broker,
  type BrokerTopology as Topology,
  MessageLockLostError,
  type OutgoingMessage,
} from '../../src/servicebus/broker';
import type { Clock } from '../../src/servicebus/clock';
import { RETRY_COPIES, RETRY_PROPERTIES, RETRY_SUBJECT } from '../support/retryCopies';

/** A clock the test moves by hand: nothing in the broker waits on real time. */
function manualClock(): Clock & { advance(ms: number): void } {
  let now = Date.UTC(2026, 10, 29);
  const timers: { at: number; callback: () => void }[] = [];
  return {
    now: () => now,
    sleep: () => Promise.resolve(),
    after: (ms, callback) => {
      const timer = { at: now + ms, callback };
      timers.push(timer);
      return () => timers.splice(timers.indexOf(timer), 1);
    },
    advance(ms) {
      now += ms;
      for (const timer of timers.filter((t) => t.at <= now)) {
        timers.splice(timers.indexOf(timer), 1);
        timer.callback();
      }
    },
  };
}

const topology: Topology = {
  topics: [
    {
      name: 'events',
      subscriptions: [
        { name: 'payments', subjects: ['PaymentReceived'] },
        { name: 'orders', subjects: ['OrderCreated'] },
        { name: 'audit', subjects: ['PaymentReceived', 'OrderCreated'] },
      ],
    },
  ],
};

function setup(): { broker: Broker; clock: ReturnType<typeof manualClock> } {
  const clock = manualClock();
  const broker = new Broker({
    topology,
    retryCopies: RETRY_COPIES,
    clock,
    duplicateWindowMs: 3_600_000,
    lockDurationMs: 60_000,
    maxDeliveryCount: 3,
  });
  return { broker, clock };
}

describe('topic', () => {
  it('copies a message to every subscription whose Subject filter matches', () => {
    const { broker } = setup();

    const result = broker.topic('events').send({ messageId: 'm1', subject: 'PaymentReceived', body: '{}' });

    expect(result).toEqual({ accepted: true, deliveredTo: ['payments', 'audit'] });
    expect(broker.subscription('events', 'orders').entity.activeCount).toBe(0);
  });

  it('accepts a message no subscription takes, counts it and tells the observer, and copies it nowhere', () => {
    const unrouted: string[] = [];
    const broker = new Broker({
      topology,
      clock: manualClock(),
      observer: { matchedNoSubscription: (topic, message) => unrouted.push(`${topic} ${message.subject}`) },
    });

    const result = broker.topic('events').send({ messageId: 'm1', subject: 'WidgetCounted', body: '{}' });
    broker.topic('events').send({ messageId: 'm2', subject: 'OrderCreated', body: '{}' });

    expect(result).toEqual({ accepted: true, deliveredTo: [] });
    expect(broker.topic('events').stats).toMatchObject({ accepted: 2, matchedNoSubscription: 1 });
    expect(unrouted).toEqual(['events WidgetCounted']);
    expect(broker.subscriptions.map((s) => s.entity.activeCount)).toEqual([0, 1, 1]);
  });

  it('drops a MessageId seen within the window, and accepts it again after', () => {
    const { broker, clock } = setup();
    const topic = broker.topic('events');

    const first = topic.send({ messageId: 'dup', subject: 'OrderCreated', body: '1' });
    clock.advance(59 * 60_000);
    const inside = topic.send({ messageId: 'dup', subject: 'OrderCreated', body: '2' });
    clock.advance(2 * 60_000);
    const outside = topic.send({ messageId: 'dup', subject: 'OrderCreated', body: '3' });

    expect([first.accepted, inside.accepted, outside.accepted]).toEqual([true, false, true]);
    expect(topic.stats).toMatchObject({ sent: 3, accepted: 2, droppedAsDuplicate: 1 });
    expect(
      broker
        .subscription('events', 'orders')
        .entity.peek()
        .map((m) => m.body),
    ).toEqual(['1', '3']);
  });
});

describe('delayed retry (a subscription that declares delayedRetry)', () => {
  const retrying: Topology = {
    topics: [
      {
        name: 'events',
        subscriptions: [
          {
            name: 'payments',
            subjects: ['PaymentReceived'],
            delayedRetry: { attempts: 3, firstDelaySeconds: 30 },
          },
          { name: 'orders', subjects: ['OrderCreated'] },
          {
            name: 'audit',
            subjects: ['PaymentReceived', 'OrderCreated'],
            delayedRetry: { attempts: 1, firstDelaySeconds: 5 },
          },
        ],
      },
      { name: 'other', subscriptions: [{ name: 'payments-elsewhere', subjects: ['PaymentReceived'] }] },
    ],
  };
  const copy = (messageId: string, retryFor: string): OutgoingMessage => ({
    messageId,
    subject: RETRY_SUBJECT,
    body: 'copy',
    applicationProperties: {
      [RETRY_PROPERTIES.for]: retryFor,
      [RETRY_PROPERTIES.of]: 'p1',
      [RETRY_PROPERTIES.attempt]: 1,
      [RETRY_PROPERTIES.subject]: 'PaymentReceived',
    },
  });

  it('gives $Default the filter the Bicep gives it', () => {
    const broker = new Broker({ topology: retrying, retryCopies: RETRY_COPIES, clock: manualClock() });

    expect(broker.subscription('events', 'payments').rules.map((r) => [r.name, r.filter])).toEqual([
      [
        '$Default',
        expect.objectContaining({
          kind: 'sql',
          expression:
            "sys.Label IN ('PaymentReceived') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'payments'",
        }),
      ],
    ]);
    expect(broker.subscription('events', 'orders').rules.map((r) => r.filter)).toEqual([
      { kind: 'correlation', subject: 'OrderCreated' },
    ]);
  });

  it('routes a copy to the one subscription it is for, and the ordinary subjects as before', () => {
    const events = new Broker({ topology: retrying, retryCopies: RETRY_COPIES, clock: manualClock() }).topic(
      'events',
    );

    expect(events.send(copy('p1:retry:1', 'payments')).deliveredTo).toEqual(['payments']);
    expect(events.send(copy('p2:retry:1', 'audit')).deliveredTo).toEqual(['audit']);
    // A copy for a subscription without delayedRetry, or of another topic, reaches no one here.
    expect(events.send(copy('o1:retry:1', 'orders')).deliveredTo).toEqual([]);
    expect(events.send(copy('x1:retry:1', 'payments-elsewhere')).deliveredTo).toEqual([]);
    expect(events.send({ messageId: 'p3', subject: 'PaymentReceived', body: '' }).deliveredTo).toEqual([
      'payments',
      'audit',
    ]);
    expect(events.send({ messageId: 'o2', subject: 'OrderCreated', body: '' }).deliveredTo).toEqual([
      'orders',
      'audit',
    ]);
  });
});

describe('a new declaration (npm start in watch mode, as a redeployment)', () => {
  it('adds, removes and refilters what changed, keeps what the others hold and their duplicate history', () => {
    const { broker } = setup();
    broker.topic('events').send({ messageId: 'p1', subject: 'PaymentReceived', body: 'kept' });
    broker.topic('events').send({ messageId: 'o1', subject: 'OrderCreated', body: 'gone' });
    const payments = broker.subscription('events', 'payments');

    const changes = broker.declare({
      topics: [
        {
          name: 'events',
          subscriptions: [
            { name: 'payments', subjects: ['PaymentReceived'] },
            { name: 'audit', subjects: ['OrderCreated'] },
            { name: 'points', subjects: ['PointsEarned'] },
          ],
        },
        { name: 'shipping', subscriptions: [{ name: 'carriers', subjects: ['ShipmentPlanned'] }] },
      ],
    });

    expect(changes).toEqual({
      added: ['events/Subscriptions/points', 'shipping', 'shipping/Subscriptions/carriers'],
      removed: ['events/Subscriptions/orders'],
      refiltered: ['events/Subscriptions/audit'],
    });
    expect(broker.subscription('events', 'payments')).toBe(payments);
    expect(payments.entity.peek().map((m) => m.body)).toEqual(['kept']);
    expect(() => broker.subscription('events', 'orders')).toThrow("'events/orders' does not exist");
    // The audit subscription now takes orders only; the topic still knows p1 (duplicate detection).
    expect(
      broker.topic('events').send({ messageId: 'p1', subject: 'PaymentReceived', body: '' }).accepted,
    ).toBe(false);
    expect(
      broker.topic('events').send({ messageId: 'p2', subject: 'PaymentReceived', body: '' }).deliveredTo,
    ).toEqual(['payments']);
    expect(
      broker.topic('events').send({ messageId: 'o2', subject: 'OrderCreated', body: '' }).deliveredTo,
    ).toEqual(['audit']);
    expect(
      broker.topic('shipping').send({ messageId: 's1', subject: 'ShipmentPlanned', body: '' }).deliveredTo,
    ).toEqual(['carriers']);
  });

  it('is refused, with the option to give, by a broker not told how delayed copies are told apart', () => {
    const declared: Topology = {
      topics: [{ name: 'events', subscriptions: [{ name: 'payments', subjects: ['A'], delayedRetry: {} }] }],
    };

    expect(() => new Broker({ topology: declared, clock: manualClock() })).toThrow(
      'events/Subscriptions/payments declares delayedRetry: give the broker retryCopies',
    );
    expect(() => setup().broker.declare(declared)).not.toThrow();
  });

  it('refilters a subscription that gains or loses delayedRetry, not one whose policy numbers change', () => {
    const { broker } = setup();
    const retrying: Topology = {
      topics: [
        {
          name: 'events',
          subscriptions: [
            {
              name: 'payments',
              subjects: ['PaymentReceived'],
              delayedRetry: { attempts: 3, firstDelaySeconds: 30 },
            },
            { name: 'orders', subjects: ['OrderCreated'] },
            { name: 'audit', subjects: ['PaymentReceived', 'OrderCreated'] },
          ],
        },
      ],
    };
    const copyFor = (subscription: string, messageId: string): string[] =>
      broker.topic('events').send({
        messageId,
        subject: RETRY_SUBJECT,
        body: '',
        applicationProperties: { [RETRY_PROPERTIES.for]: subscription },
      }).deliveredTo;

    expect(copyFor('payments', 'c0')).toEqual([]);
    expect(broker.declare(retrying)).toEqual({
      added: [],
      removed: [],
      refiltered: ['events/Subscriptions/payments'],
    });
    expect(copyFor('payments', 'c1')).toEqual(['payments']);
    expect(
      broker.declare({
        topics: [
          {
            ...retrying.topics[0]!,
            subscriptions: retrying.topics[0]!.subscriptions.map((s) =>
              s.delayedRetry === undefined
                ? s
                : { ...s, delayedRetry: { attempts: 5, firstDelaySeconds: 10 } },
            ),
          },
        ],
      }),
    ).toEqual({ added: [], removed: [], refiltered: [] });
    expect(broker.declare(topology)).toEqual({
      added: [],
      removed: [],
      refiltered: ['events/Subscriptions/payments'],
    });
    expect(copyFor('payments', 'c2')).toEqual([]);
    expect(broker.subscription('events', 'payments').rules.map((r) => r.filter)).toEqual([
      { kind: 'correlation', subject: 'PaymentReceived' },
    ]);
  });

  it('removes a topic no longer declared, and changes nothing for the same declaration', () => {
    const { broker } = setup();

    expect(broker.declare(topology)).toEqual({ added: [], removed: [], refiltered: [] });
    expect(broker.declare({ topics: [] })).toEqual({ added: [], removed: ['events'], refiltered: [] });
    expect(() => broker.topic('events')).toThrow("The topic 'events' does not exist");
  });
});

describe('subscription (peek-lock)', () => {
  it('hides a locked message, counts deliveries, and removes it on complete', () => {
    const { broker } = setup();
    const { entity } = broker.subscription('events', 'orders');
    broker.topic('events').send({ messageId: 'm', subject: 'OrderCreated', body: 'x' });

    const locked = entity.receive();
    const again = entity.receive();
    entity.complete(locked!.lockToken);

    expect(locked?.deliveryNumber).toBe(1);
    expect(locked?.message.deliveryCount).toBe(0);
    expect(again).toBeUndefined();
    expect(entity.activeCount).toBe(0);
    expect(entity.completed.map((m) => m.messageId)).toEqual(['m']);
  });

  it('makes a message visible again when its lock expires, and refuses the stale lock', () => {
    const { broker, clock } = setup();
    const { entity } = broker.subscription('events', 'orders');
    broker.topic('events').send({ messageId: 'm', subject: 'OrderCreated', body: 'x' });

    const first = entity.receive()!;
    clock.advance(60_001);
    const second = entity.receive();

    expect(second?.deliveryNumber).toBe(2);
    expect(second?.message.deliveryCount).toBe(1);
    expect(() => entity.complete(first.lockToken)).toThrow(MessageLockLostError);
  });

  it('keeps the lock while it is renewed', () => {
    const { broker, clock } = setup();
    const { entity } = broker.subscription('events', 'orders');
    broker.topic('events').send({ messageId: 'm', subject: 'OrderCreated', body: 'x' });

    const locked = entity.receive()!;
    for (let i = 0; i < 5; i++) {
      clock.advance(40_000);
      entity.renewLock(locked.lockToken);
    }

    expect(entity.receive()).toBeUndefined();
    expect(() => entity.complete(locked.lockToken)).not.toThrow();
  });

  it('dead-letters a message after maxDeliveryCount deliveries, with the reason and the last error', () => {
    const { broker } = setup();
    const subscription = broker.subscription('events', 'orders');
    broker.topic('events').send({ messageId: 'bad', subject: 'OrderCreated', body: 'x' });

    const counts: number[] = [];
    for (let i = 0; i < 3; i++) {
      const locked = subscription.entity.receive()!;
      counts.push(locked.deliveryNumber);
      subscription.entity.abandon(locked.lockToken, 'PoisonMessageError: not JSON');
    }
    const [deadLetter] = subscription.deadLetterQueue.peek();

    expect(counts).toEqual([1, 2, 3]);
    expect(subscription.entity.activeCount).toBe(0);
    expect(deadLetter?.deadLetter).toMatchObject({
      reason: 'MaxDeliveryCountExceeded',
      description: expect.stringContaining('PoisonMessageError: not JSON') as unknown,
    });
    expect(deadLetter?.deliveryCount).toBe(3);
  });

  it('dead-letters a message whose lock runs out on its last delivery, and delivers it no more', () => {
    const { broker, clock } = setup();
    const subscription = broker.subscription('events', 'orders');
    broker.topic('events').send({ messageId: 'slow', subject: 'OrderCreated', body: '{}' });
    for (let i = 0; i < 2; i++) {
      subscription.entity.abandon(subscription.entity.receive()!.lockToken);
    }
    subscription.entity.receive();

    clock.advance(61_000);

    expect(subscription.entity.receive()).toBeUndefined();
    expect(subscription.deadLetterQueue.peek()[0]).toMatchObject({
      deliveryCount: 3,
      deadLetter: { reason: 'MaxDeliveryCountExceeded' },
    });
  });

  it('dead-letters a message whose time to live has passed', () => {
    const { broker, clock } = setup();
    const subscription = broker.subscription('events', 'orders');
    broker
      .topic('events')
      .send({ messageId: 'old', subject: 'OrderCreated', body: 'x', timeToLiveMs: 1_000 });

    clock.advance(2_000);

    expect(subscription.entity.receive()).toBeUndefined();
    expect(subscription.deadLetterQueue.peek()[0]?.deadLetter?.reason).toBe('TTLExpiredException');
  });

  it('lets the dead-letter queue be read in peek-lock and completed', () => {
    const { broker } = setup();
    const subscription = broker.subscription('events', 'orders');
    broker.topic('events').send({ messageId: 'm', subject: 'OrderCreated', body: 'x' });
    const locked = subscription.entity.receive()!;
    subscription.entity.deadLetter(locked.lockToken, 'Rejected', 'by the test');

    const fromDeadLetters = subscription.deadLetterQueue.receive()!;
    subscription.deadLetterQueue.complete(fromDeadLetters.lockToken);

    expect(fromDeadLetters.message.deadLetter).toMatchObject({
      reason: 'Rejected',
      description: 'by the test',
    });
    expect(subscription.deadLetterQueue.activeCount).toBe(0);
  });

  it('wakes a waiting receiver when a message arrives', async () => {
    const { broker } = setup();
    const { entity } = broker.subscription('events', 'orders');

    const waiting = entity.nextMessage();
    broker.topic('events').send({ messageId: 'late', subject: 'OrderCreated', body: 'x' });

    expect((await waiting)?.message.messageId).toBe('late');
  });
});
