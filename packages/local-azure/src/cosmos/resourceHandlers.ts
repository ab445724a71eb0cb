import type { AccountState, ContainerState, DatabaseState } from './account';
import { asObject } from './documents';
import { badRequest, CosmosError, notFound } from './errors';
import { flag, parseJson, type Reply, type RequestHeaders, single } from './http';
import { itemKey, StagedWrites } from './items';
import {
  budgetOffer,
  DEFAULT_CONTAINER_THROUGHPUT,
  Offer,
  type ProvisionedThroughputSetting,
  replacedBudget,
  requestedThroughput,
} from './offers';
import { parsePartitionKeyHeader } from './partitionKey';
import { parseQuerySpec, runQuery } from './query';
import { METADATA_CHARGE } from './requestCharge';
import type { Route } from './routes';

/** One authorised request that got past faults and throttling, as a handler sees it. */
export interface ResourceRequest {
  method: string;
  headers: RequestHeaders;
  raw: Buffer;
  nowMs: number;
  account: AccountState;
  /** `host:port` the server listens on, for the account's self links when the request has no Host. */
  listening: string;
  /** The write region the request reached. */
  region: string;
  /** A multi-region-write account's regions, each with its endpoint; undefined: one write region. */
  writeLocations: readonly { name: string; databaseAccountEndpoint: string }[] | undefined;
  /** The server's throttling budget (RU/s, `--throughput`); undefined: none. */
  throughput: () => number | undefined;
  /** Changes that budget, as a replace of an offer that stands for it does. */
  setThroughput(requestUnitsPerSecond: number): void;
  /** Records a committed write (the session token counts them). */
  committed(): void;
}

export const body = (request: ResourceRequest): unknown => parseJson(request.raw);

export function notAllowed(request: ResourceRequest): never {
  throw new CosmosError(405, `${request.method} is not supported on this resource.`);
}

export function containerOf(
  request: ResourceRequest,
  route: { database: string; container: string },
): ContainerState {
  return request.account.database(route.database).container(route.container);
}

// The account, its databases and containers, and the partition key ranges: metadata requests.

export function account(request: ResourceRequest): Reply {
  if (request.method !== 'GET') return notAllowed(request);
  return {
    status: 200,
    body: accountResource(request.headers.host ?? request.listening, request),
    requestCharge: 0,
  };
}

export function databases(request: ResourceRequest): Reply {
  const { account, method } = request;
  if (method === 'GET')
    return feed(
      'Databases',
      '',
      [...account.databases.values()].map((d) => d.resource),
    );
  if (method === 'POST' && isQuery(request.headers))
    return queryFeed(
      'Databases',
      '',
      [...account.databases.values()].map((d) => d.resource),
      request,
    );
  if (method === 'POST') {
    const throughput = requestedThroughput(request.headers);
    const database = account.createDatabase(body(request), request.nowMs);
    if (throughput) database.offer = newOffer(request, database, throughput);
    return created(database.resource);
  }
  return notAllowed(request);
}

export function database(request: ResourceRequest, route: Extract<Route, { type: 'database' }>): Reply {
  const { account, method } = request;
  if (method === 'GET') return metadata(account.database(route.database).resource);
  if (method === 'DELETE') {
    account.database(route.database);
    account.databases.delete(route.database);
    return { status: 204, requestCharge: METADATA_CHARGE };
  }
  return notAllowed(request);
}

export function containers(request: ResourceRequest, route: Extract<Route, { type: 'containers' }>): Reply {
  const database = request.account.database(route.database);
  if (request.method === 'GET') {
    return feed(
      'DocumentCollections',
      database.rid,
      [...database.containers.values()].map((c) => c.resource),
    );
  }
  if (request.method === 'POST' && isQuery(request.headers))
    return queryFeed(
      'DocumentCollections',
      database.rid,
      [...database.containers.values()].map((c) => c.resource),
      request,
    );
  if (request.method === 'POST') {
    // As in a provisioned-throughput account: a container asked for no throughput shares its
    // database's, or, in a database with none, gets the smallest of its own.
    const throughput =
      requestedThroughput(request.headers) ??
      (sharedOffer(request, database) ? undefined : DEFAULT_CONTAINER_THROUGHPUT);
    const container = database.createContainer(body(request), request.nowMs);
    if (throughput) container.offer = newOffer(request, container, throughput);
    return created(container.resource);
  }
  return notAllowed(request);
}

export function container(request: ResourceRequest, route: Extract<Route, { type: 'container' }>): Reply {
  const database = request.account.database(route.database);
  const container = database.container(route.container);
  if (request.method === 'GET') {
    if (!flag(request.headers['x-ms-documentdb-populatequotainfo'])) return metadata(container.resource);
    return { ...metadata(container.resource), headers: quotaInfo(container) };
  }
  if (request.method === 'PUT') {
    container.replace(asObject(body(request)), request.nowMs);
    return metadata(container.resource);
  }
  if (request.method === 'DELETE') {
    database.containers.delete(route.container);
    return { status: 204, requestCharge: METADATA_CHARGE };
  }
  return notAllowed(request);
}

