/**
 * Model time. The broker and the host model think in Service Bus units (a one-minute lock, a
 * one-hour duplicate window); a scaled clock runs them `scale` times faster than the wall clock, so
 * that a lock of PT1M lasts 240 ms at scale 250 while the handlers' calls to Cosmos DB take the real
 * time they take. Everything the model schedules goes through here.
 */
export interface Clock {
  /** Model time in epoch milliseconds. */
  now(): number;
  /** Waits `ms` of model time. */
  sleep(ms: number): Promise<void>;
  /** Calls `callback` after `ms` of model time; returns a cancel function. */
  after(ms: number, callback: () => void): () => void;
}

export interface ScaledClock extends Clock {
  /**
   * Jumps model time forward, as when nothing happens for an hour. Timers already set follow model
   * time: one now due fires at once, the others at their new real deadline.
   */
  advance(ms: number): void;
}

/** The longest delay setTimeout takes (2^31 - 1 ms, 24.8 days): Node fires a longer one after 1 ms. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export function scaledClock(scale = 250, startMs = Date.now()): ScaledClock {
  if (!(scale > 0)) throw new Error(`The clock scale must be positive; got ${scale}.`);
  const realStart = performance.now();
  let offsetMs = 0;
  const now = (): number => startMs + offsetMs + (performance.now() - realStart) * scale;
  interface Timer {
    /** Model time it is due. */
    at: number;
    callback: () => void;
    /** A sleep keeps the process alive, as an awaited timer does; `after` does not. */
    keepsAlive: boolean;
    handle?: NodeJS.Timeout;
  }
  const pending = new Set<Timer>();
  // Set again at each step, so that a delay past setTimeout's limit (a message scheduled a month
  // ahead, by a client) waits in steps, and a timer follows `advance`. Node runs timers at whole
  // milliseconds: round up, and set again a timer that fires before its model time.
  const aim = (timer: Timer): void => {
    clearTimeout(timer.handle);
    const realMs = Math.max(0, Math.ceil((timer.at - now()) / scale));
    timer.handle = setTimeout(
      () => {
        if (now() < timer.at) return aim(timer);
        pending.delete(timer);
        timer.callback();
      },
      Math.min(realMs, MAX_TIMEOUT_MS),
    );
    if (!timer.keepsAlive) timer.handle.unref();
  };
  const schedule = (ms: number, callback: () => void, keepsAlive: boolean): (() => void) => {
    const timer: Timer = { at: now() + Math.max(0, ms), callback, keepsAlive };
    pending.add(timer);
    aim(timer);
    return () => {
      clearTimeout(timer.handle);
      pending.delete(timer);
    };
  };
  return {
    now,
    advance: (ms) => {
      offsetMs += ms;
      for (const timer of pending) aim(timer);
    },
    sleep: (ms) => new Promise<void>((resolve) => schedule(ms, resolve, true)),
    after: (ms, callback) => schedule(ms, callback, false),
  };
}

/**
 * Virtual model time for a deterministic run: it stands still while anything works and moves only
 * when the driver (simulation.ts) fires the earliest timer, once every party
 * waits. Timers due at the same moment fire in the order they were set.
 */
export interface VirtualClock extends ScaledClock {
  /** Moves model time to the earliest timer and fires it; false when no timer is set. */
  fireNext(): boolean;
  /** Called each time a timer is set or fired (the driver's sign that something happened). */
  onActivity?: () => void;
}

/** A fixed start, so that a replay sees the same model times: 2030-01-01T00:00:00Z. */
export const VIRTUAL_EPOCH_MS = Date.UTC(2030, 0, 1);

export function virtualClock(startMs = VIRTUAL_EPOCH_MS): VirtualClock {
  interface Timer {
    at: number;
    order: number;
    callback: () => void;
  }
  let nowMs = startMs;
  let order = 0;
  const timers: Timer[] = [];
  const after = (ms: number, callback: () => void): (() => void) => {
    const timer = { at: nowMs + Math.max(0, ms), order: order++, callback };
    // Kept sorted by (at, order): the insertion point is after every timer due no later.
    let low = 0;
    let high = timers.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((timers[middle]?.at ?? 0) <= timer.at) low = middle + 1;
      else high = middle;
    }
    timers.splice(low, 0, timer);
    clock.onActivity?.();
    return () => {
      const index = timers.indexOf(timer);
      if (index >= 0) timers.splice(index, 1);
    };
  };
  const clock: VirtualClock = {
    now: () => nowMs,
    advance: (ms) => {
      nowMs += ms;
    },
    sleep: (ms) => new Promise<void>((resolve) => after(ms, resolve)),
    after,
    fireNext: () => {
      const timer = timers.shift();
      if (!timer) return false;
      nowMs = Math.max(nowMs, timer.at);
      clock.onActivity?.();
      timer.callback();
      return true;
    },
  };
  return clock;
}
