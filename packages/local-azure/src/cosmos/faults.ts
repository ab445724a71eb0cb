/**
 * Faults injected into the local server at run time, so tests can reproduce what production does:
 * throttling, outages, slowness, the ambiguous case where a write commits but its response is lost,
 * and any status on a request or on one operation of a batch.
 */
import type { ErrorStatus } from './errors';

export const FAULT_TARGETS = ['read', 'write', 'batch', 'query', 'metadata'] as const;
export type FaultTarget = (typeof FAULT_TARGETS)[number];

interface FaultSelection {
  /** Which requests the fault applies to; default: every data request (read, write, batch, query). */
  on?: FaultTarget | readonly FaultTarget[];
  /** Let this many matching requests through before the fault starts; default 0. */
  skip?: number;
  /** Stop after firing this many times; default: no limit. */
  times?: number;
  /** Chance that a matching request is hit, from the server's seeded random source; default 1. */
  probability?: number;
  /** Only requests whose User-Agent contains this text: one client among several; default every client. */
  userAgent?: string;
}

export type FaultRule = FaultSelection &
  (
    | { kind: 'throttle'; /** `x-ms-retry-after-ms` sent with the 429; default 10. */ retryAfterMs?: number }
    | { kind: 'unavailable' }
    | { kind: 'latency'; ms: number }
    | { kind: 'dropResponseAfterCommit' }
    | {
        kind: 'status';
        /** The status the request (or, with `operation`, that operation of a batch) fails with. */
        status: ErrorStatus;
        /**
         * A batch's operation (0-based) that fails with `status`, the others answering 424 (failed
         * dependency), nothing committed: what Cosmos DB answers when one operation fails. Without
         * it, the whole request fails.
         */
        operation?: number;
      }
  );

export interface FaultHandle {
  /** How many requests this rule has hit so far. */
  readonly hits: number;
  remove(): void;
}

export interface FaultDecision {
  delayMs: number;
  /** 429 / 503 / any status instead of processing, or drop the connection after processing. */
  outcome?:
    | { kind: 'throttle'; retryAfterMs: number }
    | { kind: 'unavailable' }
    | { kind: 'dropResponseAfterCommit' }
    | { kind: 'status'; status: ErrorStatus; operation?: number };
}

const DATA_TARGETS: readonly FaultTarget[] = ['read', 'write', 'batch', 'query'];

class ActiveRule implements FaultHandle {
  hits = 0;
  private seen = 0;

  constructor(
    readonly rule: FaultRule,
    private readonly owner: FaultInjector,
  ) {}

  matches(target: FaultTarget, userAgent: string, random: () => number): boolean {
    const targets = this.rule.on === undefined ? DATA_TARGETS : [this.rule.on].flat();
    if (!targets.includes(target)) return false;
    if (this.rule.userAgent !== undefined && !userAgent.includes(this.rule.userAgent)) return false;
    if (this.seen++ < (this.rule.skip ?? 0)) return false;
    if (this.rule.times !== undefined && this.hits >= this.rule.times) return false;
    if (this.rule.probability !== undefined && random() >= this.rule.probability) return false;
    this.hits++;
    return true;
  }

  remove(): void {
    this.owner.remove(this);
  }
}

export class FaultInjector {
  private rules: ActiveRule[] = [];

  constructor(private random: () => number) {}

  reseed(random: () => number): void {
    this.random = random;
  }

  inject(rule: FaultRule): FaultHandle {
    const active = new ActiveRule(rule, this);
    this.rules.push(active);
    return active;
  }

  remove(handle: FaultHandle): void {
    this.rules = this.rules.filter((rule) => rule !== handle);
  }

  clear(): void {
    this.rules = [];
  }

  decide(target: FaultTarget, userAgent = ''): FaultDecision {
    const decision: FaultDecision = { delayMs: 0 };
    for (const active of this.rules) {
      const { rule } = active;
      if (rule.kind !== 'latency' && decision.outcome) continue;
      if (!active.matches(target, userAgent, this.random)) continue;
      switch (rule.kind) {
        case 'latency':
          decision.delayMs += rule.ms;
          break;
        case 'throttle':
          decision.outcome = { kind: 'throttle', retryAfterMs: rule.retryAfterMs ?? 10 };
          break;
        case 'unavailable':
        case 'dropResponseAfterCommit':
          decision.outcome = { kind: rule.kind };
          break;
        case 'status':
          decision.outcome = { kind: 'status', status: rule.status, operation: rule.operation };
          break;
      }
    }
    return decision;
  }
}
