import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { localListener, logUnexpected } from '../localHttp';
import { seededRandom } from '../random';
import { AccountState } from './account';
import { verifyMasterKey } from './auth';
import { failedBatch } from './batch';
import { CosmosError, type ErrorStatus } from './errors';
import { type FaultHandle, FaultInjector, type FaultRule, type FaultTarget } from './faults';
import { errorReply, parseJson, readBody, type Reply, send, single, throttled } from './http';
import { decodeBatchOperations, encodeBatchResults, isHybridRow } from './hybridRow';
import { item, items } from './itemHandlers';
import { isExpired } from './items';
import { Replication } from './regions';
import {
  account,
  conflicts,
  container,
  containers,
  database,
  databases,
  offer,
  offers,
  partitionKeyDelete,
  partitionKeyRanges,
  type ResourceRequest,
} from './resourceHandlers';
import { faultTarget, parseRoute, type Route, signedResource } from './routes';
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
   * `x-ms-retry-after-ms`, as Cosmos DB does (see throughput.ts), and each database created without
   * throughput of its own shares this budget as its offer (offers.ts). Default: no limit; offers
   * are then only those created with throughput, and a container's default 400 RU/s.
   */
  throughput?: number;
  /**
   * The account's write regions (`writableLocations`); more than one makes it a multi-region-write
   * account, each region served on a port of its own with items of its own (see setWriteRegions).
   * Default: one, `local`.
   */
  writeRegions?: readonly string[];
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
  /**
   * Changes the provisioned throughput (RU/s) at run time, as Azure allows (as does replacing the
   * offer of a database that shares it); undefined: no limit.
   */
  setThroughput(requestUnitsPerSecond: number | undefined): void;
  /**
   * Changes the account's write regions, as adding or removing a write region in Azure does. The
   * first keeps this server's endpoint and items; each other region listens on a port of its own
   * (the account lists it as that region's `databaseAccountEndpoint`, so a client that prefers it
   * writes there) and starts with a copy of the first region's items. The regions then commit
   * apart, each with its own 409s, until `replicate()` (regions.ts). Removing a region drops what it
   * has not replicated.
   */
  setWriteRegions(regions: readonly string[]): Promise<void>;
  /**
   * Replicates the write regions' items to each other, last writer wins (regions.ts); returns how
   * many items were written in more than one region since the last replication.
   */
  replicate(): number;
  stop(): Promise<void>;
}

/**
 * The local Cosmos DB server: an HTTP server that answers under loopback names only (localHttp.ts),
 * authorises each request (auth.ts), routes it (routes.ts), applies injected faults, latency and
 * provisioned throughput, and hands it to the handler of its resource (resourceHandlers.ts for
 * metadata, itemHandlers.ts for items).
 */
