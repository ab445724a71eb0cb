import { TransientStoreError } from './errors';
import type { Settings } from './settings';

/**
 * Backoff and a circuit breaker for Cosmos DB outages, one per instance (process).
 *
 * Without them a failing delivery takes milliseconds, Service Bus redelivers it at once, and after
 * maxDeliveryCount deliveries it is dead-lettered: a few minutes of outage would empty the
 * subscription into the dead-letter queue. Instead:
 * - a transient failure waits a jittered backoff before it is rethrown (the message is given back
 *   slowly);
 * - after `failureThreshold` consecutive transient failures the breaker opens. While it is open a
 *   delivery that reached the store is held: the handler awaits, so the host's maxConcurrentCalls
 *   slots stay busy and the instance receives nothing new. One probe at a time (a point read) checks
 *   Cosmos DB every `probeIntervalMs`; when one succeeds the breaker closes and held deliveries go on.
 * - a held delivery is released (rethrown: Service Bus redelivers it) after `holdMs`, before the
 *   host stops renewing its lock and before functionTimeout. A message that is poison without asking
 *   Cosmos DB (no MessageId, not JSON, schema, partition key) is found before the hold, never held.
 */
export interface BreakerLimits {
  /** Consecutive transient failures that open the breaker. */
  failureThreshold: number;
  /** The longest one invocation may spend held or backing off, ms. */
  holdMs: number;
  /** Between two probes while open, ms. */
  probeIntervalMs: number;
  /** Backoff before rethrowing the n-th consecutive failure: random × min(max, base × 2^(n−1)), ms. */
  backoffBaseMs: number;
  backoffMaxMs: number;
}

/** Time for the breaker: the system clock in Azure, the model clock offline. */
export interface BreakerClock {
  now(): number;
  /** Calls `callback` after `ms`; returns a cancel function. */
  after(ms: number, callback: () => void): () => void;
}

export type BreakerState = 'closed' | 'open';

/** What a state change reports: no message content, a fixed set of numbers. */
export interface BreakerTransition {
  state: BreakerState;
  /** Opened: the consecutive transient failures seen. Closed: the probes it took. */
  consecutiveFailures: number;
  probes: number;
  /** Closed: how long it was open, ms. */
  openForMs: number;
}

export interface BreakerOptions {
  limits: BreakerLimits;
  clock: BreakerClock;
  random: () => number;
  /** A cheap request that succeeds when Cosmos DB serves requests again (throws otherwise). */
  probe: () => Promise<unknown>;
  /** Told about every state change (metrics). */
  onTransition?: (transition: BreakerTransition) => void;
}

/** A held delivery reached its limit while the breaker was still open: give it back now. */
export class CircuitOpenError extends TransientStoreError {
  constructor(heldMs: number) {
    super(
      `Cosmos DB is still failing (circuit breaker open): held ${Math.round(heldMs / 1000)} s, giving the message back before its lock renewal or the function timeout ends.`,
      undefined,
    );
    this.name = 'CircuitOpenError';
  }
}

/** Transitions kept for the next delivery to log; older ones are dropped (and counted in metrics anyway). */
const MAX_PENDING_TRANSITIONS = 8;

export class CircuitBreaker {
  private current: BreakerState = 'closed';
  private consecutiveFailures = 0;
  private openedAt = 0;
  private probes = 0;
  private probing = false;
  private waiters = new Set<() => void>();
  private pending: BreakerTransition[] = [];

  constructor(readonly options: BreakerOptions) {}

  get state(): BreakerState {
    return this.current;
  }

  now(): number {
    return this.options.clock.now();
  }

  /**
   * Returns at once while closed. While open, waits until the breaker closes, or throws
   * CircuitOpenError once `holdMs` have passed since `startedAt` (the invocation's start).
   */
  async hold(startedAt = this.now()): Promise<void> {
    if (this.current === 'closed') return;
    const { clock, limits } = this.options;
    const remaining = startedAt + limits.holdMs - clock.now();
    const closed = await new Promise<boolean>((resolve) => {
      const cancel = clock.after(Math.max(0, remaining), () => {
        // Stryker disable next-line CallExpression: equivalent: a waiter left behind only resolves a settled promise when the breaker closes
        this.waiters.delete(wake);
        resolve(false);
      });
      const wake = (): void => {
        cancel();
        resolve(true);
      };
      this.waiters.add(wake);
    });
    if (!closed) throw new CircuitOpenError(clock.now() - startedAt);
  }

  /** Cosmos DB served the delivery. */
  succeeded(): void {
    this.consecutiveFailures = 0;
  }

