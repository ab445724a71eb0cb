import type { Container, CosmosDiagnostics, ErrorResponse, OperationInput } from '@azure/cosmos';

import { storeStatusOf } from './errors';
import { EVENT_KEY_TYPE } from './eventKey';
import { MARKER_TYPE } from './marker';

/** How far one purge run may go (see runPurge). */
export interface PurgeOptions {
  now: Date;
  maxItems: number;
  maxDurationMs: number;
  /** Markers fetched per query; default 100 (one batch per partition at most). */
  pageSize?: number;
  /** Request units per second the run may spend on average; default: no limit. */
  maxRequestUnitsPerSecond?: number;
  /** Monotonic clock for the time cap and the pacing, in ms; default performance.now. */
  clock?: () => number;
  /** Waits (pacing, back-off); default setTimeout. */
  sleep?: (ms: number) => Promise<void>;
}

export interface PurgeReport {
  purged: number;
  /** Deleted by someone else first, or re-created since the query (and so not expired any more). */
  skipped: number;
  /** Expired markers and event key documents left when the run ended (0 when it finished). */
  expiredRemaining: number;
  /** Markers stored after the run: the inbox size. */
  markers: number;
  stoppedBy: 'done' | 'item-cap' | 'time-cap';
  requestCharge: number;
  /** 429 answers the run met, whether the SDK retried them or the purge waited them out. */
  throttled: number;
  /** Time spent waiting for the budget or after a 429, in ms. */
  waitedMs: number;
}

interface ExpiredMarker {
  id: string;
  partitionKey: string;
  expiresAtEpochSeconds: number;
  _etag: string;
}

const EXPIRED_QUERY =
  // Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing), and the purge tests pin what it selects
  'SELECT TOP @limit c.id, c.partitionKey, c.expiresAtEpochSeconds, c._etag FROM c ' +
  // Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing), and the purge tests pin what it selects
  'WHERE c.type IN (@type, @eventKeyType) AND c.expiresAtEpochSeconds <= @now';

/**
 * One bounded run of the marker purge: deletes markers and event key documents (./eventKey.ts)
 * whose retention has passed, and stops at
 * `maxItems` or `maxDurationMs`; the next run starts from whatever is still expired, so nothing
 * needs to be remembered between runs. Two purges at once, or a marker deleted meanwhile, are harmless: a
 * delete that finds nothing (404) or a changed marker (412) is skipped.
 *
 * A run spends at most `maxRequestUnitsPerSecond` on average, so that it leaves the rest of the
 * account's throughput to the consumers: before each request it waits until the request units spent
 * so far fit the budget (a request's charge is known only once it has run, so one request may go
 * over; a page of deletes costs about 5 RU per marker). A 429 that outlasts the SDK's own retries
 * is waited out (its retry-after) and the request repeated, within `maxDurationMs`.
 */
export async function runPurge(container: Container, options: PurgeOptions): Promise<PurgeReport> {
  const report: PurgeReport = {
    purged: 0,
    skipped: 0,
    expiredRemaining: 0,
    markers: 0,
    stoppedBy: 'done',
    requestCharge: 0,
    throttled: 0,
    waitedMs: 0,
  };
  const budget = new Budget(options, report);
  const nowSeconds = Math.floor(options.now.getTime() / 1000);
  const pageSize = options.pageSize ?? 100;

  try {
    for (;;) {
      const itemsLeft = options.maxItems - report.purged - report.skipped;
      if (itemsLeft <= 0) {
        report.stoppedBy = 'item-cap';
        break;
      }
      if (budget.timeUp()) throw new TimeUp();
      const limit = Math.min(pageSize, itemsLeft);
      const page = await budget.request(() =>
        container.items
          .query<ExpiredMarker>({
            query: EXPIRED_QUERY,
            parameters: [
              { name: '@limit', value: limit },
              { name: '@type', value: MARKER_TYPE },
              { name: '@eventKeyType', value: EVENT_KEY_TYPE },
              { name: '@now', value: nowSeconds },
            ],
          })
          .fetchAll(),
      );
      // The query already filters; checking again costs nothing and keeps a wrong query from ever
      // deleting a live marker or a business document.
      const expired = page.resources.filter(
        (m) => typeof m.expiresAtEpochSeconds === 'number' && m.expiresAtEpochSeconds <= nowSeconds,
      );
      for (const group of groupByPartition(expired)) await deletePartitionGroup(container, group, budget);
      if (page.resources.length < limit) break;
    }
  } catch (error) {
    if (!(error instanceof TimeUp)) throw error;
    report.stoppedBy = 'time-cap';
  }

  // The two counts run after the cap, as before, paced; a 429 gets one more run's length of patience.
  budget.extendDeadline(options.maxDurationMs);
  report.expiredRemaining = await count(
    container,
    'c.type IN (@type, @eventKeyType) AND c.expiresAtEpochSeconds <= @now',
    nowSeconds,
    budget,
  );
  report.markers = await count(container, 'c.type = @type', nowSeconds, budget);
  return report;
}

