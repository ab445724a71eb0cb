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
