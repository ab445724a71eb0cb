import { randomUUID } from 'node:crypto';

import { asObject, validateDefaultTtl, validateId } from './documents';
import { badRequest, conflict, notFound } from './errors';
import type { ItemContainer, StoredItem } from './items';
import type { Offer } from './offers';
import type { PartitionKeyDefinition } from './partitionKey';

/**
 * Databases and containers, in memory. Resource ids (`_rid`) nest like Cosmos DB's: a container's
 * rid starts with its database's bytes and an item's with its container's.
 */
export class ContainerState implements ItemContainer {
  readonly items = new Map<string, StoredItem>();
  /** The paths of each unique key; fixed when the container is created, as in Cosmos DB. */
  readonly uniqueKeys: readonly (readonly string[])[];
  /** Its own throughput; undefined: it shares its database's (offers.ts). Deleted with it. */
  offer: Offer | undefined;
  private documentSequence = 0;
  private properties: Record<string, unknown>;

  constructor(
    readonly database: DatabaseState,
    readonly id: string,
    private readonly ridBytes: Buffer,
    readonly partitionKey: PartitionKeyDefinition,
    definition: Record<string, unknown>,
    nowMs: number,
  ) {
    this.uniqueKeys = parseUniqueKeyPolicy(definition.uniqueKeyPolicy);
    this.properties = this.describe(definition, nowMs);
  }

  get rid(): string {
    return encodeRid(this.ridBytes);
  }

  get selfLink(): string {
    return `dbs/${this.database.rid}/colls/${this.rid}/`;
  }

  get defaultTtl(): number | undefined {
    return this.properties.defaultTtl as number | undefined;
  }

  get resource(): Record<string, unknown> {
    return this.properties;
  }

  private lsn = 0;

  /** The last log sequence number given to a commit (0 before the first). */
  get lastLsn(): number {
    return this.lsn;
  }

  nextLsn(): number {
    return ++this.lsn;
  }

  nextDocumentRid(): string {
    const bytes = Buffer.alloc(8);
    bytes.writeBigUInt64BE(BigInt(++this.documentSequence));
    return encodeRid(Buffer.concat([this.ridBytes, bytes]));
  }

  /** This container as another region holds it: the same definition, items and sequences. */
  copyInto(database: DatabaseState): ContainerState {
    const copy = new ContainerState(database, this.id, this.ridBytes, this.partitionKey, this.properties, 0);
    copy.properties = this.properties;
    copy.offer = this.offer;
    copy.documentSequence = this.documentSequence;
    copy.lsn = this.lsn;
    for (const [key, stored] of this.items) copy.items.set(key, stored);
    return copy;
  }

  replace(definition: Record<string, unknown>, nowMs: number): void {
    // A container is renamed by no request: Cosmos DB refuses a replace whose body names another id.
    if (definition.id !== undefined && definition.id !== this.id) {
      throw badRequest(
        'The id of a container cannot be changed: the body of a replace must carry its own id.',
      );
    }
    const requested = definition.partitionKey as { paths?: unknown } | undefined;
    if (
      requested?.paths !== undefined &&
      JSON.stringify(requested.paths) !== JSON.stringify(this.partitionKey.paths)
    ) {
      throw badRequest('The partition key of a container cannot be changed.');
    }
    this.properties = this.describe(definition, nowMs);
  }

  private describe(definition: Record<string, unknown>, nowMs: number): Record<string, unknown> {
    const defaultTtl = validateDefaultTtl(definition.defaultTtl);
    return {
      id: this.id,
      indexingPolicy: indexingPolicyOf(definition.indexingPolicy),
      partitionKey: this.partitionKey,
      uniqueKeyPolicy: { uniqueKeys: this.uniqueKeys.map((paths) => ({ paths })) },
      ...(defaultTtl === undefined ? {} : { defaultTtl }),
      conflictResolutionPolicy: {
        mode: 'LastWriterWins',
        conflictResolutionPath: '/_ts',
        conflictResolutionProcedure: '',
      },
      geospatialConfig: { type: 'Geography' },
      _rid: this.rid,
      _ts: Math.floor(nowMs / 1000),
      _self: this.selfLink,
      _etag: `"${randomUUID()}"`,
      _docs: 'docs/',
      _sprocs: 'sprocs/',
      _triggers: 'triggers/',
      _udfs: 'udfs/',
      _conflicts: 'conflicts/',
    };
  }
}