/** Thrown when the next wait (for the budget or after a 429) would end after the run's deadline. */
class TimeUp extends Error {}

/**
 * The run's request units and time: every request goes through `request`, which waits until the
 * units spent so far fit `maxRequestUnitsPerSecond`, adds the request's charge and 429s to the
 * report, and waits out a 429 the SDK gave up on.
 */
class Budget {
  private readonly clock: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly startedAt: number;
  private deadline: number;

  constructor(
    private readonly options: PurgeOptions,
    readonly report: PurgeReport,
  ) {
    this.clock = options.clock ?? (() => performance.now());
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.startedAt = this.clock();
    this.deadline = this.startedAt + options.maxDurationMs;
  }

  timeUp(): boolean {
    return this.clock() >= this.deadline;
  }

  extendDeadline(ms: number): void {
    this.deadline = Math.max(this.deadline, this.clock()) + ms;
  }

  async request<T extends { requestCharge: number; diagnostics?: CosmosDiagnostics }>(
    send: () => Promise<T>,
  ): Promise<T> {
    for (;;) {
      const rate = this.options.maxRequestUnitsPerSecond;
      const dueAt = rate === undefined ? 0 : this.startedAt + (this.report.requestCharge / rate) * 1000;
      await this.wait(dueAt - this.clock());
      try {
        const response = await send();
        this.report.requestCharge += response.requestCharge;
        this.report.throttled += throttledAttempts(response.diagnostics);
        return response;
      } catch (error) {
        const cause = (error as { cause?: unknown }).cause ?? error;
        const { code, retryAfterInMs, diagnostics } = cause as {
          code?: unknown;
          retryAfterInMs?: number;
          diagnostics?: CosmosDiagnostics;
        };
        if (code !== 429) throw error;
        // Every attempt the SDK made was a 429, the last one included.
        this.report.throttled += Math.max(1, throttledAttempts(diagnostics));
        await this.wait(retryAfterInMs ?? 1000);
      }
    }
  }

  /** A request that failed with an expected status (a 404 or 412 on one delete) still costs units. */
  charge(error: ErrorResponse): void {
    this.report.requestCharge += error.requestCharge ?? 0;
    this.report.throttled += throttledAttempts(error.diagnostics);
  }

  private async wait(ms: number): Promise<void> {
    if (ms <= 0) return;
    if (this.clock() + ms >= this.deadline) throw new TimeUp();
    await this.sleep(ms);
    this.report.waitedMs += ms;
  }
}

function throttledAttempts(diagnostics: CosmosDiagnostics | undefined): number {
  const attempts = diagnostics?.clientSideRequestStatistics?.retryDiagnostics?.failedAttempts ?? [];
  return attempts.filter((attempt) => Number(attempt.statusCode) === 429).length;
}

function groupByPartition(markers: ExpiredMarker[]): ExpiredMarker[][] {
  const groups = new Map<string, ExpiredMarker[]>();
  for (const marker of markers) {
    const group = groups.get(marker.partitionKey) ?? [];
    group.push(marker);
    groups.set(marker.partitionKey, group);
  }
  return [...groups.values()];
}

/**
 * One transactional batch of deletes per partition (100 at most): one round trip instead of one per
 * marker. Each delete carries the ETag the query saw, so a marker re-created since is left alone. If
 * the batch fails because one marker is already gone, fall back to one delete each.
 */
async function deletePartitionGroup(
  container: Container,
  group: ExpiredMarker[],
  budget: Budget,
): Promise<void> {
  const partitionKey = group[0]?.partitionKey;
  if (partitionKey === undefined) return;
  const deletes = group.map(
    (marker) => ({ operationType: 'Delete', id: marker.id, ifMatch: marker._etag }) as OperationInput,
  );
  const response = await budget.request(async () => {
    const batch = await container.items.batch(deletes, partitionKey);
    const results = batch.result ?? [];
    return { ...batch, requestCharge: results.reduce((sum, result) => sum + (result.requestCharge ?? 0), 0) };
  });
  const report = budget.report;
  if (response.code === 200) {
    report.purged += group.length;
    return;
  }
  for (const marker of group) {
    try {
      await budget.request(() =>
        container
          .item(marker.id, partitionKey)
          .delete({ accessCondition: { type: 'IfMatch', condition: marker._etag } }),
      );
      report.purged++;
    } catch (error) {
      const status = storeStatusOf(error);
      if (status !== 404 && status !== 412) throw error;
      budget.charge(error as ErrorResponse);
      report.skipped++;
    }
  }
}

async function count(
  container: Container,
  where: string,
  nowSeconds: number,
  budget: Budget,
): Promise<number> {
  const { resources } = await budget.request(() =>
    container.items
      .query<number>({
        query: `SELECT VALUE COUNT(1) FROM c WHERE ${where}`,
        parameters: [
          { name: '@type', value: MARKER_TYPE },
          { name: '@eventKeyType', value: EVENT_KEY_TYPE },
          { name: '@now', value: nowSeconds },
        ],
      })
      .fetchAll(),
  );
  return resources.reduce((sum, value) => sum + value, 0);
}
