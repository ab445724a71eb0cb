import { randomUUID } from 'node:crypto';

import {
  assertDocumentSize,
  byteLength,
  type Document,
  expiresAtEpochSeconds,
  validateItemId,
  validateItemTtl,
  withoutSystemProperties,
} from './documents';
import { badRequest, conflict, notFound, preconditionFailed } from './errors';
import { extractPartitionKey, type PartitionKeyDefinition } from './partitionKey';
import { applyPatch, type PatchRequest } from './patch';
import { conditionHolds } from './query';
import { readCharge, writeCharge } from './requestCharge';

/**
 * Item operations, shared by single requests and transactional batches so both have the same
 * semantics. Every operation runs against a StagedWrites view and is committed only when the whole
 * request succeeded; all of it is synchronous, so no other request can observe a half-applied batch.
 */
export type ItemOperation =
  | { kind: 'create'; partitionKey: string; body: Record<string, unknown> }
  | { kind: 'upsert'; partitionKey: string; body: Record<string, unknown>; ifMatch?: string }
  | { kind: 'replace'; partitionKey: string; id: string; body: Record<string, unknown>; ifMatch?: string }
  | { kind: 'delete'; partitionKey: string; id: string; ifMatch?: string }
  | { kind: 'read'; partitionKey: string; id: string; ifNoneMatch?: string }
  | { kind: 'patch'; partitionKey: string; id: string; patch: PatchRequest; ifMatch?: string };

export interface OperationResult {
  status: 200 | 201 | 204 | 304;
  document?: Document;
  requestCharge: number;
}

export interface StoredItem {
  readonly document: Document;
  readonly bytes: number;
  /** Canonical partition key text (see partitionKey.ts). */
  readonly partitionKey: string;
  /** The container's log sequence number of the commit that wrote it (the change feed's order). */
  readonly lsn?: number;
}

/** What an operation needs from the container that holds the item. */
export interface ItemContainer {
  readonly rid: string;
  readonly selfLink: string;
  readonly partitionKey: PartitionKeyDefinition;
  readonly defaultTtl: number | undefined;
  readonly items: Map<string, StoredItem>;
  /** The container's unique keys, each a list of paths; none when empty. */
  readonly uniqueKeys: readonly (readonly string[])[];
  nextDocumentRid(): string;
  /** The next log sequence number: one per commit, shared by every item it writes (a batch is one). */
  nextLsn(): number;
}

export function isExpired(item: StoredItem, defaultTtl: number | undefined, nowMs: number): boolean {
  const expiresAt = expiresAtEpochSeconds(item.document, defaultTtl);
  return expiresAt !== undefined && nowMs / 1000 >= expiresAt;
}

export const itemKey = (partitionKey: string, id: string): string => `${partitionKey}\u0000${id}`;

export class StagedWrites {
  private readonly writes = new Map<string, StoredItem | null>();

  constructor(
    readonly container: ItemContainer,
    readonly nowMs: number,
  ) {}

  /** The live (written and not expired) item under the key, seen through this request's own writes. */
  live(key: string): StoredItem | undefined {
    const item = this.writes.has(key) ? this.writes.get(key) : this.container.items.get(key);
    return item && !isExpired(item, this.container.defaultTtl, this.nowMs) ? item : undefined;
  }

  put(key: string, item: StoredItem): void {
    this.writes.set(key, item);
  }

  remove(key: string): void {
    this.writes.set(key, null);
  }

  get size(): number {
    return this.writes.size;
  }

  /** The live items of one partition key value, seen through this request's own writes. */
  *partition(partitionKey: string): Generator<StoredItem> {
    for (const [key, item] of this.container.items) {
      if (item.partitionKey === partitionKey && !this.writes.has(key) && this.live(key)) yield item;
    }
    for (const [key, item] of this.writes) {
      if (item?.partitionKey === partitionKey && this.live(key)) yield item;
    }
  }

  commit(): void {
    const { items } = this.container;
    const lsn = this.container.nextLsn();
    for (const [key, written] of this.writes) {
      const item = written && { ...written, lsn };
      // Items stay in _rid order, which query continuations rely on: a replace keeps its place and
      // its _rid; a new item (new _rid) goes to the end, even where an expired one still lingers.
      if (!item || items.get(key)?.document._rid !== item.document._rid) items.delete(key);
      if (item) items.set(key, item);
    }
    this.writes.clear();
  }
}

