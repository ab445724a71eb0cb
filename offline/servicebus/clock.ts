import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Model time. The broker and the host model think in Service Bus units (a one-minute lock, a
 * one-hour duplicate window); a scaled clock runs them `scale` times faster than the wall clock, so
 * that a lock of PT1M lasts 60 ms at scale 1000 while the handlers' calls to Cosmos DB take the real
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

export function scaledClock(scale = 1000, startMs = Date.now()): Clock {
  if (!(scale > 0)) throw new Error(`The clock scale must be positive; got ${scale}.`);
  const realStart = performance.now();
  return {
    now: () => startMs + (performance.now() - realStart) * scale,
    sleep: (ms) => sleep(Math.max(0, ms / scale)),
    after: (ms, callback) => {
      const timer = setTimeout(callback, Math.max(0, ms / scale));
      timer.unref();
      return () => clearTimeout(timer);
    },
  };
}
