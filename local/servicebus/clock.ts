import { setTimeout as sleep } from 'node:timers/promises';

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
   * Jumps model time forward, as when nothing happens for an hour. Timers already set keep their
   * real deadlines, so jump only while nothing is locked (for example between two publishing phases).
   */
  advance(ms: number): void;
}

export function scaledClock(scale = 250, startMs = Date.now()): ScaledClock {
  if (!(scale > 0)) throw new Error(`The clock scale must be positive; got ${scale}.`);
  const realStart = performance.now();
  let offsetMs = 0;
  return {
    now: () => startMs + offsetMs + (performance.now() - realStart) * scale,
    advance: (ms) => {
      offsetMs += ms;
    },
    // Node runs timers at whole milliseconds: round up, so a timer never fires before its model time.
    sleep: (ms) => sleep(Math.max(0, Math.ceil(ms / scale))),
    after: (ms, callback) => {
      const timer = setTimeout(callback, Math.max(0, Math.ceil(ms / scale)));
      timer.unref();
      return () => clearTimeout(timer);
    },
  };
}

/**
 * Virtual model time for a deterministic run: it stands still while anything works and moves only
 * when the driver (sample/scenario/simulation.ts) fires the earliest timer, once every party
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
