import type { ContainerState } from './account';
import { byteLength } from './documents';
import { feedRange } from './epk';
import { badRequest } from './errors';
import { type Reply, type RequestHeaders, single } from './http';
import { isExpired } from './items';
import { parsePartitionKeyHeader } from './partitionKey';
import { queryCharge } from './requestCharge';

/**
 * The change feed in latest-version mode, as @azure/cosmos reads it (`getChangeFeedIterator`): a GET
 * of `.../docs` with `A-IM: Incremental feed`. Each item appears once, at its latest version, in the
 * order of the commits that wrote it (one log sequence number per commit, so the items of a
 * transactional batch share theirs), with its `_lsn`; deletes and expired items do not appear.
 *
 * Where to start: `If-None-Match` with the etag of an earlier page (its continuation, `"<lsn>"`), or
 * `*` for now; with neither, the beginning; `If-Modified-Since` (an HTTP date) for the items last
 * written at or after a point in time. `x-ms-documentdb-partitionkey` limits it to one partition key;
 * `x-ms-start-epk` and `x-ms-end-epk` to a feed range, the items whose effective partition key (see
 * epk.ts) is in [start, end), as the SDK reads a sub-range of a partition key range (a feed range of
 * the change feed processor, or a prefix of a hierarchical key).
 * A page holds at most `x-ms-max-item-count` items (default 100) unless that would split a commit;
 * the etag names the last commit it covers. Nothing new is a 304 with the etag to ask from next time.
 */
const DEFAULT_PAGE_SIZE = 100;

export const LATEST_VERSION = 'incremental feed';

export function changeFeed(container: ContainerState, headers: RequestHeaders, nowMs: number): Reply {
  const mode = single(headers['a-im'])?.toLowerCase();
  if (mode !== LATEST_VERSION) {
    throw badRequest(
      `The local server serves the change feed in latest-version mode only (A-IM: Incremental feed); got '${String(mode).slice(0, 40)}'.`,
    );
  }
  const header = single(headers['x-ms-documentdb-partitionkey']);
  const partitionKey =
    header === undefined ? undefined : parsePartitionKeyHeader(header, container.partitionKey);
  const range = feedRange(headers, container.partitionKey);
  const after = startAfter(single(headers['if-none-match']), container.lastLsn);
  const since = single(headers['if-modified-since']);
  const sinceSeconds = since === undefined ? undefined : Date.parse(since) / 1000;
  if (sinceSeconds !== undefined && Number.isNaN(sinceSeconds)) {
    throw badRequest(`If-Modified-Since '${since?.slice(0, 40)}' is not an HTTP date.`);
  }

  const changed = [...container.items.values()]
    .filter(
      (item) =>
        (item.lsn ?? 0) > after &&
        (partitionKey === undefined || item.partitionKey === partitionKey) &&
        (sinceSeconds === undefined || Number(item.document._ts) >= Math.floor(sinceSeconds)) &&
        !isExpired(item, container.defaultTtl, nowMs) &&
        (range === undefined || range.includes(item.partitionKey)),
    )
    .sort((a, b) => (a.lsn ?? 0) - (b.lsn ?? 0));
  const requested = Number(single(headers['x-ms-max-item-count']) ?? -1);
  const size = Number.isInteger(requested) && requested > 0 ? requested : DEFAULT_PAGE_SIZE;
  // A page never splits a commit (the next one starts after the last commit it holds), so it may
  // exceed the size by the rest of a transactional batch.
  let end = Math.min(size, changed.length);
  while (end < changed.length && changed[end]?.lsn === changed[end - 1]?.lsn) end++;
  const page = changed.slice(0, end);
  // A page that stops early covers up to its last item's commit; otherwise everything so far.
  const last = end < changed.length ? (page.at(-1)?.lsn ?? after) : container.lastLsn;
  const etag = `"${last}"`;
  // The .NET SDK reads the item count of a 304 too.
  if (page.length === 0) return { status: 304, requestCharge: 1, headers: { etag, 'x-ms-item-count': '0' } };
  const documents = page.map((item) => ({ ...item.document, _lsn: item.lsn }));
  const bytes = byteLength(documents);
  return {
    status: 200,
    body: { _rid: container.rid, Documents: documents, _count: documents.length },
    requestCharge: queryCharge(bytes, bytes),
    headers: { etag, 'x-ms-item-count': String(documents.length) },
  };
}

/** The last commit the reader has seen: an etag continuation, `*` (now), or none (the beginning). */
function startAfter(ifNoneMatch: string | undefined, lastLsn: number): number {
  if (ifNoneMatch === undefined) return 0;
  if (ifNoneMatch.trim() === '*') return lastLsn;
  const lsn = Number(ifNoneMatch.replace(/"/g, ''));
  if (!Number.isInteger(lsn) || lsn < 0) {
    throw badRequest(`If-None-Match '${ifNoneMatch.slice(0, 40)}' is not a change feed continuation.`);
  }
  return lsn;
}
