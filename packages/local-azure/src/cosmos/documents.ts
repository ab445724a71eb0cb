import { badRequest, CosmosError } from './errors';

/** A stored item: the user's JSON plus the system properties Cosmos DB adds. */
export type Document = Record<string, unknown> & {
  id: string;
  _rid: string;
  _self: string;
  _etag: string;
  _ts: number;
  _attachments: string;
};

export const SYSTEM_PROPERTIES = ['_rid', '_self', '_etag', '_ts', '_attachments'] as const;
export const MAX_DOCUMENT_BYTES = 2 * 1024 * 1024;
export const MAX_ID_LENGTH = 255;
/** Characters a database or container id may not hold. */
const ILLEGAL_ID_CHARACTERS = /[/\\?#]/;
/**
 * An item id may hold '?': Azure stores and serves it. @azure/cosmos checks item ids for '/', '\\'
 * and '#' only and puts '?' in the path as it is (routes.ts); Microsoft's id encoding tests expect
 * such an item to be created, read, replaced and deleted.
 */
const ILLEGAL_ITEM_ID_CHARACTERS = /[/\\#]/;

export function asObject(body: unknown, what = 'The request payload'): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw badRequest(`${what} is invalid. Ensure to provide a valid request payload.`);
  }
  return body as Record<string, unknown>;
}

export function validateId(id: unknown, illegal: RegExp = ILLEGAL_ID_CHARACTERS): string {
  if (id === undefined) {
    throw badRequest(`The input content is invalid because the required properties - 'id; ' - are missing`);
  }
  if (typeof id !== 'string' || id.length === 0) {
    throw badRequest(`The input name is invalid: 'id' must be a non-empty string.`);
  }
  if (id.length > MAX_ID_LENGTH) {
    throw badRequest(
      `The input name is invalid: 'id' exceeds the maximum length of ${MAX_ID_LENGTH} characters.`,
    );
  }
  if (illegal.test(id)) {
    const characters = illegal === ILLEGAL_ID_CHARACTERS ? "'/', '\\', '?' and '#'" : "'/', '\\' and '#'";
    throw badRequest(`The input name '${id}' is invalid: the characters ${characters} are not allowed.`);
  }
  return id;
}

export const validateItemId = (id: unknown): string => validateId(id, ILLEGAL_ITEM_ID_CHARACTERS);

/**
 * Item `ttl`: absent = follow the container; -1 = never expire; a positive integer = seconds.
 * Anything else, null included, is refused with 400, as Cosmos DB refuses it.
 */
export function validateItemTtl(ttl: unknown): void {
  if (ttl === undefined) return;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || (ttl <= 0 && ttl !== -1)) {
    throw badRequest(`The value of 'ttl' must be -1 or a positive integer; got ${JSON.stringify(ttl)}.`);
  }
}

/** Container `defaultTtl`: absent or null = TTL off; -1 = on without a default; a positive integer. */
export function validateDefaultTtl(ttl: unknown): number | undefined {
  if (ttl === undefined || ttl === null) return undefined;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || (ttl <= 0 && ttl !== -1)) {
    throw badRequest(
      `The value of 'defaultTtl' must be -1 or a positive integer; got ${JSON.stringify(ttl)}.`,
    );
  }
  return ttl;
}

/**
 * When an item stops being visible, in epoch seconds, or undefined when it never expires.
 *   container defaultTtl absent  → nothing expires, item ttl ignored
 *   container defaultTtl -1      → only items carrying a positive ttl expire
 *   container defaultTtl n       → items expire n seconds after their last write, unless their own ttl says otherwise
 */
export function expiresAtEpochSeconds(
  document: Document,
  defaultTtl: number | undefined,
): number | undefined {
  if (defaultTtl === undefined) return undefined;
  const itemTtl = typeof document.ttl === 'number' ? document.ttl : undefined;
  const ttl = itemTtl ?? defaultTtl;
  return ttl === -1 ? undefined : document._ts + ttl;
}

export function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

export function assertDocumentSize(bytes: number): void {
  if (bytes > MAX_DOCUMENT_BYTES) {
    throw new CosmosError(
      413,
      `Request size is too large: the document is ${bytes} bytes; the limit is ${MAX_DOCUMENT_BYTES}.`,
    );
  }
}

export function withoutSystemProperties(body: Record<string, unknown>): Record<string, unknown> {
  const copy = { ...body };
  for (const property of SYSTEM_PROPERTIES) delete copy[property];
  return copy;
}