  /**
   * After a delivery failed: a transient store failure is counted (the breaker may open) and waits
   * its jittered backoff, cut short so the invocation ends within `holdMs` of `startedAt`. Other
   * errors, and a hold that ran out, return at once.
   */
  async failed(error: unknown, startedAt: number): Promise<void> {
    if (!(error instanceof TransientStoreError) || error instanceof CircuitOpenError) return;
    this.consecutiveFailures++;
    if (this.current === 'closed' && this.consecutiveFailures >= this.options.limits.failureThreshold) {
      this.open();
    }
    const { clock, limits } = this.options;
    const delay = Math.min(this.backoffMs(this.consecutiveFailures), startedAt + limits.holdMs - clock.now());
    if (delay > 0) await new Promise<void>((resolve) => clock.after(delay, resolve));
  }

  /** The n-th consecutive failure's backoff: full jitter, below min(max, base × 2^(n−1)). */
  backoffMs(failures: number): number {
    const { backoffBaseMs, backoffMaxMs } = this.options.limits;
    const cap = Math.min(backoffMaxMs, backoffBaseMs * 2 ** Math.min(30, Math.max(0, failures - 1)));
    return Math.floor(this.options.random() * cap);
  }

  /** State changes since the last call, oldest first, for the caller to log. */
  takeTransitions(): BreakerTransition[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }

  private open(): void {
    this.current = 'open';
    this.openedAt = this.now();
    this.probes = 0;
    this.report({ state: 'open', consecutiveFailures: this.consecutiveFailures, probes: 0, openForMs: 0 });
    this.scheduleProbe();
  }

  private close(): void {
    this.current = 'closed';
    this.report({
      state: 'closed',
      consecutiveFailures: this.consecutiveFailures,
      probes: this.probes,
      openForMs: this.now() - this.openedAt,
    });
    this.consecutiveFailures = 0;
    const waiters = [...this.waiters];
    // Stryker disable next-line CallExpression: equivalent: a waiter woken twice only resolves a settled promise
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  /** One probe at a time, `probeIntervalMs` apart, until one succeeds. */
  private scheduleProbe(): void {
    // Stryker disable next-line ConditionalExpression: equivalent: open() runs only when closed, and a probe is never scheduled while one is out
    if (this.probing) return;
    // Stryker disable next-line BooleanLiteral: equivalent: open() runs only when closed, and a probe is never scheduled while one is out
    this.probing = true;
    this.options.clock.after(this.options.limits.probeIntervalMs, () => {
      this.probes++;
      this.options.probe().then(
        () => {
          this.probing = false;
          // Stryker disable next-line ConditionalExpression: equivalent: only a probe closes the breaker, and only one is out at a time
          if (this.current === 'open') this.close();
        },
        () => {
          this.probing = false;
          // Stryker disable next-line ConditionalExpression: equivalent: only a probe closes the breaker, and only one is out at a time
          if (this.current === 'open') this.scheduleProbe();
        },
      );
    });
  }

  private report(transition: BreakerTransition): void {
    this.pending.push(transition);
    if (this.pending.length > MAX_PENDING_TRANSITIONS) this.pending.shift();
    this.options.onTransition?.(transition);
  }
}

/** The breaker's limits from the settings (see Settings.breaker and the README's arithmetic). */
export function breakerLimits(settings: Pick<Settings, 'breaker' | 'host'>): BreakerLimits {
  const { breaker } = settings;
  return {
    failureThreshold: breaker.failureThreshold,
    holdMs: holdSeconds(settings) * 1000,
    probeIntervalMs: breaker.probeIntervalSeconds * 1000,
    backoffBaseMs: breaker.backoffBaseSeconds * 1000,
    backoffMaxMs: breaker.backoffMaxSeconds * 1000,
  };
}

/**
 * How long one invocation may be held: until the earlier of the host's last lock renewal
 * (maxAutoLockRenewalDuration) and functionTimeout, less a release margin for the work after it.
 */
export function holdSeconds(settings: Pick<Settings, 'breaker' | 'host'>): number {
  const { maxAutoLockRenewalSeconds, functionTimeoutSeconds } = settings.host;
  return Math.min(maxAutoLockRenewalSeconds, functionTimeoutSeconds) - settings.breaker.releaseMarginSeconds;
}

/**
 * The longest Cosmos DB outage after which no message has been dead-lettered, in the worst case: a
 * message's first `failureThreshold` deliveries may fail (quickly, backoff can be 0) before the
 * breaker opens; each later delivery is held `holdMs` before it is given back, and the last one
 * must see a probe succeed (up to `probeIntervalMs` after the recovery) before its hold ends.
 */
export function survivableOutageSeconds(settings: Pick<Settings, 'breaker' | 'host' | 'redelivery'>): number {
  const heldDeliveries = settings.redelivery.maxDeliveryCount - settings.breaker.failureThreshold;
  return Math.max(0, heldDeliveries * holdSeconds(settings) - settings.breaker.probeIntervalSeconds);
}

/** The system clock, for Azure. */
export const systemClock: BreakerClock = {
  now: () => Date.now(),
  after: (ms, callback) => {
    const timer = setTimeout(callback, ms);
    return () => clearTimeout(timer);
  },
};
