import { bounded } from '../localHttp';
import { badRequest } from './errors';

export interface PartitionKeyDefinition {
  paths: string[];
  kind: 'Hash' | 'MultiHash';
  version: number;
}

/** One component of a partition key value; `{}` stands for "the document has no value at this path". */
export type PartitionKeyComponent = string | number | boolean | null | Record<string, never>;

const NONE: Record<string, never> = {};

/**
 * Canonical text of a partition key value, used as the storage key of a logical partition. The SDK
 * sends the value as a JSON array (`["p1"]`, `[{}]` for a missing value); the same array built from
 * a document serialises to the same text.
 */
export function canonicalKey(components: readonly PartitionKeyComponent[]): string {
  return JSON.stringify(components);
}

export function parsePartitionKeyHeader(header: string, definition: PartitionKeyDefinition): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(header);
  } catch {
    throw badRequest(`The partition key header '${bounded(header)}' is not valid JSON.`);
  }
  if (!Array.isArray(parsed) || parsed.length !== definition.paths.length) {
    throw badRequest(
      `Partition key provided either doesn't correspond to definition in the collection or doesn't match partition key field values specified in the document.`,
      1001,
    );
  }
  for (const component of parsed as unknown[]) {
    if (!isComponent(component)) {
      throw badRequest(`The partition key component ${JSON.stringify(component)} is not a valid value.`);
    }
  }
  return canonicalKey(parsed as PartitionKeyComponent[]);
}

export function extractPartitionKey(
  document: Record<string, unknown>,
  definition: PartitionKeyDefinition,
): string {
  return canonicalKey(definition.paths.map((path) => componentAt(document, path)));
}

function componentAt(document: Record<string, unknown>, path: string): PartitionKeyComponent {
  let value: unknown = document;
  for (const segment of pathSegments(path)) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return NONE;
    value = (value as Record<string, unknown>)[segment];
  }
  return isScalar(value) ? value : NONE;
}

/** `/a/b` → `['a', 'b']`; Cosmos partition key paths are simple property paths. */
export function pathSegments(path: string): string[] {
  return path
    .split('/')
    .slice(1)
    .map((segment) => segment.replace(/^"(.*)"$/, '$1'));
}

function isScalar(value: unknown): value is string | number | boolean | null {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

function isComponent(value: unknown): value is PartitionKeyComponent {
  return (
    isScalar(value) ||
    (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0)
  );
}