export async function start(options: LocalCosmosOptions = {}): Promise<LocalCosmos> {
  const key = options.key ?? DEFAULT_KEY;
  const keyBytes = Buffer.from(key, 'base64');
  if (keyBytes.length === 0)
    throw new Error('The local Cosmos server key must be a non-empty base64 string.');
  const now = options.now ?? Date.now;
  const faults = new FaultInjector(seededRandom(options.seed ?? Math.floor(Math.random() * 2 ** 32)));
  let latencyWait: (ms: number) => Promise<void> = sleep;
  const requests: Record<FaultTarget, number> = { read: 0, write: 0, batch: 0, query: 0, metadata: 0 };
  const provisioned = (ru: number | undefined): ProvisionedThroughput | undefined =>
    ru === undefined ? undefined : new ProvisionedThroughput(ru);
  let throughput = provisioned(options.throughput);
  const usage = new UsageByClient();
  /** Committed writes, for the session token. */
  let lsn = 0;
  const listenHost = options.host ?? '127.0.0.1';
  const endpointHost = options.host === undefined || options.host === '0.0.0.0' ? '127.0.0.1' : options.host;
  /** The write regions: the first is this server's endpoint, each other one a listener of its own. */
  const regions: Region[] = [];
  const replication = new Replication(() => regions.map((region) => region.state));

  async function handle(request: IncomingMessage, response: ServerResponse, region: Region): Promise<void> {
    const activityId = randomUUID();
    const url = request.url ?? '/';
    let reply: Reply;
    let dropAfterCommit = false;
    let client: ClientUsage | undefined;
    try {
      const raw = await readBody(request);
      const route = parseRoute(url);
      const method = request.method ?? 'GET';
      verifyMasterKey(request.headers, signedResource(method, url), keyBytes);
      const target = faultTarget(route, method, request.headers);
      requests[target]++;
      if (target !== 'metadata') client = usage.start(single(request.headers['user-agent']));
      const decision = faults.decide(target, single(request.headers['user-agent']) ?? '');
      const delayMs = decision.delayMs + (target === 'metadata' ? 0 : (options.latencyMs ?? 0));
      if (delayMs > 0) await latencyWait(delayMs);
      if (decision.outcome?.kind === 'throttle') throw throttled(decision.outcome.retryAfterMs);
      if (decision.outcome?.kind === 'unavailable') {
        throw new CosmosError(503, 'Service is currently unavailable. (injected by the local server)');
      }
      if (decision.outcome?.kind === 'status') {
        reply = injectedStatus(decision.outcome, target, raw);
      } else {
        const retryAfterMs = client && throughput?.retryAfterMs();
        if (retryAfterMs !== undefined) throw throttled(retryAfterMs);
        dropAfterCommit = decision.outcome?.kind === 'dropResponseAfterCommit';
        reply = dispatch(route, {
          method,
          headers: request.headers,
          raw,
          nowMs: now(),
          account: region.state,
          listening: region.listening,
          region: region.name,
          writeLocations: regions.length > 1 ? regions.map(location) : undefined,
          throughput: () => throughput?.requestUnitsPerSecond,
          setThroughput: (requestUnitsPerSecond) => {
            throughput = provisioned(requestUnitsPerSecond);
          },
          committed: () => lsn++,
        });
      }
    } catch (error) {
      if (!(error instanceof CosmosError)) logUnexpected(SERVER_NAME, error);
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
    send(response, reply, activityId, `0:-1#${lsn}`);
  }

  /** A region's listener, on `port` (0: a free one). */
  async function listen(name: string, state: AccountState, port: number): Promise<Region> {
    const region = { name, state, listening: '' } as Region;
    const server = createServer(
      localListener(
        {
          name: SERVER_NAME,
          listenHost,
          refuse: (response, status, message) =>
            send(
              response,
              errorReply(new CosmosError(status as ErrorStatus, message), randomUUID(), ''),
              randomUUID(),
              `0:-1#${lsn}`,
            ),
        },
        (request, response) => handle(request, response, region),
      ),
    );
    server.keepAliveTimeout = 60_000;
    server.on('clientError', (_error, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, listenHost, () => resolve());
    });
    const { port: bound } = server.address() as AddressInfo;
    return Object.assign(region, {
      server,
      listening: `127.0.0.1:${bound}`,
      endpoint: `http://${endpointHost}:${bound}/`,
    });
  }

  async function close(region: Region): Promise<void> {
    region.server.closeAllConnections();
    await new Promise<void>((resolve) => region.server.close(() => resolve()));
  }

  async function setWriteRegions(names: readonly string[]): Promise<void> {
    const [first, ...others] = writeRegionsOf(names);
    const removed = regions.splice(1);
    await Promise.all(removed.map(close));
    regions[0]!.name = first!;
    for (const name of others) regions.push(await listen(name, regions[0]!.state.copy(), 0));
    replication.remember();
  }

  const sweepExpired = (): number =>
    regions.reduce((sum, region) => sum + removeExpired(region.state, now()), 0);
  const sweeper = setInterval(sweepExpired, options.sweepIntervalMs ?? 1000);
  sweeper.unref();

  const [firstRegion, ...otherRegions] = writeRegionsOf(options.writeRegions ?? ['local']);
  regions.push(await listen(firstRegion!, new AccountState(), options.port ?? 0));
  if (otherRegions.length > 0) await setWriteRegions([firstRegion!, ...otherRegions]);
  const primary = regions[0]!;

  return {
    endpoint: primary.endpoint,
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
      [...primary.state.databases.values()]
        .flatMap((database) => [...database.containers.values()])
        .reduce((count, container) => count + container.items.size, 0),
    requestCounts: () => ({ ...requests }),
    usageByClient: () => usage.snapshot(),
    setThroughput: (requestUnitsPerSecond) => {
      throughput = provisioned(requestUnitsPerSecond);
    },
    setWriteRegions,
    replicate: () => replication.replicate(),
    stop: async () => {
      clearInterval(sweeper);
      await Promise.all(regions.map(close));
    },
  };
}

const SERVER_NAME = 'local Cosmos DB server';

/** One write region: its name, its listener and the items it holds. */
interface Region {
  name: string;
  state: AccountState;
  server: Server;
  /** `host:port` it listens on. */
  listening: string;
  endpoint: string;
}

/** A region as the account lists it. */
const location = ({ name, endpoint }: Region): { name: string; databaseAccountEndpoint: string } => ({
  name,
  databaseAccountEndpoint: endpoint,
});

/** The handler of each kind of resource. */
const handlers: {
  [T in Route['type']]: (request: ResourceRequest, route: Extract<Route, { type: T }>) => Reply;
} = {
  account,
  databases,
  database,
  containers,
  container,
  offers,
  offer,
  pkranges: partitionKeyRanges,
  items,
  item,
  conflicts,
  partitionKeyDelete,
};

/**
 * An injected status: the whole request fails with it, or (a batch, with `operation`) that operation
 * does, the others answering 424, nothing committed.
 */
function injectedStatus(
  { status, operation }: { status: ErrorStatus; operation?: number },
  target: FaultTarget,
  raw: Buffer,
): Reply {
  if (operation === undefined || target !== 'batch') {
    throw new CosmosError(status, `Status ${status} (injected by the local server).`);
  }
  // The .NET SDK's batch is HybridRow rows and reads HybridRow results (hybridRow.ts); @azure/cosmos's is JSON.
  const hybridRow = isHybridRow(raw);
  const operations = hybridRow ? decodeBatchOperations(raw).length : (parseJson(raw) as unknown[]).length;
  const { results } = failedBatch(operations, operation, status);
  return {
    status: 207,
    body: hybridRow ? encodeBatchResults(results) : results,
    requestCharge: results.reduce((sum, r) => sum + r.requestCharge, 0),
  };
}

function dispatch(route: Route, request: ResourceRequest): Reply {
  // The handler of route.type takes that route; TypeScript does not narrow a lookup by its key.
  return (handlers[route.type] as (request: ResourceRequest, route: Route) => Reply)(request, route);
}

/** Physically removes expired items (Cosmos DB's TTL background deletion); returns how many. */
function removeExpired(state: AccountState, nowMs: number): number {
  let removed = 0;
  for (const database of state.databases.values()) {
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
}

/** Write regions as an account reports them: at least one, each named once. */
function writeRegionsOf(regions: readonly string[]): readonly string[] {
  const unique = [...new Set(regions)];
  if (unique.length === 0 || unique.some((name) => name.trim() === ''))
    throw new Error('A Cosmos DB account has at least one write region, each with a name.');
  return unique;
}
