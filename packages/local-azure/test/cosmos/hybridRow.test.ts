import { createHmac } from 'node:crypto';
import { crc32 } from 'node:zlib';

import { CosmosClient } from '@azure/cosmos';

import { type LocalCosmos, start } from '../../src/cosmos';
import type { BatchOperationResult } from '../../src/cosmos/batch';
import { CosmosError } from '../../src/cosmos/errors';
import { decodeBatchOperations, encodeBatchResults, isHybridRow } from '../../src/cosmos/hybridRow';

/**
 * The .NET SDK's batch body (packages/local-azure/src/cosmos/hybridRow.ts). The fixtures are request bodies
 * Microsoft.Azure.Cosmos 3.64.0 sent to the local server in gateway mode, captured on the wire:
 * a RecordIO Segment row, then per operation a Record row (81 f1d8ff7f, length, CRC-32) and the
 * BatchOperation row (81 7054e17f, presence bits, operationType, resourceType, variable columns,
 * sparse columns).
 */
const hex = (...parts: string[]): Buffer => Buffer.from(parts.join(''), 'hex');
const SEGMENT = '81f0d8ff7f010a000000';

/** Create a, Upsert b, Replace c (IfMatchEtag), Read c, Delete x (IfNoneMatchEtag "zz"). */
const CAPTURED_CRUD = hex(
  SEGMENT,
  '81f1d8ff7f330000005e15ed3f',
  '817054e17f430000000002000000247b226964223a2261222c22706172746974696f6e4b6579223a227031222c226e223a317d',
  '81f1d8ff7f330000004c25cf6b',
  '817054e17f431400000002000000247b226964223a2262222c22706172746974696f6e4b6579223a227031222c226e223a327d',
  '81f1d8ff7f5e000000b72ecd0d',
  '817054e17f5305000000020000000163247b226964223a2263222c22706172746974696f6e4b6579223a227031222c226e223a337d',
  '1409262239316563366236612d343534622d343036302d626363652d34333231363835356236336522',
  '81f1d8ff7f100000000c438db0',
  '817054e17f1302000000020000000163',
  '81f1d8ff7f17000000d40a8695',
  '817054e17f1304000000020000000178140a04227a7a22',
);

/** Patch c (incr /n 5, set /tag), Upsert d with EnableContentResponseOnWrite=false, Create a. */
const CAPTURED_PATCH = hex(
  SEGMENT,
  '81f1d8ff7f6c0000005e9e7e1b',
  '817054e17f53010000000200000001635b7b226f7065726174696f6e73223a5b7b226f70223a22696e6372222c2270617468223a222f6e222c2276616c7565223a357d2c7b226f70223a22736574222c2270617468223a222f746167222c2276616c7565223a2278227d5d7d',
  '81f1d8ff7f2f000000e1180ddd',
  '817054e17f4314000000020000001e7b226964223a2264222c22706172746974696f6e4b6579223a227031227d030c',
  '81f1d8ff7f2d000000d8cd0748',
  '817054e17f4300000000020000001e7b226964223a2261222c22706172746974696f6e4b6579223a227031227d',
);

/** The Record row before `row`: header, length, CRC-32 (RecordIOParser.cs checks it). */
function record(row: Buffer): string {
  const header = Buffer.alloc(13);
  header.write('81f1d8ff7f', 'hex');
  header.writeInt32LE(row.length, 5);
  header.writeUInt32LE(crc32(row), 9);
  return header.toString('hex');
}

const refusal = (run: () => unknown): { status: number; message: string } | 'accepted' => {
  try {
    run();
    return 'accepted';
  } catch (error) {
    if (!(error instanceof CosmosError)) throw error;
    return { status: error.status, message: error.message };
  }
};

/**
 * Reads a BatchResult stream the way TransactionalBatchOperationResult.cs does, written here from the
 * format rather than from hybridRow.ts: Segment, then Record + row per result.
 */
