import type { Container, OperationInput } from '@azure/cosmos';

import { MARKER_TYPE } from './marker';

/**
 * Deletes markers whose retention has passed, in bounded runs. A run stops at `maxItems` or
 * `maxDurationMs`; the next run starts from whatever is still expired, so nothing needs to be
 * remembered between runs. Two purges at once, or a marker deleted meanwhile, are harmless: a
 * delete that finds nothing (404) or a changed marker (412) is skipped.
 */
export interface PurgeOptions {
  now: Date;
  maxItems: number;
  maxDurationMs: number;
  /** Markers fetched per query; default 100 (one batch per partition at most). */
  pageSize?: number;
  /** Monotonic clock for the time cap, in ms; default performance.now. */
  clock?: () => number;
}

export interface PurgeReport {
  purged: number;
  /** Deleted by someone else first, or re-created since the query (and so not expired any more). */
  skipped: number;
  /** Expired markers left when the run ended (0 when it finished). */
  expiredRemaining: number;
  /** Markers stored after the run: the inbox size. */
  markers: number;
  stoppedBy: 'done' | 'item-cap' | 'time-cap';
  requestCharge: number;
}

interface ExpiredMarker {
  id: string;
  partitionKey: string;
  expiresAtEpochSeconds: number;
  _etag: string;
}

const EXPIRED_QUERY =
  'SELECT TOP @limit c.id, c.partitionKey, c.expiresAtEpochSeconds, c._etag FROM c ' +
  'WHERE c.type = @type AND c.expiresAtEpochSeconds <= @now';

export async function purgeExpiredMarkers(container: Container, options: PurgeOptions): Promise<PurgeReport> {
  const clock = options.clock ?? (() => performance.now());
  const deadline = clock() + options.maxDurationMs;
  const nowSeconds = Math.floor(options.now.getTime() / 1000);
  const pageSize = options.pageSize ?? 100;
  const report: PurgeReport = {
    purged: 0,
    skipped: 0,
    expiredRemaining: 0,
    markers: 0,
    stoppedBy: 'done',
    requestCharge: 0,
  };

  for (;;) {
    const budget = options.maxItems - report.purged - report.skipped;
    if (budget <= 0) {
      report.stoppedBy = 'item-cap';
      break;
    }
    if (clock() >= deadline) {
      report.stoppedBy = 'time-cap';
      break;
    }
    const limit = Math.min(pageSize, budget);
    const page = await container.items
      .query<ExpiredMarker>({
        query: EXPIRED_QUERY,
        parameters: [
          { name: '@limit', value: limit },
          { name: '@type', value: MARKER_TYPE },
          { name: '@now', value: nowSeconds },
        ],
      })
      .fetchAll();
    report.requestCharge += page.requestCharge;
    // The query already filters; checking again costs nothing and keeps a wrong query from ever
    // deleting a live marker or a business document.
    const expired = page.resources.filter(
      (m) => typeof m.expiresAtEpochSeconds === 'number' && m.expiresAtEpochSeconds <= nowSeconds,
    );
    for (const group of groupByPartition(expired)) await deletePartitionGroup(container, group, report);
    if (page.resources.length < limit) break;
  }

  report.expiredRemaining = await count(
    container,
    'c.type = @type AND c.expiresAtEpochSeconds <= @now',
    nowSeconds,
    report,
  );
  report.markers = await count(container, 'c.type = @type', nowSeconds, report);
  return report;
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
  report: PurgeReport,
): Promise<void> {
  const partitionKey = group[0]?.partitionKey;
  if (partitionKey === undefined) return;
  const deletes = group.map(
    (marker) => ({ operationType: 'Delete', id: marker.id, ifMatch: marker._etag }) as OperationInput,
  );
  const response = await container.items.batch(deletes, partitionKey);
  const results = response.result ?? [];
  report.requestCharge += results.reduce((sum, result) => sum + (result.requestCharge ?? 0), 0);
  if (response.code === 200) {
    report.purged += group.length;
    return;
  }
  for (const marker of group) {
    try {
      const deleted = await container
        .item(marker.id, partitionKey)
        .delete({ accessCondition: { type: 'IfMatch', condition: marker._etag } });
      report.requestCharge += deleted.requestCharge;
      report.purged++;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code !== 404 && code !== 412) throw error;
      report.skipped++;
    }
  }
}

async function count(
  container: Container,
  where: string,
  nowSeconds: number,
  report: PurgeReport,
): Promise<number> {
  const { resources, requestCharge } = await container.items
    .query<number>({
      query: `SELECT VALUE COUNT(1) FROM c WHERE ${where}`,
      parameters: [
        { name: '@type', value: MARKER_TYPE },
        { name: '@now', value: nowSeconds },
      ],
    })
    .fetchAll();
  report.requestCharge += requestCharge;
  return resources.reduce((sum, value) => sum + value, 0);
}
