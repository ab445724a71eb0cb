import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { seededRandom } from '../random';
import { AccountState, type ContainerState } from './account';
import { verifyMasterKey } from './auth';
import { executeBatch } from './batch';
import { asObject, byteLength } from './documents';
import { badRequest, CosmosError, errorBody } from './errors';
import { type FaultHandle, FaultInjector, type FaultRule, type FaultTarget } from './faults';
import { executeOperation, isExpired, type ItemOperation, StagedWrites } from './items';
import { parsePartitionKeyHeader } from './partitionKey';
import { parsePatchRequest } from './patch';
import { parseQuerySpec, runQuery } from './query';
import { FAILED_REQUEST_CHARGE, METADATA_CHARGE, queryCharge } from './requestCharge';
import { type ClientUsage, ProvisionedThroughput, UsageByClient } from './throughput';

/**
 * The Cosmos DB emulator's published key. It is public on purpose (every emulator ships it), so it is
 * a safe default for a server that only listens on loopback and holds throw-away data.
 */
export const DEFAULT_KEY =
  'C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==';

export interface LocalCosmosOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  /** Interface to listen on; default 127.0.0.1. */
  host?: string;
  /** Base64 master key clients must sign with; default DEFAULT_KEY. */
  key?: string;
  /** Latency added to every data request (read, write, batch, query), in ms; default 0. */
  latencyMs?: number;
  /** Clock in epoch ms, for `_ts` and TTL; default Date.now. Tests pass a clock they can move. */
  now?: () => number;
  /** Seed for probabilistic faults; default random. */
  seed?: number;
  /** How often expired items are physically removed, in ms; default 1000. */
  sweepIntervalMs?: number;
  /**
   * Provisioned throughput in RU/s: data requests beyond this budget are answered 429 with
   * `x-ms-retry-after-ms`, as Cosmos DB does (see throughput.ts). Default: no limit (serverless-like).
   */
  throughput?: number;
}

export interface LocalCosmos {
  /** `http://127.0.0.1:<port>/`, for `new CosmosClient({ endpoint, key })`. */
  readonly endpoint: string;
  readonly key: string;
  /** Fault injection, set per test at run time. */
  readonly faults: {
    inject(rule: FaultRule): FaultHandle;
    clear(): void;
    /** Restarts the seeded random source that probabilistic faults draw from (a run's replay). */
    reseed(seed: number): void;
  };
  /**
   * Waits out injected latency with `wait` (a test's model clock) instead of real time;
   * undefined: real time again.
   */
  setLatencyWait(wait: ((ms: number) => Promise<void>) | undefined): void;
  /** Removes expired items now rather than at the next sweep; returns how many were removed. */
  sweepExpired(): number;
  /** Items physically held, expired or not (what the sweep has not removed yet). */
  storedItemCount(): number;
  /** Requests received so far, by kind (every request, answered or not). */
  requestCounts(): Record<FaultTarget, number>;
  /** Data requests (read, write, batch, query) and their charges so far, by user agent. */
  usageByClient(): ClientUsage[];
  /** Changes the provisioned throughput (RU/s) at run time, as Azure allows; undefined: no limit. */
  setThroughput(requestUnitsPerSecond: number | undefined): void;
  stop(): Promise<void>;
}

const MAX_REQUEST_BYTES = 16 * 1024 * 1024;
const DEFAULT_PAGE_SIZE = 1000;

interface Reply {
  status: number;
  body?: unknown;
  requestCharge: number;
  headers?: Record<string, string>;
}

type Route =
  | { type: 'account' }
  | { type: 'databases' }
  | { type: 'database'; database: string }
  | { type: 'containers'; database: string }
  | { type: 'container'; database: string; container: string }
  | { type: 'pkranges'; database: string; container: string }
  | { type: 'items'; database: string; container: string }
  | { type: 'item'; database: string; container: string; id: string };

