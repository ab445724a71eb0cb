import { crc32 } from 'node:zlib';

import { type BatchOperationResult, MAX_BATCH_OPERATIONS } from './batch';
import { badRequest } from './errors';

/**
 * The .NET SDK's transactional batch body: HybridRow rows in a RecordIO stream. Only what the two
 * batch schemas need is here, flat (no nested scopes), every length checked against the bytes left.
 *
 * Sources (Azure/azure-cosmos-dotnet-v3, microsoft/HybridRow):
 * - Microsoft.Azure.Cosmos/src/Batch/HybridRowBatchSchemas.json: the BatchOperation and BatchResult
 *   schemas; ItemBatchOperation.cs `WriteOperation` and ServerBatchRequest.cs write a request,
 *   TransactionalBatchOperationResult.cs `ReadOperationResult` and TransactionalBatchResponse.cs
 *   `PopulateFromContentAsync` read a response (the first byte must be the HybridRow version).
 * - src/Serialization/HybridRow/SystemSchemas/SystemSchema.json: the RecordIO Segment and Record
 *   schemas; RecordIO/RecordIOParser.cs: a stream is a Segment row, then per record a Record row
 *   (length, CRC-32 of the body) followed by the body row; a body whose CRC differs is refused.
 * - HybridRowHeader.cs: a row starts with its version (0x81, HybridRowVersion.V1) and its schema id
 *   (int32, little-endian).
 * - Layouts/LayoutBuilder.cs, Layouts/Layout.cs: after the header, the presence bitmask (one bit per
 *   nullable fixed column and per variable column, in schema order, LSB first), then the fixed
 *   columns (always there, set or not), then the present variable columns in schema order, each a
 *   7-bit varint length and its bytes (RowBuffer.cs `ComputeVariableValueOffset`,
 *   `Write7BitEncodedUInt`), then sparse columns to the end of the row, each a LayoutCode byte
 *   (Layouts/LayoutCode.cs), the path token as a varint (token = 1 + the column's index in the
 *   layout, fixed, then variable, then sparse: Layout.cs, StringTokenizer.cs, RowBuffer.cs
 *   `WriteSparsePath`) and the value; a bool carries its value in the code (Boolean, BooleanFalse).
 * - The operation type numbers are Microsoft.Azure.Documents' OperationType, as the SDK writes them
 *   (read off captured requests: packages/local-azure/test/cosmos/hybridRow.test.ts).
 */

export const HYBRID_ROW_VERSION = 0x81;
const HEADER_BYTES = 5;
const SCHEMA = {
  segment: 2147473648,
  record: 2147473649,
  batchOperation: 2145473648,
  batchResult: 2145473649,
} as const;
/** Segment: header, bitmask (1 byte), length (int32): the whole Segment row, in bytes. */
const SEGMENT_BYTES = HEADER_BYTES + 1 + 4;
/** Record: header, length (int32), crc32 (uint32); neither column is nullable, so no bitmask. */
const RECORD_BYTES = HEADER_BYTES + 4 + 4;

const LayoutCode = { BooleanFalse: 2, Boolean: 3, Int32: 7, UInt32: 11, Float64: 16, Utf8: 20 } as const;

/** BatchOperation's sparse columns, by path token (1 + index; 7 columns come before them). */
const OperationSparse = {
  8: { path: 'indexingDirective', codes: [LayoutCode.Utf8] },
  9: { path: 'ifMatch', codes: [LayoutCode.Utf8] },
  10: { path: 'ifNoneMatch', codes: [LayoutCode.Utf8] },
  11: { path: 'timeToLiveInSeconds', codes: [LayoutCode.Int32] },
  12: { path: 'minimalReturnPreference', codes: [LayoutCode.Boolean, LayoutCode.BooleanFalse] },
} as const;

/** BatchResult's sparse column `requestCharge` (token 6: 4 schematized, retryAfterMilliseconds 5). */
const REQUEST_CHARGE_TOKEN = 6;

const OPERATION_TYPES: Record<number, string> = {
  0: 'Create',
  1: 'Patch',
  2: 'Read',
  4: 'Delete',
  5: 'Replace',
  20: 'Upsert',
};
const RESOURCE_TYPE_DOCUMENT = 2;

/** One decoded operation, in the shape batch.ts's `executeBatch` takes from the JSON body. */
export interface HybridRowOperation {
  operationType: string;
  id?: string;
  /** The partition key as JSON (`["p1"]`), when the operation names its own. */
  partitionKey?: string;
  resourceBody?: unknown;
  ifMatch?: string;
  ifNoneMatch?: string;
  /** The client asked for no resource body in this operation's result (EnableContentResponseOnWrite=false). */
  minimalReturnPreference?: boolean;
}

/** A HybridRow body starts with the version byte; a JSON body with `[`, `{` or white space. */
export const isHybridRow = (raw: Buffer): boolean => raw[0] === HYBRID_ROW_VERSION;

const malformed = (what: string): Error => badRequest(`Malformed HybridRow batch request: ${what}.`);