/**
 * Offers (list and query), as `readOffer()` finds one: a query on `root.resource`, the self link of
 * the database or container. A database's or container's own offer, and, with the server's budget
 * (`--throughput`), one offer for it per database that has none of its own.
 */
export function offers(request: ResourceRequest): Reply {
  if (request.method === 'GET') return feed('Offers', '', offerResources(request));
  if (request.method === 'POST' && isQuery(request.headers))
    return queryFeed('Offers', '', offerResources(request), request);
  return notAllowed(request);
}

/** One offer by id: read, or replaced with a new throughput (`offer.replace()`). */
export function offer(request: ResourceRequest, route: Extract<Route, { type: 'offer' }>): Reply {
  const budget = request.throughput();
  for (const database of request.account.databases.values()) {
    const owners: { offer: Offer | undefined }[] = [database, ...database.containers.values()];
    const owner = owners.find((candidate) => candidate.offer?.id === route.id);
    if (owner?.offer) {
      if (request.method === 'GET') return metadata(owner.offer.resource);
      if (request.method !== 'PUT') return notAllowed(request);
      owner.offer.replace(body(request), single(request.headers['if-match']), request.nowMs);
      return metadata(owner.offer.resource);
    }
    if (budget !== undefined && !database.offer && database.rid === route.id) {
      if (request.method === 'GET') return metadata(budgetOffer(database, budget));
      if (request.method !== 'PUT') return notAllowed(request);
      const ifMatch = single(request.headers['if-match']);
      const throughput = replacedBudget(body(request), database, budget, ifMatch);
      request.setThroughput(throughput);
      return metadata(budgetOffer(database, throughput));
    }
  }
  throw notFound();
}

function offerResources(request: ResourceRequest): Record<string, unknown>[] {
  const budget = request.throughput();
  const resources: Record<string, unknown>[] = [];
  for (const database of request.account.databases.values()) {
    if (database.offer) resources.push(database.offer.resource);
    else if (budget !== undefined) resources.push(budgetOffer(database, budget));
    for (const container of database.containers.values())
      if (container.offer) resources.push(container.offer.resource);
  }
  return resources;
}

/** Whether the database has throughput its containers share: its own, or the server's budget. */
const sharedOffer = (request: ResourceRequest, database: DatabaseState): boolean =>
  database.offer !== undefined || request.throughput() !== undefined;

const newOffer = (
  request: ResourceRequest,
  target: DatabaseState | ContainerState,
  throughput: ProvisionedThroughputSetting,
): Offer => new Offer(request.account.nextOfferId(), target, throughput, request.nowMs);

/**
 * The conflicts feed: always empty. Conflicts come from several write regions; the local account
 * has one, and its containers resolve by last writer wins (`conflictResolutionPolicy`).
 */
export function conflicts(request: ResourceRequest, route: Extract<Route, { type: 'conflicts' }>): Reply {
  const container = containerOf(request, route);
  if (request.method === 'GET') return feed('Conflicts', container.rid, []);
  if (request.method === 'POST' && isQuery(request.headers))
    return queryFeed('Conflicts', container.rid, [], request);
  return notAllowed(request);
}

/**
 * `deleteAllItemsForPartitionKey`: every item of one partition key value goes, as one write. Azure
 * deletes them in the background after answering; here they are gone when the answer comes.
 */
export function partitionKeyDelete(
  request: ResourceRequest,
  route: Extract<Route, { type: 'partitionKeyDelete' }>,
): Reply {
  if (request.method !== 'POST') return notAllowed(request);
  const container = containerOf(request, route);
  const header = single(request.headers['x-ms-documentdb-partitionkey']);
  if (header === undefined)
    throw badRequest(
      'Deleting the items of a partition key needs the partition key (x-ms-documentdb-partitionkey).',
    );
  const partitionKey = parsePartitionKeyHeader(header, container.partitionKey);
  const staged = new StagedWrites(container, request.nowMs);
  for (const stored of container.items.values()) {
    if (stored.partitionKey === partitionKey)
      staged.remove(itemKey(partitionKey, String(stored.document.id)));
  }
  if (staged.size > 0) {
    staged.commit();
    request.committed();
  }
  return { status: 200, requestCharge: METADATA_CHARGE };
}

