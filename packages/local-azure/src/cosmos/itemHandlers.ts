import type { ContainerState } from './account';
import { assertBatchSize, type BatchOperationResult, executeBatch } from './batch';
import { changeFeed } from './changeFeed';
import { asObject, byteLength } from './documents';
import { feedRange } from './epk';
import { badRequest } from './errors';
import { flag, type Reply, type RequestHeaders, single } from './http';
import { decodeBatchOperations, encodeBatchResults, isHybridRow } from './hybridRow';
import { executeOperation, isExpired, type ItemOperation, StagedWrites } from './items';
import { parsePartitionKeyHeader } from './partitionKey';
import { parsePatchRequest } from './patch';
import { assertServableAcrossPartitions, parseQuerySpec, queryPlan, runQuery } from './query';
import { queryMetricsHeader } from './queryMetrics';
import { queryCharge } from './requestCharge';
import { body, containerOf, notAllowed, type ResourceRequest } from './resourceHandlers';
import type { Route } from './routes';

const DEFAULT_PAGE_SIZE = 1000;

/** `.../docs`: a query (GET, or POST as a query), a transactional batch, a create or an upsert. */
export function items(request: ResourceRequest, route: Extract<Route, { type: 'items' }>): Reply {
  const { headers, method, nowMs } = request;
  const container = containerOf(request, route);
  if (method === 'GET') {
    if (headers['a-im'] !== undefined) return changeFeed(container, headers, nowMs);
    return query(container, headers, { query: 'SELECT * FROM c' }, nowMs);
  }
  if (method !== 'POST') return notAllowed(request);
  if (flag(headers['x-ms-cosmos-is-query-plan-request'])) {
    return { status: 200, body: queryPlan(parseQuerySpec(body(request))), requestCharge: 1 };
  }
  if (
    flag(headers['x-ms-documentdb-isquery']) ||
    String(headers['content-type']).startsWith('application/query+json')
  ) {
    return query(container, headers, parseQuerySpec(body(request)), nowMs);
  }
  const partitionKey = requiredPartitionKey(container, headers);
  if (flag(headers['x-ms-cosmos-is-batch-request'])) {
    if (!flag(headers['x-ms-cosmos-batch-atomic'])) {
      throw badRequest('The local server supports transactional (atomic) batches only, not bulk.');
    }
    return transactionalBatch(request, container, partitionKey);
  }
  const document = asObject(body(request));
  return itemOperation(request, container, {
    ...(flag(headers['x-ms-documentdb-is-upsert'])
      ? { kind: 'upsert', partitionKey, body: document, ...ifMatch(headers) }
      : { kind: 'create', partitionKey, body: document }),
  });
}

/** `.../docs/<id>`: a point read, replace, delete or patch. */
export function item(request: ResourceRequest, route: Extract<Route, { type: 'item' }>): Reply {
  const { headers } = request;
  const container = containerOf(request, route);
  const partitionKey = requiredPartitionKey(container, headers);
  const { id } = route;
  const conditional = { partitionKey, id, ...ifMatch(headers) };
  switch (request.method) {
    case 'GET': {
      const ifNoneMatch = single(headers['if-none-match']);
      return itemOperation(request, container, {
        kind: 'read',
        partitionKey,
        id,
        ...(ifNoneMatch === undefined ? {} : { ifNoneMatch }),
      });
    }
    case 'PUT':
      return itemOperation(request, container, {
        kind: 'replace',
        ...conditional,
        body: asObject(body(request)),
      });
    case 'DELETE':
      return itemOperation(request, container, { kind: 'delete', ...conditional });
    case 'PATCH':
      return itemOperation(request, container, {
        kind: 'patch',
        ...conditional,
        patch: parsePatchRequest(body(request)),
      });
    default:
      return notAllowed(request);
  }
}

function itemOperation(request: ResourceRequest, container: ContainerState, operation: ItemOperation): Reply {
  const staged = new StagedWrites(container, request.nowMs);
  const result = executeOperation(staged, operation);
  if (staged.size > 0) {
    staged.commit();
    request.committed();
  }
  return {
    status: result.status,
    ...(result.status === 204 || result.status === 304 || !result.document ? {} : { body: result.document }),
    requestCharge: result.requestCharge,
    headers: result.document ? { etag: result.document._etag } : {},
  };
}