export class DatabaseState {
  readonly containers = new Map<string, ContainerState>();
  private containerSequence = 0;
  readonly resource: Record<string, unknown>;
  /** Throughput its containers share; undefined: none of its own (offers.ts). Deleted with it. */
  offer: Offer | undefined;

  constructor(
    readonly id: string,
    private readonly ridBytes: Buffer,
    nowMs: number,
  ) {
    this.resource = {
      id,
      _rid: this.rid,
      _self: `dbs/${this.rid}/`,
      _etag: `"${randomUUID()}"`,
      _colls: 'colls/',
      _users: 'users/',
      _ts: Math.floor(nowMs / 1000),
    };
  }

  get rid(): string {
    return encodeRid(this.ridBytes);
  }

  get selfLink(): string {
    return `dbs/${this.rid}/`;
  }

  /** This database as another region holds it: the same resource, containers and items. */
  copy(): DatabaseState {
    const copy = new DatabaseState(this.id, this.ridBytes, 0);
    Object.assign(copy.resource, this.resource);
    copy.offer = this.offer;
    copy.containerSequence = this.containerSequence;
    for (const [id, container] of this.containers) copy.containers.set(id, container.copyInto(copy));
    return copy;
  }

  /** By id, or by resource id (`_rid`), as a request addressed by resource ids names it. */
  container(id: string): ContainerState {
    const container =
      this.containers.get(id) ?? [...this.containers.values()].find((candidate) => candidate.rid === id);
    if (!container) throw notFound(`Container '${id}' does not exist in database '${this.id}'.`);
    return container;
  }

  createContainer(body: unknown, nowMs: number): ContainerState {
    const definition = asObject(body);
    const id = validateId(definition.id);
    if (this.containers.has(id)) throw conflict(`Container '${id}' already exists.`);
    const partitionKey = parsePartitionKeyDefinition(definition.partitionKey);
    const bytes = Buffer.alloc(4);
    bytes.writeUInt32BE(0x80000000 + ++this.containerSequence);
    const container = new ContainerState(
      this,
      id,
      Buffer.concat([this.ridBytes, bytes]),
      partitionKey,
      definition,
      nowMs,
    );
    this.containers.set(id, container);
    return container;
  }
}

export class AccountState {
  readonly databases = new Map<string, DatabaseState>();
  private databaseSequence = 0;
  private offerSequence = 0;

  /**
   * The account as a second write region holds it when it is added: every database, container and
   * item, from then on written apart until the regions replicate (regions.ts).
   */
  copy(): AccountState {
    const copy = new AccountState();
    copy.databaseSequence = this.databaseSequence;
    copy.offerSequence = this.offerSequence;
    for (const [id, database] of this.databases) copy.databases.set(id, database.copy());
    return copy;
  }

  /** An offer's id (and `_rid`): four characters, as Azure's are. */
  nextOfferId(): string {
    const bytes = Buffer.alloc(3);
    bytes.writeUIntBE(++this.offerSequence % 2 ** 24, 0, 3);
    return encodeRid(bytes);
  }

  /** By id, or by resource id (`_rid`), as a request addressed by resource ids names it. */
  database(id: string): DatabaseState {
    const database =
      this.databases.get(id) ?? [...this.databases.values()].find((candidate) => candidate.rid === id);
    if (!database) throw notFound(`Database '${id}' does not exist.`);
    return database;
  }

  createDatabase(body: unknown, nowMs: number): DatabaseState {
    const id = validateId(asObject(body).id);
    if (this.databases.has(id)) throw conflict(`Database '${id}' already exists.`);
    const bytes = Buffer.alloc(4);
    bytes.writeUInt32BE(++this.databaseSequence);
    const database = new DatabaseState(id, bytes, nowMs);
    this.databases.set(id, database);
    return database;
  }
}

