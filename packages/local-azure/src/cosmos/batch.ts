import { asObject, MAX_DOCUMENT_BYTES } from './documents';
import { badRequest, CosmosError } from './errors';
import { executeOperation, type ItemContainer, type ItemOperation, StagedWrites } from './items';
import { parsePartitionKeyHeader } from './partitionKey';
import { parsePatchRequest } from './patch';
import { FAILED_REQUEST_CHARGE } from './requestCharge';

export const MAX_BATCH_OPERATIONS = 100;

/** One entry of the response array, as the SDK reads it. */
export interface BatchOperationResult {
  statusCode: number;
  requestCharge: number;
  eTag?: string;
  resourceBody?: unknown;
  subStatusCode?: number;
}

export interface BatchResult {
  status: 200 | 207;
  results: BatchOperationResult[];
}

/**
 * A transactional batch: every operation targets the partition key of the request; they run in
 * order against staged writes; the first failure stops the batch, reports its own status and 424
 * for every other operation, and nothing is committed.
 */
export function executeBatch(
  container: ItemContainer,
  nowMs: number,
  partitionKey: string,
  body: unknown,
  bodyBytes: number,
): BatchResult {
  assertBatchSize(bodyBytes);
  if (!Array.isArray(body) || body.length === 0) {
    throw badRequest('A batch request must carry a non-empty array of operations.');
  }
  if (body.length > MAX_BATCH_OPERATIONS) {
    throw badRequest(
      `Batch request has more operations (${body.length}) than what is supported (${MAX_BATCH_OPERATIONS}).`,
    );
  }
  const operations = body.map((raw, index) => parseOperation(container, partitionKey, raw, index));

  const staged = new StagedWrites(container, nowMs);
  const results: BatchOperationResult[] = [];
  for (const [index, operation] of operations.entries()) {
    try {
      const outcome = executeOperation(staged, operation);
      results.push({
        statusCode: outcome.status,
        requestCharge: outcome.requestCharge,
        ...(outcome.document
          ? {
              eTag: outcome.document._etag,
              ...(operation.kind === 'delete' ? {} : { resourceBody: outcome.document }),
            }
          : {}),
      });
    } catch (error) {
      if (!(error instanceof CosmosError)) throw error;
      return failedBatch(operations.length, index, error.status, error.substatus);
    }
  }
  staged.commit();
  return { status: 200, results };
}

/** A batch body over the document size limit is refused (413) before it is read. */
export function assertBatchSize(bodyBytes: number): void {
  if (bodyBytes > MAX_DOCUMENT_BYTES) {
    throw new CosmosError(
      413,
      `Request size is too large: the batch is ${bodyBytes} bytes; the limit is ${MAX_DOCUMENT_BYTES}.`,
    );
  }
}

/**
 * A batch that one operation failed: that operation's status, 424 (failed dependency) for every
 * other, nothing committed.
 */
export function failedBatch(
  operations: number,
  failed: number,
  status: number,
  substatus?: number,
): BatchResult {
  return {
    status: 207,
    results: Array.from({ length: operations }, (_, index) =>
      index === failed
        ? {
            statusCode: status,
            requestCharge: FAILED_REQUEST_CHARGE,
            ...(substatus === undefined ? {} : { subStatusCode: substatus }),
          }
        : { statusCode: 424, requestCharge: 0 },
    ),
  };
}

interface RawOperation {
  operationType?: unknown;
  id?: unknown;
  resourceBody?: unknown;
  ifMatch?: unknown;
  ifNoneMatch?: unknown;
  partitionKey?: unknown;
}

function parseOperation(
  container: ItemContainer,
  partitionKey: string,
  raw: unknown,
  index: number,
): ItemOperation {
  const operation = asObject(raw, `Batch operation ${index}`) as RawOperation;
  // An operation may name its own partition key (a JSON string such as "[\"p1\"]"); it must be the
  // batch's: a batch is one logical partition, so a stray key rejects the whole request.
  if (operation.partitionKey !== undefined) {
    const own = parsePartitionKeyHeader(
      typeof operation.partitionKey === 'string'
        ? operation.partitionKey
        : JSON.stringify(operation.partitionKey),
      container.partitionKey,
    );
    if (own !== partitionKey) {
      // Azure's wording (Microsoft's SDK tests match on it), then which operation.
      throw badRequest(
        'One or more operations within the batch request have a different partition key value than the request. ' +
          `(Operation ${index} has ${own}; the batch has ${partitionKey}.)`,
        1001,
      );
    }
  }
  const ifMatch = optionalString(operation.ifMatch, 'ifMatch', index);
  const id = (): string => {
    if (typeof operation.id !== 'string') throw badRequest(`Batch operation ${index} needs an 'id'.`);
    return operation.id;
  };
  const body = (): Record<string, unknown> =>
    asObject(operation.resourceBody, `The resourceBody of batch operation ${index}`);
  switch (operation.operationType) {
    case 'Create':
      return { kind: 'create', partitionKey, body: body() };
    case 'Upsert':
      return { kind: 'upsert', partitionKey, body: body(), ...withIfMatch(ifMatch) };
    case 'Replace':
      return { kind: 'replace', partitionKey, id: id(), body: body(), ...withIfMatch(ifMatch) };
    case 'Delete':
      return { kind: 'delete', partitionKey, id: id(), ...withIfMatch(ifMatch) };
    case 'Read': {
      const ifNoneMatch = optionalString(operation.ifNoneMatch, 'ifNoneMatch', index);
      return { kind: 'read', partitionKey, id: id(), ...(ifNoneMatch === undefined ? {} : { ifNoneMatch }) };
    }
    case 'Patch':
      return {
        kind: 'patch',
        partitionKey,
        id: id(),
        patch: parsePatchRequest(operation.resourceBody),
        ...withIfMatch(ifMatch),
      };
    default:
      throw badRequest(
        `Batch operation ${index} has an unknown operationType ${JSON.stringify(operation.operationType)}.`,
      );
  }
}

function optionalString(value: unknown, name: string, index: number): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw badRequest(`Batch operation ${index} has a non-string '${name}'.`);
  return value;
}

const withIfMatch = (ifMatch: string | undefined): { ifMatch?: string } =>
  ifMatch === undefined ? {} : { ifMatch };