function query(
  container: ContainerState,
  headers: RequestHeaders,
  spec: ReturnType<typeof parseQuerySpec>,
  nowMs: number,
): Reply {
  const header = single(headers['x-ms-documentdb-partitionkey']);
  const partitionKey =
    header === undefined ? undefined : parsePartitionKeyHeader(header, container.partitionKey);
  if (partitionKey === undefined && !flag(headers['x-ms-documentdb-query-enablecrosspartition'])) {
    throw badRequest(
      'Cross partition query is required but disabled. Please set x-ms-documentdb-query-enablecrosspartition to true.',
    );
  }
  // A query the SDK runs per feed range (a sub-range of a partition key range) names it by EPK.
  const range = feedRange(headers, container.partitionKey);
  if (
    partitionKey === undefined &&
    range === undefined &&
    !single(headers['x-ms-documentdb-partitionkeyrangeid'])
  ) {
    assertServableAcrossPartitions(spec);
  }
  const documents = [];
  let bytesScanned = 0;
  for (const stored of container.items.values()) {
    if (partitionKey !== undefined && stored.partitionKey !== partitionKey) continue;
    if (isExpired(stored, container.defaultTtl, nowMs)) continue;
    if (range !== undefined && !range.includes(stored.partitionKey)) continue;
    documents.push(stored.document);
    bytesScanned += stored.bytes;
  }
  const requested = Number(single(headers['x-ms-max-item-count']) ?? -1);
  const continuation = single(headers['x-ms-continuation']);
  const startedMs = performance.now();
  const page = runQuery(documents, spec, {
    maxItemCount: Number.isInteger(requested) && requested > 0 ? requested : DEFAULT_PAGE_SIZE,
    ...(continuation ? { continuation } : {}),
  });
  const bytesReturned = byteLength(page.documents);
  const metrics = flag(headers['x-ms-documentdb-populatequerymetrics'])
    ? queryMetricsHeader({
        retrievedDocumentCount: documents.length,
        retrievedDocumentBytes: bytesScanned,
        outputDocumentCount: page.documents.length,
        outputDocumentBytes: bytesReturned,
        executionTimeMs: performance.now() - startedMs,
      })
    : undefined;
  return {
    status: 200,
    body: { _rid: container.rid, Documents: page.documents, _count: page.documents.length },
    requestCharge: queryCharge(bytesScanned, bytesReturned),
    headers: {
      'x-ms-item-count': String(page.documents.length),
      ...(page.continuation ? { 'x-ms-continuation': page.continuation } : {}),
      ...(metrics === undefined ? {} : { 'x-ms-documentdb-query-metrics': metrics }),
    },
  };
}

/**
 * A transactional batch, answered as it was asked: @azure/cosmos sends and reads JSON, the .NET SDK
 * HybridRow rows (hybridRow.ts).
 */
function transactionalBatch(
  request: ResourceRequest,
  container: ContainerState,
  partitionKey: string,
): Reply {
  const { raw, nowMs } = request;
  const hybridRow = isHybridRow(raw);
  if (hybridRow) assertBatchSize(raw.length);
  const operations = hybridRow ? decodeBatchOperations(raw) : undefined;
  const batch = executeBatch(container, nowMs, partitionKey, operations ?? body(request), raw.length);
  if (batch.status === 200) request.committed();
  const requestCharge = batch.results.reduce((sum, result) => sum + result.requestCharge, 0);
  if (!operations) return { status: batch.status, body: batch.results, requestCharge };
  // An operation whose client asked for no content (EnableContentResponseOnWrite=false) gets none.
  const results = batch.results.map((result, index) =>
    operations[index]?.minimalReturnPreference ? withoutResourceBody(result) : result,
  );
  return { status: batch.status, body: encodeBatchResults(results), requestCharge };
}

function withoutResourceBody({ resourceBody: _, ...result }: BatchOperationResult): BatchOperationResult {
  return result;
}

function requiredPartitionKey(container: ContainerState, headers: RequestHeaders): string {
  const header = single(headers['x-ms-documentdb-partitionkey']);
  if (header === undefined) {
    throw badRequest(
      'PartitionKey value must be supplied for this operation (header x-ms-documentdb-partitionkey).',
    );
  }
  return parsePartitionKeyHeader(header, container.partitionKey);
}

function ifMatch(headers: RequestHeaders): { ifMatch?: string } {
  const value = single(headers['if-match']);
  return value === undefined ? {} : { ifMatch: value };
}