export function executeOperation(staged: StagedWrites, operation: ItemOperation): OperationResult {
  const { container } = staged;
  switch (operation.kind) {
    case 'read': {
      const item = existing(staged, operation.partitionKey, operation.id);
      if (operation.ifNoneMatch !== undefined && operation.ifNoneMatch === item.document._etag) {
        return { status: 304, requestCharge: readCharge(item.bytes) };
      }
      return { status: 200, document: item.document, requestCharge: readCharge(item.bytes) };
    }
    case 'create': {
      const id = validateItemId(operation.body.id);
      assertPartitionKey(operation.body, container, operation.partitionKey);
      if (staged.live(itemKey(operation.partitionKey, id))) throw conflict();
      return write(staged, operation.partitionKey, operation.body, undefined, 201);
    }
    case 'upsert': {
      const id = validateItemId(operation.body.id);
      assertPartitionKey(operation.body, container, operation.partitionKey);
      const current = staged.live(itemKey(operation.partitionKey, id));
      if (operation.ifMatch !== undefined && current?.document._etag !== operation.ifMatch)
        throw preconditionFailed();
      return write(staged, operation.partitionKey, operation.body, current, current ? 200 : 201);
    }
    case 'replace': {
      const current = existing(staged, operation.partitionKey, operation.id);
      if (operation.body.id !== operation.id) {
        throw badRequest(
          `The id in the body ('${String(operation.body.id)}') differs from the id in the request ('${operation.id}').`,
        );
      }
      assertPartitionKey(operation.body, container, operation.partitionKey);
      checkIfMatch(current, operation.ifMatch);
      return write(staged, operation.partitionKey, operation.body, current, 200);
    }
    case 'delete': {
      const current = existing(staged, operation.partitionKey, operation.id);
      checkIfMatch(current, operation.ifMatch);
      staged.remove(itemKey(operation.partitionKey, operation.id));
      return { status: 204, requestCharge: writeCharge(current.bytes) };
    }
    case 'patch': {
      const current = existing(staged, operation.partitionKey, operation.id);
      checkIfMatch(current, operation.ifMatch);
      if (
        operation.patch.condition !== undefined &&
        !conditionHolds(current.document, operation.patch.condition)
      ) {
        throw preconditionFailed(`The patch condition '${operation.patch.condition}' is not met.`);
      }
      const immutable = [
        '/id',
        ...container.partitionKey.paths,
        '/_rid',
        '/_self',
        '/_etag',
        '/_ts',
        '/_attachments',
      ];
      const patched = applyPatch(current.document, operation.patch.operations, immutable);
      return write(staged, operation.partitionKey, patched, current, 200);
    }
  }
}

function existing(staged: StagedWrites, partitionKey: string, id: string): StoredItem {
  const item = staged.live(itemKey(partitionKey, id));
  if (!item) throw notFound();
  return item;
}

function checkIfMatch(current: StoredItem, ifMatch: string | undefined): void {
  if (ifMatch !== undefined && ifMatch !== '*' && ifMatch !== current.document._etag)
    throw preconditionFailed();
}

function assertPartitionKey(
  body: Record<string, unknown>,
  container: ItemContainer,
  partitionKey: string,
): void {
  if (extractPartitionKey(body, container.partitionKey) !== partitionKey) {
    throw badRequest(
      `PartitionKey extracted from document doesn't match the one specified in the header. ` +
        `Document: ${extractPartitionKey(body, container.partitionKey)}, header: ${partitionKey}.`,
      1001,
    );
  }
}

function write(
  staged: StagedWrites,
  partitionKey: string,
  body: Record<string, unknown>,
  current: StoredItem | undefined,
  status: 200 | 201,
): OperationResult {
  const { container } = staged;
  validateItemTtl(body.ttl);
  const id = body.id as string;
  const rid = current?.document._rid ?? container.nextDocumentRid();
  const document: Document = {
    ...withoutSystemProperties(body),
    id,
    _rid: rid,
    _self: `${container.selfLink}docs/${rid}/`,
    _etag: `"${randomUUID()}"`,
    _attachments: 'attachments/',
    _ts: Math.floor(staged.nowMs / 1000),
  };
  const bytes = byteLength(document);
  assertDocumentSize(bytes);
  assertUnique(staged, partitionKey, document);
  staged.put(itemKey(partitionKey, id), { document, bytes, partitionKey });
  return { status, document, requestCharge: writeCharge(bytes) };
}

/**
 * A container's unique keys hold within each logical partition: no two items have the same values
 * at a key's paths (a missing value counts as null, so two items without it collide too). A write
 * that would break one is refused with 409, as Cosmos DB refuses it.
 */
function assertUnique(staged: StagedWrites, partitionKey: string, document: Document): void {
  const { uniqueKeys } = staged.container;
  if (uniqueKeys.length === 0) return;
  const valuesOf = (item: Record<string, unknown>, paths: readonly string[]): string =>
    JSON.stringify(paths.map((path) => valueAt(item, path) ?? null));
  for (const other of staged.partition(partitionKey)) {
    if (other.document.id === document.id) continue;
    for (const paths of uniqueKeys) {
      if (valuesOf(other.document, paths) === valuesOf(document, paths))
        throw conflict('Unique index constraint violation.');
    }
  }
}

function valueAt(item: Record<string, unknown>, path: string): unknown {
  let value: unknown = item;
  for (const segment of path.slice(1).split('/')) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}