function parsePartitionKeyDefinition(raw: unknown): PartitionKeyDefinition {
  const definition = (raw ?? {}) as { paths?: unknown; kind?: unknown; version?: unknown };
  const paths = definition.paths;
  if (
    !Array.isArray(paths) ||
    paths.length === 0 ||
    paths.length > 3 ||
    !paths.every((p): p is string => typeof p === 'string' && p.startsWith('/') && p.length > 1)
  ) {
    throw badRequest('A container needs a partitionKey with 1 to 3 paths, each starting with "/".');
  }
  const kind = definition.kind ?? (paths.length > 1 ? 'MultiHash' : 'Hash');
  if (kind !== 'Hash' && kind !== 'MultiHash')
    throw badRequest(`Unknown partition key kind ${JSON.stringify(kind)}.`);
  if (kind === 'Hash' && paths.length > 1)
    throw badRequest('A Hash partition key has exactly one path; use MultiHash.');
  const version = definition.version ?? (kind === 'MultiHash' ? 2 : 1);
  if (version !== 1 && version !== 2)
    throw badRequest(`Unknown partition key version ${JSON.stringify(version)}.`);
  return { paths, kind, version };
}

/** Cosmos DB rids are base64 with '/' replaced by '-', so they are safe in a path segment. */
const encodeRid = (bytes: Buffer): string => bytes.toString('base64').replace(/\//g, '-');

/** Cosmos DB's limits: at most 10 unique keys, each of at most 16 paths. */
const MAX_UNIQUE_KEYS = 10;
const MAX_UNIQUE_KEY_PATHS = 16;

/** `uniqueKeyPolicy: { uniqueKeys: [{ paths: ['/a', '/b/c'] }] }`, validated; absent means none. */
function parseUniqueKeyPolicy(policy: unknown): string[][] {
  if (policy === undefined || policy === null) return [];
  const keys = (policy as { uniqueKeys?: unknown }).uniqueKeys;
  if (keys === undefined) return [];
  if (!Array.isArray(keys) || keys.length > MAX_UNIQUE_KEYS)
    throw badRequest(
      `uniqueKeyPolicy.uniqueKeys must be an array of at most ${MAX_UNIQUE_KEYS} unique keys.`,
    );
  return keys.map((key: unknown) => {
    const paths = (key as { paths?: unknown } | null)?.paths;
    if (
      !Array.isArray(paths) ||
      paths.length === 0 ||
      paths.length > MAX_UNIQUE_KEY_PATHS ||
      !paths.every((path) => typeof path === 'string' && /^\/[^/*?]+(\/[^/*?]+)*$/.test(path))
    )
      throw badRequest(
        `Each unique key needs 1 to ${MAX_UNIQUE_KEY_PATHS} paths such as '/email', without wildcards.`,
      );
    return paths as string[];
  });
}

const ETAG_PATH = '/"_etag"/?';

/**
 * The indexing policy as Cosmos DB stores it: what was given, with the defaults filled in
 * (consistent, automatic, every path included) and the `_etag` path always excluded; with
 * indexingMode none, no paths and not automatic. The server keeps no index: the policy is only
 * stored and returned.
 */
function indexingPolicyOf(given: unknown): Record<string, unknown> {
  if (given !== undefined && (given === null || typeof given !== 'object' || Array.isArray(given)))
    throw badRequest('indexingPolicy must be an object.');
  const policy = (given ?? {}) as Record<string, unknown>;
  const mode = policy.indexingMode ?? 'consistent';
  if (typeof mode !== 'string' || !['consistent', 'lazy', 'none'].includes(mode.toLowerCase()))
    throw badRequest(
      `indexingMode must be consistent, lazy or none; got ${JSON.stringify(mode).slice(0, 40)}.`,
    );
  if (mode.toLowerCase() === 'none') {
    if (policy.automatic === true)
      throw badRequest('An indexing policy with indexingMode none cannot be automatic.');
    return { ...policy, indexingMode: 'none', automatic: false, includedPaths: [], excludedPaths: [] };
  }
  const paths = (name: string, fallback: unknown[]): { path: string }[] => {
    const value = policy[name] ?? fallback;
    if (
      !Array.isArray(value) ||
      !value.every((entry) => typeof (entry as { path?: unknown })?.path === 'string')
    )
      throw badRequest(`indexingPolicy.${name} must be an array of { path }.`);
    return value as { path: string }[];
  };
  const excluded = paths('excludedPaths', []);
  return {
    ...policy,
    indexingMode: mode.toLowerCase(),
    automatic: policy.automatic ?? true,
    includedPaths: paths('includedPaths', [{ path: '/*' }]),
    excludedPaths: excluded.some((entry) => entry.path === ETAG_PATH)
      ? excluded
      : [...excluded, { path: ETAG_PATH }],
  };
}