export async function start(options: LocalCosmosOptions = {}): Promise<LocalCosmos> {
  const key = options.key ?? DEFAULT_KEY;
  const keyBytes = Buffer.from(key, 'base64');
  if (keyBytes.length === 0)
    throw new Error('The local Cosmos server key must be a non-empty base64 string.');
  const now = options.now ?? Date.now;
  const faults = new FaultInjector(seededRandom(options.seed ?? Math.floor(Math.random() * 2 ** 32)));
  let latencyWait: (ms: number) => Promise<void> = sleep;
  const account = new AccountState();
  const requests: Record<FaultTarget, number> = { read: 0, write: 0, batch: 0, query: 0, metadata: 0 };
  const provisioned = (ru: number | undefined): ProvisionedThroughput | undefined =>
    ru === undefined ? undefined : new ProvisionedThroughput(ru);
  let throughput = provisioned(options.throughput);
  const usage = new UsageByClient();
  let lsn = 0;

  const server = createServer((request, response) => {
    void handle(request, response);
  });
  server.keepAliveTimeout = 60_000;
  server.on('clientError', (_error, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
  });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const activityId = randomUUID();
    const url = request.url ?? '/';
    let reply: Reply;
    let dropAfterCommit = false;
    let client: ClientUsage | undefined;
    try {
      const body = await readBody(request);
      const route = parseRoute(url);
      const method = request.method ?? 'GET';
      verifyMasterKey(request.headers, signedResource(method, url), keyBytes);
      const target = faultTarget(route, method, request.headers);
      requests[target]++;
      if (target !== 'metadata') client = usage.start(single(request.headers['user-agent']));
      const decision = faults.decide(target);
      const delayMs = decision.delayMs + (target === 'metadata' ? 0 : (options.latencyMs ?? 0));
      if (delayMs > 0) await latencyWait(delayMs);
      if (decision.outcome?.kind === 'throttle') throw throttled(decision.outcome.retryAfterMs);
      if (decision.outcome?.kind === 'unavailable') {
        throw new CosmosError(503, 'Service is currently unavailable. (injected by the local server)');
      }
      const retryAfterMs = client && throughput?.retryAfterMs();
      if (retryAfterMs !== undefined) throw throttled(retryAfterMs);
      dropAfterCommit = decision.outcome?.kind === 'dropResponseAfterCommit';
      reply = dispatch(route, method, request.headers, body);
    } catch (error) {
      reply = errorReply(error, activityId, url);
    }
    if (client) {
      // Charged when answered, as Cosmos DB charges a request once it has run (a 429 costs nothing).
      throughput?.charge(reply.requestCharge);
      usage.record(client, reply.status, reply.requestCharge);
    }
    if (dropAfterCommit) {
      // The work is committed; the client never hears about it.
      request.socket.destroy();
      return;
    }
    send(response, reply, activityId);
  }

  function dispatch(route: Route, method: string, headers: IncomingMessage['headers'], raw: Buffer): Reply {
    const nowMs = now();
    const body = (): unknown => parseJson(raw);
    const not = (): never => {
      throw new CosmosError(405, `${method} is not supported on this resource.`);
    };
    switch (route.type) {
      case 'account':
        return method === 'GET'
          ? { status: 200, body: accountResource(headers.host), requestCharge: 0 }
          : not();
      case 'databases':
        if (method === 'GET')
          return feed(
            'Databases',
            '',
            [...account.databases.values()].map((d) => d.resource),
          );
        if (method === 'POST') return created(account.createDatabase(body(), nowMs).resource);
        return not();
      case 'database':
        if (method === 'GET') return metadata(account.database(route.database).resource);
        if (method === 'DELETE') {
          account.database(route.database);
          account.databases.delete(route.database);
          return { status: 204, requestCharge: METADATA_CHARGE };
        }
        return not();
      case 'containers': {
        const database = account.database(route.database);
        if (method === 'GET') {
          return feed(
            'DocumentCollections',
            database.rid,
            [...database.containers.values()].map((c) => c.resource),
          );
        }
        if (method === 'POST') return created(database.createContainer(body(), nowMs).resource);
        return not();
      }
      case 'container': {
        const database = account.database(route.database);
        const container = database.container(route.container);
        if (method === 'GET') return metadata(container.resource);
        if (method === 'PUT') {
          container.replace(asObject(body()), nowMs);
          return metadata(container.resource);
        }
        if (method === 'DELETE') {
          database.containers.delete(route.container);
          return { status: 204, requestCharge: METADATA_CHARGE };
        }
        return not();
      }
      case 'pkranges': {
        const container = containerOf(route);
        if (method !== 'GET') return not();
        return feed('PartitionKeyRanges', container.rid, [
          {
            id: '0',
            _rid: `${container.rid}AgAAAAAAAA==`,
            _self: `${container.selfLink}pkranges/0/`,
            _etag: '"00000000-0000-0000-0000-000000000000"',
            _ts: Math.floor(nowMs / 1000),
            minInclusive: '',
            maxExclusive: 'FF',
            ridPrefix: 0,
            throughputFraction: 1,
            status: 'online',
            parents: [],
          },
        ]);
      }
      case 'items': {
        const container = containerOf(route);
        if (method === 'GET') return query(container, headers, { query: 'SELECT * FROM c' }, nowMs);
        if (method !== 'POST') return not();
        if (flag(headers['x-ms-cosmos-is-query-plan-request'])) {
          throw badRequest('The local server does not produce query plans; it runs every query directly.');
        }
        if (
          flag(headers['x-ms-documentdb-isquery']) ||
          String(headers['content-type']).startsWith('application/query+json')
        ) {
          return query(container, headers, parseQuerySpec(body()), nowMs);
        }
        const partitionKey = requiredPartitionKey(container, headers);
        if (flag(headers['x-ms-cosmos-is-batch-request'])) {
          if (!flag(headers['x-ms-cosmos-batch-atomic'])) {
            throw badRequest('The local server supports transactional (atomic) batches only, not bulk.');
          }
          const batch = executeBatch(container, nowMs, partitionKey, body(), raw.length);
          if (batch.status === 200) lsn++;
          return {
            status: batch.status,
            body: batch.results,
            requestCharge: batch.results.reduce((sum, result) => sum + result.requestCharge, 0),
          };
        }
        const document = asObject(body());
        return item(container, nowMs, {
          ...(flag(headers['x-ms-documentdb-is-upsert'])
            ? { kind: 'upsert', partitionKey, body: document, ...ifMatch(headers) }
            : { kind: 'create', partitionKey, body: document }),
        });
      }
      case 'item': {
        const container = containerOf(route);
        const partitionKey = requiredPartitionKey(container, headers);
        const { id } = route;
        switch (method) {
          case 'GET': {
            const ifNoneMatch = single(headers['if-none-match']);
            return item(container, nowMs, {
              kind: 'read',
              partitionKey,
              id,
              ...(ifNoneMatch === undefined ? {} : { ifNoneMatch }),
            });
          }
          case 'PUT':
            return item(container, nowMs, {
              kind: 'replace',
              partitionKey,
              id,
              body: asObject(body()),
              ...ifMatch(headers),
            });
          case 'DELETE':
            return item(container, nowMs, { kind: 'delete', partitionKey, id, ...ifMatch(headers) });
          case 'PATCH':
            return item(container, nowMs, {
              kind: 'patch',
              partitionKey,
              id,
              patch: parsePatchRequest(body()),
              ...ifMatch(headers),
            });
          default:
            return not();
        }
      }
    }
  }

  function containerOf(route: { database: string; container: string }): ContainerState {
    return account.database(route.database).container(route.container);
  }

  function item(container: ContainerState, nowMs: number, operation: ItemOperation): Reply {
    const staged = new StagedWrites(container, nowMs);
    const result = executeOperation(staged, operation);
    if (staged.size > 0) {
      staged.commit();
      lsn++;
    }
    return {
      status: result.status,
      ...(result.status === 204 || result.status === 304 || !result.document
        ? {}
        : { body: result.document }),
      requestCharge: result.requestCharge,
      headers: result.document ? { etag: result.document._etag } : {},
    };
  }

  function query(
    container: ContainerState,
    headers: IncomingMessage['headers'],
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
    const documents = [];
    let bytesScanned = 0;
    for (const stored of container.items.values()) {
      if (partitionKey !== undefined && stored.partitionKey !== partitionKey) continue;
      if (isExpired(stored, container.defaultTtl, nowMs)) continue;
      documents.push(stored.document);
      bytesScanned += stored.bytes;
    }
    const requested = Number(single(headers['x-ms-max-item-count']) ?? -1);
    const continuation = single(headers['x-ms-continuation']);
    const page = runQuery(documents, spec, {
      maxItemCount: Number.isInteger(requested) && requested > 0 ? requested : DEFAULT_PAGE_SIZE,
      ...(continuation ? { continuation } : {}),
    });
    return {
      status: 200,
      body: { _rid: container.rid, Documents: page.documents, _count: page.documents.length },
      requestCharge: queryCharge(bytesScanned, byteLength(page.documents)),
      headers: {
        'x-ms-item-count': String(page.documents.length),
        ...(page.continuation ? { 'x-ms-continuation': page.continuation } : {}),
      },
    };
  }

  function accountResource(host: string | undefined): Record<string, unknown> {
    const self = `http://${host ?? `127.0.0.1:${port}`}/`;
    const location = { name: 'local', databaseAccountEndpoint: self };
    return {
      id: 'local-cosmos',
      _rid: 'local-cosmos',
      _self: '',
      media: '//media/',
      addresses: '//addresses/',
      _dbs: '//dbs/',
      writableLocations: [location],
      readableLocations: [location],
      enableMultipleWriteLocations: false,
      userReplicationPolicy: { asyncReplication: false, minReplicaSetSize: 1, maxReplicasetSize: 4 },
      userConsistencyPolicy: { defaultConsistencyLevel: 'Session' },
      systemReplicationPolicy: { minReplicaSetSize: 1, maxReplicasetSize: 4 },
      readPolicy: { primaryReadCoefficient: 1, secondaryReadCoefficient: 1 },
      queryEngineConfiguration:
        '{"maxSqlQueryInputLength":262144,"maxJoinsPerSqlQuery":5,"maxLogicalAndPerSqlQuery":500,"maxLogicalOrPerSqlQuery":500,"maxUdfRefPerSqlQuery":10,"maxInExpressionItemsCount":16000,"queryMaxInMemorySortDocumentCount":500,"maxQueryRequestTimeoutFraction":0.9,"sqlAllowNonFiniteNumbers":false,"sqlAllowAggregateFunctions":true,"sqlAllowSubQuery":true,"sqlAllowScalarSubQuery":true,"allowNewKeywords":true,"sqlAllowLike":true,"sqlAllowGroupByClause":false,"maxSpatialQueryCells":12,"spatialMaxGeometryPointCount":256,"sqlDisableQueryILOptimization":false,"sqlDisableFilterPlanOptimization":false}',
    };
  }

  function send(response: ServerResponse, reply: Reply, activityId: string): void {
    const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
    response.writeHead(reply.status, {
      'content-type': 'application/json',
      'x-ms-activity-id': activityId,
      'x-ms-request-charge': String(reply.requestCharge),
      'x-ms-session-token': `0:-1#${lsn}`,
      ...reply.headers,
    });
    response.end(text);
  }

  const sweepExpired = (): number => {
    const nowMs = now();
    let removed = 0;
    for (const database of account.databases.values()) {
      for (const container of database.containers.values()) {
        for (const [key, stored] of container.items) {
          if (isExpired(stored, container.defaultTtl, nowMs)) {
            container.items.delete(key);
            removed++;
          }
        }
      }
    }
    return removed;
  };
  const sweeper = setInterval(sweepExpired, options.sweepIntervalMs ?? 1000);
  sweeper.unref();

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host === undefined || options.host === '0.0.0.0' ? '127.0.0.1' : options.host;

  return {
    endpoint: `http://${host}:${port}/`,
    key,
    faults: {
      inject: (rule) => faults.inject(rule),
      clear: () => faults.clear(),
      reseed: (seed) => faults.reseed(seededRandom(seed)),
    },
    setLatencyWait: (wait) => {
      latencyWait = wait ?? sleep;
    },
    sweepExpired,
    storedItemCount: () =>
      [...account.databases.values()]
        .flatMap((database) => [...database.containers.values()])
        .reduce((count, container) => count + container.items.size, 0),
    requestCounts: () => ({ ...requests }),
    usageByClient: () => usage.snapshot(),
    setThroughput: (requestUnitsPerSecond) => {
      throughput = provisioned(requestUnitsPerSecond);
    },
    stop: async () => {
      clearInterval(sweeper);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function parseRoute(url: string): Route {
  const path = url.split('?')[0] ?? '';
  const segments = path
    .split('/')
    .filter((segment) => segment !== '')
    .map((segment) => {
      try {
        return decodeURIComponent(segment);
      } catch {
        throw badRequest(`The request path segment '${segment}' is not valid percent-encoding.`);
      }
    });
  const [dbs, database, colls, container, docs, id, ...rest] = segments;
  const unknown = (): never => {
    throw new CosmosError(404, `Unknown resource path '${path}'.`);
  };
  if (segments.length === 0) return { type: 'account' };
  if (dbs !== 'dbs' || rest.length > 0) return unknown();
  if (database === undefined) return { type: 'databases' };
  if (colls === undefined) return { type: 'database', database };
  if (colls !== 'colls') return unknown();
  if (container === undefined) return { type: 'containers', database };
  if (docs === undefined) return { type: 'container', database, container };
  if (docs === 'pkranges' && id === undefined) return { type: 'pkranges', database, container };
  if (docs !== 'docs') return unknown();
  return id === undefined
    ? { type: 'items', database, container }
    : { type: 'item', database, container, id };
}

/** The resource type and link the client signed: a feed (`.../docs`) is signed by its parent's link. */
function signedResource(
  verb: string,
  url: string,
): { verb: string; resourceType: string; resourceLink: string } {
  const segments = (url.split('?')[0] ?? '')
    .split('/')
    .filter((segment) => segment !== '')
    .map((segment) => decodeURIComponent(segment));
  if (segments.length === 0) return { verb, resourceType: '', resourceLink: '' };
  const isFeed = segments.length % 2 === 1;
  return isFeed
    ? { verb, resourceType: segments.at(-1) as string, resourceLink: segments.slice(0, -1).join('/') }
    : { verb, resourceType: segments.at(-2) as string, resourceLink: segments.join('/') };
}

function faultTarget(route: Route, method: string, headers: IncomingMessage['headers']): FaultTarget {
  if (route.type === 'item') return method === 'GET' ? 'read' : 'write';
  if (route.type !== 'items') return 'metadata';
  if (
    method === 'GET' ||
    flag(headers['x-ms-documentdb-isquery']) ||
    flag(headers['x-ms-cosmos-is-query-plan-request'])
  ) {
    return 'query';
  }
  return flag(headers['x-ms-cosmos-is-batch-request']) ? 'batch' : 'write';
}

function requiredPartitionKey(container: ContainerState, headers: IncomingMessage['headers']): string {
  const header = single(headers['x-ms-documentdb-partitionkey']);
  if (header === undefined) {
    throw badRequest(
      'PartitionKey value must be supplied for this operation (header x-ms-documentdb-partitionkey).',
    );
  }
  return parsePartitionKeyHeader(header, container.partitionKey);
}

function ifMatch(headers: IncomingMessage['headers']): { ifMatch?: string } {
  const value = single(headers['if-match']);
  return value === undefined ? {} : { ifMatch: value };
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

const throttled = (retryAfterMs: number): CosmosError =>
  Object.assign(
    new CosmosError(
      429,
      'Request rate is large. More Request Units may be needed, so no changes were made. Please retry this request later.',
      3200,
    ),
    { retryAfterMs },
  );

function errorReply(error: unknown, activityId: string, url: string): Reply {
  const cosmos =
    error instanceof CosmosError
      ? error
      : new CosmosError(
          500,
          `The local server failed on this request: ${(error as Error)?.message ?? String(error)}`,
        );
  const retryAfterMs = (error as { retryAfterMs?: number }).retryAfterMs;
  return {
    status: cosmos.status,
    body: errorBody(cosmos, activityId, url),
    requestCharge: cosmos.status === 429 ? 0 : FAILED_REQUEST_CHARGE,
    headers: {
      ...(cosmos.substatus === undefined ? {} : { 'x-ms-substatus': String(cosmos.substatus) }),
      ...(retryAfterMs === undefined ? {} : { 'x-ms-retry-after-ms': String(retryAfterMs) }),
    },
  };
}

function parseJson(raw: Buffer): unknown {
  if (raw.length === 0)
    throw badRequest('The request payload is empty. Ensure to provide a valid request payload.');
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw badRequest('The request payload is invalid. Ensure to provide a valid request payload.');
  }
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_REQUEST_BYTES)
      throw new CosmosError(413, `Request size is too large (over ${MAX_REQUEST_BYTES} bytes).`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

const single = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value;
const flag = (value: string | string[] | undefined): boolean => single(value)?.toLowerCase() === 'true';
