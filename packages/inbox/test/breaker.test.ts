import type { Container } from '@azure/cosmos';
import {
  type BreakerClock,
  type BreakerLimits,
  breakerLimits,
  CircuitBreaker,
  CircuitOpenError,
  type Delivery,
  holdSeconds,
  loadSettings,
  PoisonMessageError,
  processDelivery,
  survivableOutageSeconds,
  systemClock,
  TransientStoreError,
} from '@idempotent-consumers/inbox/internal';

import { testConsumer } from '../src/testing';

/** Virtual time: timers fire only when the test advances it, in due order. */
class ManualClock implements BreakerClock {
  private time = 0;
  private timers: { at: number; callback: () => void }[] = [];

  now(): number {
    return this.time;
  }

  after(ms: number, callback: () => void): () => void {
    const timer = { at: this.time + ms, callback };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Timers set and neither fired nor cancelled. */
  get scheduled(): number {
    return this.timers.length;
  }

  /** Moves time forward, firing each due timer and letting the promises it settles run. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      await flush();
      const next = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.time = next.at;
      next.callback();
    }
    this.time = end;
    await flush();
  }
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

const limits: BreakerLimits = {
  failureThreshold: 3,
  holdMs: 270_000,
  probeIntervalMs: 5_000,
  backoffBaseMs: 500,
  backoffMaxMs: 30_000,
};
const transient = (): TransientStoreError => new TransientStoreError('503', 503);

function breaker(options: { random?: () => number; healthy?: () => boolean } = {}) {
  const clock = new ManualClock();
  const transitions: string[] = [];
  let probes = 0;
  const instance = new CircuitBreaker({
    limits,
    clock,
    random: options.random ?? (() => 0),
    probe: () => {
      probes++;
      return options.healthy?.() ? Promise.resolve() : Promise.reject(transient());
    },
    onTransition: (t) => transitions.push(t.state),
  });
  return { clock, instance, transitions, probes: () => probes };
}

/** Runs `work` and reports whether it has settled, and how, without waiting for it. */
function track(work: Promise<unknown>): {
  state: () => 'pending' | 'resolved' | 'rejected';
  error: () => unknown;
} {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  let error: unknown;
  work.then(
    () => (state = 'resolved'),
    (e: unknown) => {
      state = 'rejected';
      error = e;
    },
  );
  return { state: () => state, error: () => error };
}

describe('circuit breaker', () => {
  it('opens after the threshold of consecutive transient failures; a success in between resets the count', async () => {
    const { clock, instance, transitions } = breaker();

    await instance.failed(transient(), clock.now());
    await instance.failed(transient(), clock.now());
    instance.succeeded();
    await instance.failed(transient(), clock.now());
    await instance.failed(transient(), clock.now());
    expect(instance.state).toBe('closed');

    await instance.failed(transient(), clock.now());
    expect(instance.state).toBe('open');
    expect(transitions).toEqual(['open']);
    expect(instance.takeTransitions()).toEqual([
      { state: 'open', consecutiveFailures: 3, probes: 0, openForMs: 0 },
    ]);
    expect(instance.takeTransitions()).toEqual([]);
  });

  it('poison and other errors neither count nor back off; a released hold does not count again', async () => {
    const { clock, instance } = breaker({ random: () => 0.99 });

    for (let i = 0; i < 5; i++) {
      const poison = track(instance.failed(new PoisonMessageError('body-not-json', 'x'), clock.now()));
      const released = track(instance.failed(new CircuitOpenError(1), clock.now()));
      await flush();
      expect([poison.state(), released.state()]).toEqual(['resolved', 'resolved']);
    }
    expect(instance.state).toBe('closed');
  });

  it('holds deliveries while open, probes one at a time, and lets them go when a probe succeeds', async () => {
    let healthy = false;
    const { clock, instance, transitions, probes } = breaker({ healthy: () => healthy });
    for (let i = 0; i < 3; i++) await instance.failed(transient(), clock.now());

    const held = [track(instance.hold()), track(instance.hold())];
    await clock.advance(60_000);
    expect(held.map((h) => h.state())).toEqual(['pending', 'pending']);
    expect(probes()).toBe(12); // every 5 s, one at a time

    healthy = true;
    await clock.advance(5_000);
    expect(held.map((h) => h.state())).toEqual(['resolved', 'resolved']);
    expect(transitions).toEqual(['open', 'closed']);
    expect(instance.takeTransitions().at(-1)).toEqual({
      state: 'closed',
      consecutiveFailures: 3,
      probes: 13,
      openForMs: 65_000,
    });
    // Closed: a delivery is not held at all, and probing stopped.
    expect(track(instance.hold()).state()).toBe('pending');
    await flush();
    await clock.advance(60_000);
    expect(probes()).toBe(13);
  });

  it('releases a held delivery at holdMs after its start, before the lock renewal and functionTimeout end', async () => {
    const { clock, instance } = breaker();
    for (let i = 0; i < 3; i++) await instance.failed(transient(), clock.now());
    const startedAt = clock.now();
    await clock.advance(10_000);

    const held = track(instance.hold(startedAt));
    await clock.advance(limits.holdMs - 10_000 - 1);
    expect(held.state()).toBe('pending');
    await clock.advance(1);
    expect(held.state()).toBe('rejected');
    expect(held.error()).toBeInstanceOf(CircuitOpenError);
    expect(held.error()).toBeInstanceOf(TransientStoreError);
    expect(held.error()).toMatchObject({
      name: 'CircuitOpenError',
      message: expect.stringMatching(
        /^Cosmos DB is still failing \(circuit breaker open\): held 270 s, /,
      ) as unknown,
    });
  });

  it('opens once however many failures follow, closes, and opens and probes again on the next outage', async () => {
    let healthy = false;
    const { clock, instance, transitions, probes } = breaker({ healthy: () => healthy });
    await clock.advance(10_000);
    for (let i = 0; i < 5; i++) await instance.failed(transient(), clock.now());
    expect(transitions).toEqual(['open']);

    healthy = true;
    await clock.advance(5_000);
    expect(instance.state).toBe('closed');
    healthy = false;
    for (let i = 0; i < 3; i++) await instance.failed(transient(), clock.now());
    await clock.advance(10_000);
    healthy = true;
    await clock.advance(5_000);

    expect(instance.state).toBe('closed');
    expect(transitions).toEqual(['open', 'closed', 'open', 'closed']);
    expect(probes()).toBe(4);
    expect(instance.takeTransitions().map((t) => [t.state, t.openForMs])).toEqual([
      ['open', 0],
      ['closed', 5_000],
      ['open', 0],
      ['closed', 15_000],
    ]);
  });

  it('keeps the last 8 transitions for the next delivery to log, without onTransition too', async () => {
    let healthy = false;
    const clock = new ManualClock();
    const instance = new CircuitBreaker({
      limits,
      clock,
      random: () => 0,
      probe: () => (healthy ? Promise.resolve() : Promise.reject(transient())),
    });
    for (let outage = 0; outage < 5; outage++) {
      healthy = false;
      for (let i = 0; i < 3; i++) await instance.failed(transient(), clock.now());
      healthy = true;
      await clock.advance(5_000);
    }

    const kept = instance.takeTransitions();
    expect(kept).toHaveLength(8);
    expect(kept.map((t) => t.state)).toEqual([
      'open',
      'closed',
      'open',
      'closed',
      'open',
      'closed',
      'open',
      'closed',
    ]);
    expect(kept.at(-1)?.probes).toBe(1);
  });

  it('leaves no timer behind when it closes on deliveries it holds', async () => {
    let healthy = false;
    const { clock, instance } = breaker({ healthy: () => healthy });
    for (let i = 0; i < 3; i++) await instance.failed(transient(), clock.now());
    const held = [track(instance.hold()), track(instance.hold())];
    await flush();

    healthy = true;
    await clock.advance(5_000);

    expect(held.map((h) => h.state())).toEqual(['resolved', 'resolved']);
    expect(clock.scheduled).toBe(0);
  });

  it('the default settings hold a delivery for 4.5 minutes: 30 s before host.json ends lock renewal and the invocation', () => {
    const settings = loadSettings({ COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/' });
    expect(breakerLimits(settings)).toEqual(limits);
    // (maxDeliveryCount 10 − threshold 3) × 270 s − one probe interval of 5 s.
    expect(survivableOutageSeconds(settings)).toBe(1_885);
  });

  it('holds until the earlier of lock renewal and functionTimeout, whichever it is, less the release margin', () => {
    const settings = loadSettings({ COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/' });
    const host = (maxAutoLockRenewalSeconds: number, functionTimeoutSeconds: number) => ({
      ...settings,
      host: { maxAutoLockRenewalSeconds, functionTimeoutSeconds },
    });

    expect(holdSeconds(host(120, 600))).toBe(90);
    expect(holdSeconds(host(600, 120))).toBe(90);
    expect(breakerLimits(host(600, 120)).holdMs).toBe(90_000);
    // (10 − 3) × 90 s − 5 s; and never below zero when the threshold takes every delivery.
    expect(survivableOutageSeconds(host(600, 120))).toBe(625);
    expect(
      survivableOutageSeconds({ ...host(600, 120), breaker: { ...settings.breaker, failureThreshold: 10 } }),
    ).toBe(0);
  });
});

describe('backoff before a transient failure is rethrown', () => {
  it('is full jitter below min(max, base × 2^(n−1)), for any random value', () => {
    for (const random of [0, 0.25, 0.999_999]) {
      const { instance } = breaker({ random: () => random });
      const delays = [1, 2, 3, 4, 5, 6, 7, 8, 20].map((n) => instance.backoffMs(n));
      const caps = [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000];
      delays.forEach((delay, i) => {
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThan(caps[i] ?? 0);
        expect(delay).toBe(Math.floor(random * (caps[i] ?? 0)));
      });
    }
  });

  it('waits the backoff, cut short so the invocation ends within holdMs of its start', async () => {
    const { clock, instance } = breaker({ random: () => 0.5 });
    const first = track(instance.failed(transient(), clock.now()));
    await clock.advance(249);
    expect(first.state()).toBe('pending');
    await clock.advance(1);
    expect(first.state()).toBe('resolved'); // 0.5 × 500 ms

    const startedAt = clock.now() - limits.holdMs + 100; // 100 ms of budget left
    instance.succeeded();
    const late = track(instance.failed(transient(), startedAt));
    await clock.advance(100);
    expect(late.state()).toBe('resolved');
  });
});

const delivery = (body: unknown, messageId: string | undefined): Delivery => ({
  body,
  messageId,
  messageIdIsLossy: false,
  deliveryCount: 1,
  enqueuedTimeUtc: undefined,
  subject: undefined,
  correlationId: undefined,
  applicationProperties: {},
});

describe('a poison message is never held', () => {
  it('is found before the hold; a valid message reaches it (and, held to its limit, is given back)', async () => {
    const { clock, instance } = breaker();
    for (let i = 0; i < 3; i++) await instance.failed(transient(), clock.now());
    let holds = 0;
    const deps = {
      // Never reached: the poison is found before, and the valid message is released at the hold.
      container: {} as Container,
      settings: { inbox: { retentionSeconds: 1, ttlBackstopSeconds: undefined, maxAttempts: 1 } },
      now: () => new Date(0),
      sleep: () => Promise.resolve(),
      random: () => 0,
      beforeStore: () => {
        holds++;
        return instance.hold();
      },
    };
    const consumer = testConsumer(() => undefined);
    const valid = { accountId: 'A-1', amount: 10 };
    const poison = [
      { body: '{not json', messageId: 'm1' },
      { body: { ...valid, amount: 'ten' }, messageId: 'm2' },
      { body: valid, messageId: undefined },
    ];
    for (const { body, messageId } of poison) {
      await expect(processDelivery(consumer, delivery(body, messageId), deps)).rejects.toBeInstanceOf(
        PoisonMessageError,
      );
    }
    expect(holds).toBe(0);

    const held = track(processDelivery(consumer, delivery(valid, 'm3'), deps));
    await clock.advance(limits.holdMs);
    expect(holds).toBe(1);
    expect(held.error()).toBeInstanceOf(CircuitOpenError);
  });
});

describe('the system clock', () => {
  it('tells the time, calls back after a delay, and not at all once cancelled', async () => {
    const before = Date.now();
    const now = systemClock.now();
    const calls: string[] = [];

    const fired = new Promise<void>((resolve) =>
      systemClock.after(5, () => resolve(void calls.push('fired'))),
    );
    const cancel = systemClock.after(1, () => calls.push('cancelled'));
    cancel();
    await fired;
    await new Promise((resolve) => setTimeout(resolve, 20));

    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
    expect(calls).toEqual(['fired']);
  });
});