function readResults(body: Buffer): (BatchOperationResult & { crcOk: boolean })[] {
  expect(body.subarray(0, 10).toString('hex')).toBe(SEGMENT);
  const results = [];
  let at = 10;
  while (at < body.length) {
    expect(body.subarray(at, at + 5).toString('hex')).toBe('81f1d8ff7f');
    const length = body.readInt32LE(at + 5);
    const row = body.subarray(at + 13, at + 13 + length);
    const crcOk = crc32(row) === body.readUInt32LE(at + 9);
    at += 13 + length;
    expect(row.subarray(0, 5).toString('hex')).toBe('817154e17f');
    const bits = row[5]!;
    let offset = 14;
    const variable = (): string => {
      const size = row[offset]!; // below 128 in these tests: a one-byte varint
      const value = row.subarray(offset + 1, offset + 1 + size).toString('utf8');
      offset += 1 + size;
      return value;
    };
    const eTag = bits & 4 ? variable() : undefined;
    const resource = bits & 8 ? variable() : undefined;
    // Sparse: requestCharge, code 16 (Float64), path token 6.
    expect([row[offset], row[offset + 1]]).toEqual([16, 6]);
    results.push({
      statusCode: row.readInt32LE(6),
      ...(bits & 2 ? { subStatusCode: row.readInt32LE(10) } : {}),
      ...(eTag === undefined ? {} : { eTag }),
      ...(resource === undefined ? {} : { resourceBody: JSON.parse(resource) as unknown }),
      requestCharge: row.readDoubleLE(offset + 2),
      crcOk,
    });
    expect(offset + 10).toBe(row.length);
  }
  return results;
}