/** Bounds-checked reads over one buffer; every failure is a 400 that says what and where. */
class Cursor {
  offset = 0;
  constructor(
    private readonly bytes: Buffer,
    private readonly what: string,
  ) {}

  get remaining(): number {
    return this.bytes.length - this.offset;
  }

  take(length: number, field: string): Buffer {
    if (length > this.remaining) {
      throw malformed(
        `${this.what}: ${field} needs ${length} bytes at offset ${this.offset}, only ${this.remaining} are left`,
      );
    }
    const slice = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return slice;
  }

  /** The schema id of the row that starts here, if a header fits. */
  peekSchemaId(): number | undefined {
    return this.remaining >= HEADER_BYTES ? this.bytes.readInt32LE(this.offset + 1) : undefined;
  }

  uint8(field: string): number {
    return this.take(1, field).readUInt8(0);
  }

  int32(field: string): number {
    return this.take(4, field).readInt32LE(0);
  }

  uint32(field: string): number {
    return this.take(4, field).readUInt32LE(0);
  }

  /** A 7-bit varint (RowBuffer.cs `Read7BitEncodedUInt`), at most 5 bytes: lengths fit in 32 bits. */
  varint(field: string): number {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const byte = this.uint8(field);
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw malformed(`${this.what}: ${field} is a varint longer than 5 bytes`);
  }

  /** A varint length and that many bytes. */
  sized(field: string): Buffer {
    return this.take(this.varint(`the length of ${field}`), field);
  }

  header(schemaIds: readonly number[], field: string): number {
    const version = this.uint8(`the version of ${field}`);
    if (version !== HYBRID_ROW_VERSION) {
      throw malformed(
        `${this.what}: ${field} has HybridRow version 0x${version.toString(16)}, not 0x${HYBRID_ROW_VERSION.toString(16)}`,
      );
    }
    const schemaId = this.int32(`the schema id of ${field}`);
    if (!schemaIds.includes(schemaId)) {
      throw malformed(`${this.what}: ${field} has schema id ${schemaId}, expected ${schemaIds.join(' or ')}`);
    }
    return schemaId;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
function text(bytes: Buffer, field: string): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw malformed(`${field} is not valid UTF-8`);
  }
}

/**
 * The operations of a .NET SDK batch body (ServerBatchRequest.cs), in order. A body that does not
 * follow the format is refused with a 400 naming the first thing wrong.
 */
export function decodeBatchOperations(raw: Buffer): HybridRowOperation[] {
  const stream = new Cursor(raw, 'the RecordIO stream');
  const operations: HybridRowOperation[] = [];
  skipSegment(stream);
  while (stream.remaining > 0) {
    // RecordIOParser.cs: between records, another Segment may start.
    if (stream.peekSchemaId() === SCHEMA.segment) {
      skipSegment(stream);
      continue;
    }
    if (operations.length === MAX_BATCH_OPERATIONS) {
      throw badRequest(`Batch request has more operations than what is supported (${MAX_BATCH_OPERATIONS}).`);
    }
    const index = operations.length;
    stream.header([SCHEMA.record], `the Record row of operation ${index}`);
    const length = stream.int32(`the length of operation ${index}`);
    const crc = stream.uint32(`the CRC-32 of operation ${index}`);
    if (length < 0) throw malformed(`operation ${index} has a negative length (${length})`);
    const row = stream.take(length, `operation ${index}`);
    if (crc32(row) !== crc) {
      throw malformed(
        `the CRC-32 of operation ${index} is 0x${crc.toString(16)}, its bytes have 0x${crc32(row).toString(16)}`,
      );
    }
    operations.push(decodeOperation(row, index));
  }
  if (operations.length === 0) throw badRequest('A batch request must carry a non-empty list of operations.');
  return operations;
}

/** A Segment row: its `length` column (rowBufferSize) says how long the row is, sparse columns included. */
function skipSegment(stream: Cursor): void {
  const start = stream.offset;
  stream.header([SCHEMA.segment], 'the Segment row');
  const present = stream.uint8('the Segment bitmask');
  const length = stream.int32('the Segment length');
  if ((present & 1) === 0 || length < SEGMENT_BYTES) {
    throw malformed(`the Segment row has no valid length (${length})`);
  }
  stream.take(length - (stream.offset - start), 'the rest of the Segment row');
}