/** One range covering every partition key: the local server does not split containers. */
export function partitionKeyRanges(
  request: ResourceRequest,
  route: Extract<Route, { type: 'pkranges' }>,
): Reply {
  const container = containerOf(request, route);
  if (request.method !== 'GET') return notAllowed(request);
  // The .NET SDK reads the ranges as a change feed (A-IM: Incremental feed) until 304 Not
  // Modified: the ranges never change here, so their ETag is fixed.
  const etag = '"1"';
  if (request.headers['if-none-match'] === etag) return { status: 304, requestCharge: METADATA_CHARGE };
  const reply = feed('PartitionKeyRanges', container.rid, [
    {
      id: '0',
      _rid: `${container.rid}AgAAAAAAAA==`,
      _self: `${container.selfLink}pkranges/0/`,
      _etag: '"00000000-0000-0000-0000-000000000000"',
      _ts: Math.floor(request.nowMs / 1000),
      minInclusive: '',
      maxExclusive: 'FF',
      ridPrefix: 0,
      throughputFraction: 1,
      status: 'online',
      parents: [],
    },
  ]);
  return { ...reply, headers: { etag } };
}

function accountResource(host: string, { region, writeLocations }: ResourceRequest): Record<string, unknown> {
  const writable = writeLocations ?? [{ name: region, databaseAccountEndpoint: `http://${host}/` }];
  return {
    id: 'local-cosmos',
    _rid: 'local-cosmos',
    _self: '',
    media: '//media/',
    addresses: '//addresses/',
    _dbs: '//dbs/',
    writableLocations: writable,
    readableLocations: writable,
    enableMultipleWriteLocations: writable.length > 1,
    userReplicationPolicy: { asyncReplication: false, minReplicaSetSize: 1, maxReplicasetSize: 4 },
    userConsistencyPolicy: { defaultConsistencyLevel: 'Session' },
    systemReplicationPolicy: { minReplicaSetSize: 1, maxReplicasetSize: 4 },
    readPolicy: { primaryReadCoefficient: 1, secondaryReadCoefficient: 1 },
    queryEngineConfiguration:
      '{"maxSqlQueryInputLength":262144,"maxJoinsPerSqlQuery":5,"maxLogicalAndPerSqlQuery":500,"maxLogicalOrPerSqlQuery":500,"maxUdfRefPerSqlQuery":10,"maxInExpressionItemsCount":16000,"queryMaxInMemorySortDocumentCount":500,"maxQueryRequestTimeoutFraction":0.9,"sqlAllowNonFiniteNumbers":false,"sqlAllowAggregateFunctions":true,"sqlAllowSubQuery":true,"sqlAllowScalarSubQuery":true,"allowNewKeywords":true,"sqlAllowLike":true,"sqlAllowGroupByClause":false,"maxSpatialQueryCells":12,"spatialMaxGeometryPointCount":256,"sqlDisableQueryILOptimization":false,"sqlDisableFilterPlanOptimization":false}',
  };
}

/**
 * What a container read with `populateQuotaInfo` answers besides the container: the index
 * transformation progress (always 100: the server keeps no index, so a policy change has nothing to
 * rebuild) and the usage Cosmos DB reports, items and their size in KB.
 */
function quotaInfo(container: ContainerState): Record<string, string> {
  let bytes = 0;
  for (const item of container.items.values()) bytes += item.bytes;
  const kb = Math.ceil(bytes / 1024);
  return {
    'x-ms-documentdb-collection-index-transformation-progress': '100',
    'x-ms-resource-usage': `documentsCount=${container.items.size};documentsSize=${kb};collectionSize=${kb}`,
  };
}

/** A POST that is a query (`client.databases.query`, `database.containers.query`), not a create. */
const isQuery = (headers: RequestHeaders): boolean =>
  flag(headers['x-ms-documentdb-isquery']) ||
  String(headers['content-type'] ?? '').startsWith('application/query+json');

/** A query on the databases or a database's containers, paged as a query on items is. */
function queryFeed(name: string, rid: string, resources: unknown[], request: ResourceRequest): Reply {
  const requested = Number(single(request.headers['x-ms-max-item-count']) ?? -1);
  const continuation = single(request.headers['x-ms-continuation']);
  const page = runQuery(resources, parseQuerySpec(body(request)), {
    maxItemCount: Number.isInteger(requested) && requested > 0 ? requested : 100,
    ...(continuation ? { continuation } : {}),
  });
  return {
    ...feed(name, rid, page.documents),
    headers: {
      'x-ms-item-count': String(page.documents.length),
      ...(page.continuation ? { 'x-ms-continuation': page.continuation } : {}),
    },
  };
}

function feed(name: string, rid: string, resources: unknown[]): Reply {
  return {
    status: 200,
    body: { _rid: rid, [name]: resources, _count: resources.length },
    requestCharge: METADATA_CHARGE,
  };
}

const metadata = (resource: unknown): Reply => ({
  status: 200,
  body: resource,
  requestCharge: METADATA_CHARGE,
});
const created = (resource: unknown): Reply => ({
  status: 201,
  body: resource,
  requestCharge: METADATA_CHARGE,
});
