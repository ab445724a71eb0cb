import { badRequest } from './errors';

/**
 * Partial document update, as Cosmos DB defines it:
 * https://learn.microsoft.com/azure/cosmos-db/partial-document-update
 * Paths are JSON Pointers. add/set create a missing property but not missing parents; replace and
 * remove need the target to exist; incr creates a missing number; move needs `from` to exist.
 */
export const PATCH_OPERATION_TYPES = ['add', 'set', 'replace', 'remove', 'incr', 'move'] as const;
export type PatchOperationType = (typeof PATCH_OPERATION_TYPES)[number];
export const MAX_PATCH_OPERATIONS = 10;

export interface PatchOperation {
  op: PatchOperationType;
  path: string;
  value?: unknown;
  from?: string;
}

export interface PatchRequest {
  operations: PatchOperation[];
  condition?: string;
}

export function parsePatchRequest(body: unknown): PatchRequest {
  const request: { operations?: unknown; condition?: unknown } = Array.isArray(body)
    ? { operations: body as unknown }
    : body !== null && typeof body === 'object'
      ? body
      : {};
  if (!Array.isArray(request.operations) || request.operations.length === 0) {
    throw badRequest('A patch request must carry a non-empty list of operations.');
  }
  if (request.operations.length > MAX_PATCH_OPERATIONS) {
    throw badRequest(
      `The number of patch operations (${request.operations.length}) exceeds the limit of ${MAX_PATCH_OPERATIONS}.`,
    );
  }
  if (request.condition !== undefined && typeof request.condition !== 'string') {
    throw badRequest('A patch condition must be a string of the form "from c where ...".');
  }
  return {
    operations: request.operations.map(parseOperation),
    ...(request.condition === undefined ? {} : { condition: request.condition }),
  };
}

function parseOperation(raw: unknown): PatchOperation {
  const operation = (raw ?? {}) as Partial<PatchOperation>;
  if (!PATCH_OPERATION_TYPES.includes(operation.op as PatchOperationType)) {
    throw badRequest(`Unknown patch operation '${String(operation.op)}'.`);
  }
  if (typeof operation.path !== 'string' || !operation.path.startsWith('/') || operation.path === '/') {
    throw badRequest(
      `Patch path '${String(operation.path)}' is invalid: it must be a JSON pointer below the root.`,
    );
  }
  if (operation.op === 'move' && (typeof operation.from !== 'string' || !operation.from.startsWith('/'))) {
    throw badRequest(`A move operation needs a 'from' path.`);
  }
  if (operation.op !== 'remove' && operation.op !== 'move' && !('value' in operation)) {
    throw badRequest(`Patch operation '${operation.op}' on '${operation.path}' needs a value.`);
  }
  if (operation.op === 'incr' && typeof operation.value !== 'number') {
    throw badRequest(`Patch operation 'incr' on '${operation.path}' needs a numeric value.`);
  }
  return operation as PatchOperation;
}

/** Applies operations in order to a copy of the document; throws 400 on the first invalid one. */
export function applyPatch(
  document: Record<string, unknown>,
  operations: readonly PatchOperation[],
  protectedPaths: readonly string[],
): Record<string, unknown> {
  const result = structuredClone(document);
  for (const operation of operations) {
    for (const path of [operation.path, operation.from]) {
      if (path !== undefined && protectedPaths.some((p) => path === p || path.startsWith(`${p}/`))) {
        throw badRequest(
          `Patch cannot modify '${path}': system properties, id and partition key are immutable.`,
        );
      }
    }
    applyOne(result, operation);
  }
  return result;
}

type Container = Record<string, unknown> | unknown[];

function applyOne(document: Record<string, unknown>, operation: PatchOperation): void {
  const { op, path } = operation;
  if (op === 'move') {
    const from = operation.from as string;
    if (path.startsWith(`${from}/`)) throw badRequest(`Cannot move '${from}' into its own child '${path}'.`);
    const source = locate(document, from);
    const value = read(source, from);
    remove(source, from);
    insert(locate(document, path), path, value, 'set');
    return;
  }
  const target = locate(document, path);
  switch (op) {
    case 'add':
    case 'set':
      insert(target, path, structuredClone(operation.value), op);
      return;
    case 'replace':
      read(target, path);
      insert(target, path, structuredClone(operation.value), 'set');
      return;
    case 'remove':
      remove(target, path);
      return;
    case 'incr': {
      const current = exists(target) ? read(target, path) : undefined;
      if (current !== undefined && typeof current !== 'number') {
        throw badRequest(`Patch operation 'incr' on '${path}' targets a value that is not a number.`);
      }
      insert(target, path, (current ?? 0) + (operation.value as number), 'set');
      return;
    }
  }
}

interface Location {
  parent: Container;
  key: string;
}

function locate(document: Record<string, unknown>, path: string): Location {
  const segments = path
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const key = segments.pop() as string;
  let parent: unknown = document;
  for (const segment of segments) {
    const next: unknown = Array.isArray(parent)
      ? (parent as unknown[])[arrayIndex(parent as unknown[], segment, path, false)]
      : parent !== null && typeof parent === 'object'
        ? (parent as Record<string, unknown>)[segment]
        : undefined;
    if (next === null || typeof next !== 'object') {
      throw badRequest(
        `Patch path '${path}' is invalid: its parent does not exist or is not an object or array.`,
      );
    }
    parent = next;
  }
  return { parent: parent as Container, key };
}

function exists({ parent, key }: Location): boolean {
  return Array.isArray(parent)
    ? /^\d+$/.test(key) && Number(key) < parent.length
    : Object.hasOwn(parent, key);
}

function read(location: Location, path: string): unknown {
  if (!exists(location)) throw badRequest(`Patch path '${path}' does not exist in the document.`);
  const { parent, key } = location;
  return Array.isArray(parent) ? parent[Number(key)] : parent[key];
}

function remove(location: Location, path: string): void {
  read(location, path);
  const { parent, key } = location;
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else delete parent[key];
}

function insert({ parent, key }: Location, path: string, value: unknown, mode: 'add' | 'set'): void {
  if (!Array.isArray(parent)) {
    parent[key] = value;
    return;
  }
  if (key === '-') {
    parent.push(value);
    return;
  }
  const index = arrayIndex(parent, key, path, true);
  if (mode === 'add') parent.splice(index, 0, value);
  else parent[index] = value;
}

function arrayIndex(array: unknown[], segment: string, path: string, allowEnd: boolean): number {
  const index = /^\d+$/.test(segment) ? Number(segment) : NaN;
  if (Number.isNaN(index) || index > array.length || (!allowEnd && index === array.length)) {
    throw badRequest(`Patch path '${path}' has an array index '${segment}' out of range.`);
  }
  return index;
}