describe('decodeBatchOperations: the .NET SDK batch body', () => {
  it('reads every operation of a captured body: types, ids, bodies, ETag conditions', () => {
    expect(isHybridRow(CAPTURED_CRUD)).toBe(true);
    expect(isHybridRow(Buffer.from('[{"operationType":"Create"}]'))).toBe(false);

    expect(decodeBatchOperations(CAPTURED_CRUD)).toEqual([
      { operationType: 'Create', resourceBody: { id: 'a', partitionKey: 'p1', n: 1 } },
      { operationType: 'Upsert', resourceBody: { id: 'b', partitionKey: 'p1', n: 2 } },
      {
        operationType: 'Replace',
        id: 'c',
        resourceBody: { id: 'c', partitionKey: 'p1', n: 3 },
        ifMatch: '"91ec6b6a-454b-4060-bcce-43216855b63e"',
      },
      { operationType: 'Read', id: 'c' },
      { operationType: 'Delete', id: 'x', ifNoneMatch: '"zz"' },
    ]);
  });

  it('reads a patch (its operations as the resourceBody) and a write that asked for no content', () => {
    expect(decodeBatchOperations(CAPTURED_PATCH)).toEqual([
      {
        operationType: 'Patch',
        id: 'c',
        resourceBody: {
          operations: [
            { op: 'incr', path: '/n', value: 5 },
            { op: 'set', path: '/tag', value: 'x' },
          ],
        },
      },
      {
        operationType: 'Upsert',
        resourceBody: { id: 'd', partitionKey: 'p1' },
        minimalReturnPreference: true,
      },
      { operationType: 'Create', resourceBody: { id: 'a', partitionKey: 'p1' } },
    ]);
  });

  it('refuses a malformed body with a 400 that says what is wrong, never anything else', () => {
    const flipped = Buffer.from(CAPTURED_CRUD);
    flipped.writeUInt8(flipped.readUInt8(30) ^ 1, 30); // a byte of the first operation's JSON body: its CRC-32 no longer matches
    const unknownType = Buffer.from(CAPTURED_PATCH.subarray(0, 10 + 13 + 108));
    unknownType.writeInt32LE(99, 10 + 13 + 6);
    unknownType.writeUInt32LE(crc32(unknownType.subarray(23)), 10 + 9);
    // Create (bits: operationType, resourceBody) whose body length is a varint of 6 bytes.
    const hugeRow = hex('817054e17f', '41', '00000000', '02000000', 'ffffffffff7f');
    const hugeVarint = hex(SEGMENT, record(hugeRow), hugeRow.toString('hex'));

    expect(refusal(() => decodeBatchOperations(CAPTURED_CRUD.subarray(0, 40)))).toEqual({
      status: 400,
      message:
        'Malformed HybridRow batch request: the RecordIO stream: operation 0 needs 51 bytes at offset 23, only 17 are left.',
    });
    expect(refusal(() => decodeBatchOperations(flipped))).toEqual({
      status: 400,
      message: `Malformed HybridRow batch request: the CRC-32 of operation 0 is 0x3fed155e, its bytes have 0x${crc32(flipped.subarray(23, 23 + 51)).toString(16)}.`,
    });
    expect(refusal(() => decodeBatchOperations(unknownType))).toEqual({
      status: 400,
      message: 'Batch operation 0 has an operation type (99) the local server does not support.',
    });
    expect(refusal(() => decodeBatchOperations(hex('81', '00000000')))).toEqual({
      status: 400,
      message:
        'Malformed HybridRow batch request: the RecordIO stream: the Segment row has schema id 0, expected 2147473648.',
    });
    expect(refusal(() => decodeBatchOperations(hex(SEGMENT)))).toEqual({
      status: 400,
      message: 'A batch request must carry a non-empty list of operations.',
    });
    // A length that claims far more than the body has: refused, nothing allocated for it.
    expect(refusal(() => decodeBatchOperations(hex(SEGMENT, '81f1d8ff7fffffff7f00000000')))).toEqual({
      status: 400,
      message:
        'Malformed HybridRow batch request: the RecordIO stream: operation 0 needs 2147483647 bytes at offset 23, only 0 are left.',
    });
    expect(refusal(() => decodeBatchOperations(hugeVarint))).toEqual({
      status: 400,
      message:
        'Malformed HybridRow batch request: operation 0: the length of resourceBody is a varint longer than 5 bytes.',
    });
    // Every prefix of a real body, and every single-byte corruption of it, is a 400 or decodes.
    for (let length = 1; length < CAPTURED_PATCH.length; length++) {
      const outcome = refusal(() => decodeBatchOperations(CAPTURED_PATCH.subarray(0, length)));
      expect(outcome === 'accepted' || outcome.status === 400).toBe(true);
    }
    for (let at = 0; at < CAPTURED_CRUD.length; at++) {
      const corrupted = Buffer.from(CAPTURED_CRUD);
      corrupted.writeUInt8(corrupted.readUInt8(at) ^ 0xff, at);
      const outcome = refusal(() => decodeBatchOperations(corrupted));
      expect(outcome === 'accepted' || outcome.status === 400).toBe(true);
    }
  });
});

describe('encodeBatchResults: what the .NET SDK reads back', () => {
  it('writes a Segment, then a Record with its CRC-32 and a BatchResult row per result', () => {
    const body = encodeBatchResults([
      { statusCode: 201, requestCharge: 5.5, eTag: '"e1"', resourceBody: { id: 'a' } },
      { statusCode: 409, requestCharge: 1, subStatusCode: 1001 },
    ]);
    const first = hex(
      '817154e17f', // version, schema BatchResult
      '0d', // present: statusCode, eTag, resourceBody
      'c9000000', // statusCode 201
      '00000000', // subStatusCode (not present)
      '04',
      '22653122', // eTag "e1"
      '0a',
      '7b226964223a2261227d', // resourceBody {"id":"a"}
      '10',
      '06',
      '0000000000001640', // sparse Float64, path token 6 (requestCharge): 5.5
    );
    const second = hex('817154e17f', '03', '99010000', 'e9030000', '10', '06', '000000000000f03f');
    expect(body.toString('hex')).toBe(
      [SEGMENT, record(first), first.toString('hex'), record(second), second.toString('hex')].join(''),
    );
    expect(readResults(body)).toEqual([
      { statusCode: 201, requestCharge: 5.5, eTag: '"e1"', resourceBody: { id: 'a' }, crcOk: true },
      { statusCode: 409, subStatusCode: 1001, requestCharge: 1, crcOk: true },
    ]);
  });
});