/** One BatchOperation row (HybridRowBatchSchemas.json; ItemBatchOperation.cs `WriteOperation`). */
function decodeOperation(row: Buffer, index: number): HybridRowOperation {
  const what = `operation ${index}`;
  const cursor = new Cursor(row, what);
  cursor.header([SCHEMA.batchOperation], 'its row');
  // 7 presence bits, one byte: operationType, resourceType (fixed); partitionKey,
  // effectivePartitionKey, id, binaryId, resourceBody (variable).
  const bitmask = cursor.uint8('the presence bitmask');
  const present = (bit: number): boolean => (bitmask & (1 << bit)) !== 0;
  const operationType = cursor.int32('operationType');
  const resourceType = cursor.int32('resourceType');
  if (!present(0)) throw malformed(`${what} has no operationType`);
  const name = OPERATION_TYPES[operationType];
  if (name === undefined) {
    throw badRequest(
      `Batch operation ${index} has an operation type (${operationType}) the local server does not support.`,
    );
  }
  if (present(1) && resourceType !== RESOURCE_TYPE_DOCUMENT) {
    throw badRequest(
      `Batch operation ${index} has resource type ${resourceType}; a batch works on documents (2).`,
    );
  }
  const operation: HybridRowOperation = { operationType: name };
  if (present(2)) operation.partitionKey = text(cursor.sized('partitionKey'), `the partitionKey of ${what}`);
  if (present(3)) cursor.sized('effectivePartitionKey'); // derived from the partition key: not needed
  if (present(4)) operation.id = text(cursor.sized('id'), `the id of ${what}`);
  if (present(5)) cursor.sized('binaryId'); // an internal alternative id: not needed
  if (present(6)) {
    const body = text(cursor.sized('resourceBody'), `the resourceBody of ${what}`);
    try {
      operation.resourceBody = JSON.parse(body) as unknown;
    } catch {
      throw malformed(`the resourceBody of ${what} is not JSON`);
    }
  }
  while (cursor.remaining > 0) {
    const code = cursor.uint8('a sparse column type');
    const token = cursor.varint('a sparse column path');
    const column = OperationSparse[token as keyof typeof OperationSparse];
    if (column === undefined) throw malformed(`${what} has an unknown sparse column (path token ${token})`);
    if (!(column.codes as readonly number[]).includes(code)) {
      throw malformed(`${what}: the sparse column ${column.path} has type code ${code}`);
    }
    switch (column.path) {
      case 'ifMatch':
      case 'ifNoneMatch':
        operation[column.path] = text(cursor.sized(column.path), `the ${column.path} of ${what}`);
        break;
      case 'indexingDirective':
        cursor.sized(column.path); // the local server keeps no index
        break;
      case 'timeToLiveInSeconds':
        throw badRequest(
          `Batch operation ${index} sets timeToLiveInSeconds, which the local server does not support in a batch.`,
        );
      case 'minimalReturnPreference':
        operation.minimalReturnPreference = code === LayoutCode.Boolean;
        break;
    }
  }
  return operation;
}

/**
 * A batch response body (TransactionalBatchResponse.cs `PopulateFromContentAsync`): a Segment, then
 * one Record per result with a BatchResult row (statusCode, subStatusCode, eTag, resourceBody,
 * requestCharge).
 */
export function encodeBatchResults(results: readonly BatchOperationResult[]): Buffer {
  const segment = Buffer.alloc(SEGMENT_BYTES);
  writeHeader(segment, SCHEMA.segment);
  segment.writeUInt8(1, HEADER_BYTES); // `length` is present
  segment.writeInt32LE(SEGMENT_BYTES, HEADER_BYTES + 1);
  const parts: Buffer[] = [segment];
  for (const result of results) {
    const row = encodeResult(result);
    const record = Buffer.alloc(RECORD_BYTES);
    writeHeader(record, SCHEMA.record);
    record.writeInt32LE(row.length, HEADER_BYTES);
    record.writeUInt32LE(crc32(row), HEADER_BYTES + 4);
    parts.push(record, row);
  }
  return Buffer.concat(parts);
}

/** One BatchResult row: bits statusCode 0, subStatusCode 1, eTag 2, resourceBody 3. */
function encodeResult(result: BatchOperationResult): Buffer {
  const fixed = Buffer.alloc(HEADER_BYTES + 1 + 4 + 4);
  writeHeader(fixed, SCHEMA.batchResult);
  const eTag = result.eTag === undefined ? undefined : Buffer.from(result.eTag, 'utf8');
  const body =
    result.resourceBody === undefined ? undefined : Buffer.from(JSON.stringify(result.resourceBody), 'utf8');
  const bitmask =
    1 |
    (result.subStatusCode === undefined ? 0 : 2) |
    (eTag === undefined ? 0 : 4) |
    (body === undefined ? 0 : 8);
  fixed.writeUInt8(bitmask, HEADER_BYTES);
  fixed.writeInt32LE(result.statusCode, HEADER_BYTES + 1);
  fixed.writeInt32LE(result.subStatusCode ?? 0, HEADER_BYTES + 5);
  const charge = Buffer.alloc(1 + 1 + 8);
  charge.writeUInt8(LayoutCode.Float64, 0);
  charge.writeUInt8(REQUEST_CHARGE_TOKEN, 1);
  charge.writeDoubleLE(result.requestCharge, 2);
  return Buffer.concat([
    fixed,
    ...(eTag === undefined ? [] : [varint(eTag.length), eTag]),
    ...(body === undefined ? [] : [varint(body.length), body]),
    charge,
  ]);
}

function writeHeader(buffer: Buffer, schemaId: number): void {
  buffer.writeUInt8(HYBRID_ROW_VERSION, 0);
  buffer.writeInt32LE(schemaId, 1);
}

/** RowBuffer.cs `Write7BitEncodedUInt`: 7 bits a byte, low first, the high bit set on all but the last. */
function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}