describe('a .NET SDK batch over HTTP', () => {
  let server: LocalCosmos;
  let client: CosmosClient;
  const path = '/dbs/hybrid/colls/state/docs';

  beforeAll(async () => {
    server = await start();
    client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
    const { database } = await client.databases.create({ id: 'hybrid' });
    await database.containers.create({ id: 'state', partitionKey: '/partitionKey' });
  });
  afterAll(async () => {
    client.dispose();
    await server.stop();
  });

  /** Posts a batch as the .NET SDK does (its headers, no content type), signed with `key`. */
  const postBatch = async (body: Buffer, key = server.key): Promise<{ status: number; body: Buffer }> => {
    const date = new Date().toUTCString();
    const text = `post\ndocs\ndbs/hybrid/colls/state\n${date.toLowerCase()}\n\n`;
    const sig = createHmac('sha256', Buffer.from(key, 'base64')).update(text).digest('base64');
    const response = await fetch(new URL(path, server.endpoint), {
      method: 'POST',
      headers: {
        authorization: encodeURIComponent(`type=master&ver=1.0&sig=${sig}`),
        'x-ms-date': date,
        'x-ms-version': '2020-07-15',
        'x-ms-documentdb-partitionkey': '["p1"]',
        'x-ms-cosmos-is-batch-request': 'True',
        'x-ms-cosmos-batch-atomic': 'True',
        'x-ms-cosmos-batch-ordered': 'True',
      },
      body: new Uint8Array(body),
    });
    return { status: response.status, body: Buffer.from(await response.arrayBuffer()) };
  };

  const exists = async (id: string): Promise<boolean> =>
    (await client.database('hybrid').container('state').item(id, 'p1').read()).statusCode === 200;

  it('runs the captured batch atomically: the missing item fails it, the others answer 424, nothing is written', async () => {
    const response = await postBatch(CAPTURED_CRUD);

    expect(response.status).toBe(207);
    expect(readResults(response.body).map((r) => [r.statusCode, r.crcOk])).toEqual([
      [424, true],
      [424, true],
      [404, true],
      [424, true],
      [424, true],
    ]);
    expect(await exists('a')).toBe(false);
    expect(await exists('b')).toBe(false);
  });

  it('answers a malformed body 400 with its reason, and goes on serving', async () => {
    const response = await postBatch(CAPTURED_CRUD.subarray(0, 40));

    expect(response.status).toBe(400);
    const error = JSON.parse(response.body.toString('utf8')) as { code: string; message: string };
    expect(error.code).toBe('BadRequest');
    expect(error.message).toContain(
      'Malformed HybridRow batch request: the RecordIO stream: operation 0 needs 51 bytes at offset 23, only 17 are left.',
    );
    expect((await postBatch(CAPTURED_PATCH)).status).toBe(207); // item c does not exist: 404
  });

  it('fails the operation a fault names, in the format the .NET SDK reads, the others 424', async () => {
    server.faults.inject({ kind: 'status', on: 'batch', status: 429, operation: 1, times: 1 });
    const response = await postBatch(CAPTURED_CRUD);

    expect(response.status).toBe(207);
    expect(readResults(response.body).map((r) => r.statusCode)).toEqual([424, 429, 424, 424, 424]);
    expect(await exists('a')).toBe(false);
  });

  it('checks the signature of a HybridRow batch as of any request: another key gets 401', async () => {
    const response = await postBatch(CAPTURED_PATCH, Buffer.from('another key').toString('base64'));

    expect(response.status).toBe(401);
  });
});
