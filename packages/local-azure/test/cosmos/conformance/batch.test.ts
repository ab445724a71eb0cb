import { type Container, type OperationInput } from '@azure/cosmos';

import { batchErrorStatus, rawRequest, useTarget } from '../../support/conformanceTarget';

const target = useTarget();
let container: Container;
beforeAll(async () => {
  container = await target.container();
});

const exists = async (id: string, pk: string): Promise<boolean> =>
  (await container.item(id, pk).read()).statusCode === 200;

describe('transactional batch: all or nothing', () => {
  it('commits every operation and answers 200 with one result per operation', async () => {
    await container.items.create({ id: 'inv-1', pk: 'b1', paid: 0 });

    const response = await container.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'marker-1', pk: 'b1', type: 'marker' } },
        {
          operationType: 'Patch',
          id: 'inv-1',
          resourceBody: { operations: [{ op: 'incr', path: '/paid', value: 25 }] },
        },
        { operationType: 'Read', id: 'inv-1' },
      ],
      'b1',
    );

    expect(response.code).toBe(200);
    expect(response.result?.map((r) => r.statusCode)).toEqual([201, 200, 200]);
    expect(response.result?.[2]?.resourceBody).toMatchObject({ id: 'inv-1', paid: 25 });
    expect(response.result?.[1]?.eTag).toEqual(expect.any(String));
    expect(await exists('marker-1', 'b1')).toBe(true);
  });

  it('writes nothing when its second operation fails: 207, the failure status, 424 for the rest', async () => {
    await container.items.create({ id: 'taken', pk: 'b2' });

    const response = await container.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'first', pk: 'b2' } },
        { operationType: 'Create', resourceBody: { id: 'taken', pk: 'b2' } },
        { operationType: 'Create', resourceBody: { id: 'third', pk: 'b2' } },
      ],
      'b2',
    );

    expect(response.code).toBe(207);
    expect(response.result?.map((r) => r.statusCode)).toEqual([424, 409, 424]);
    expect(await exists('first', 'b2')).toBe(false);
    expect(await exists('third', 'b2')).toBe(false);
  });

  it('rolls back a patch when a later operation fails', async () => {
    await container.items.create({ id: 'counter', pk: 'b3', n: 0 });

    const response = await container.items.batch(
      [
        {
          operationType: 'Patch',
          id: 'counter',
          resourceBody: { operations: [{ op: 'incr', path: '/n', value: 1 }] },
        },
        { operationType: 'Delete', id: 'does-not-exist' },
      ],
      'b3',
    );
    const { resource } = await container.item('counter', 'b3').read<{ n: number }>();

    expect(response.code).toBe(207);
    expect(response.result?.map((r) => r.statusCode)).toEqual([424, 404]);
    expect(resource?.n).toBe(0);
  });

  it('supports Upsert, Replace and Delete, and later operations see earlier ones', async () => {
    await container.items.create({ id: 'a', pk: 'b4', v: 1 });
    await container.items.create({ id: 'gone', pk: 'b4' });

    const response = await container.items.batch(
      [
        { operationType: 'Upsert', resourceBody: { id: 'new', pk: 'b4', v: 1 } },
        { operationType: 'Replace', id: 'a', resourceBody: { id: 'a', pk: 'b4', v: 2 } },
        { operationType: 'Delete', id: 'gone' },
        {
          operationType: 'Patch',
          id: 'new',
          resourceBody: { operations: [{ op: 'incr', path: '/v', value: 10 }] },
        },
      ],
      'b4',
    );

    expect(response.result?.map((r) => r.statusCode)).toEqual([201, 200, 204, 200]);
    expect((await container.item('a', 'b4').read<{ v: number }>()).resource?.v).toBe(2);
    expect((await container.item('new', 'b4').read<{ v: number }>()).resource?.v).toBe(11);
    expect(await exists('gone', 'b4')).toBe(false);
  });
});

describe('transactional batch: conditions', () => {
  it('fails with 412 on a Replace whose ifMatch is stale, and writes nothing', async () => {
    const { etag: stale } = await container.items.create({ id: 'doc', pk: 'c1', v: 1 });
    await container.item('doc', 'c1').replace({ id: 'doc', pk: 'c1', v: 2 });

    const response = await container.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'marker', pk: 'c1' } },
        { operationType: 'Replace', id: 'doc', ifMatch: stale, resourceBody: { id: 'doc', pk: 'c1', v: 3 } },
      ],
      'c1',
    );

    expect(response.code).toBe(207);
    expect(response.result?.map((r) => r.statusCode)).toEqual([424, 412]);
    expect(await exists('marker', 'c1')).toBe(false);
    expect((await container.item('doc', 'c1').read<{ v: number }>()).resource?.v).toBe(2);
  });

  it('fails with 412 on a Delete whose ifMatch is stale', async () => {
    const { etag: stale } = await container.items.create({ id: 'doc', pk: 'c2', v: 1 });
    await container.item('doc', 'c2').replace({ id: 'doc', pk: 'c2', v: 2 });

    // The SDK's DeleteOperationInput type lacks ifMatch, but the wire format carries it.
    const staleDelete = { operationType: 'Delete', id: 'doc', ifMatch: stale } as OperationInput;
    const response = await container.items.batch([staleDelete], 'c2');

    expect(response.result?.[0]?.statusCode).toBe(412);
    expect(await exists('doc', 'c2')).toBe(true);
  });

  it('succeeds with a current ifMatch', async () => {
    const { etag } = await container.items.create({ id: 'doc', pk: 'c3', v: 1 });

    const response = await container.items.batch(
      [{ operationType: 'Replace', id: 'doc', ifMatch: etag, resourceBody: { id: 'doc', pk: 'c3', v: 2 } }],
      'c3',
    );

    expect(response.code).toBe(200);
  });

  it('fails with 412 when a Patch condition does not hold, and the marker before it is not written', async () => {
    await container.items.create({ id: 'product', pk: 'c4', stock: 2 });

    const response = await container.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'marker', pk: 'c4' } },
        {
          operationType: 'Patch',
          id: 'product',
          resourceBody: {
            condition: 'from c where c.stock >= 5',
            operations: [{ op: 'incr', path: '/stock', value: -5 }],
          },
        },
      ],
      'c4',
    );

    expect(response.result?.map((r) => r.statusCode)).toEqual([424, 412]);
    expect(await exists('marker', 'c4')).toBe(false);
    expect((await container.item('product', 'c4').read<{ stock: number }>()).resource?.stock).toBe(2);
  });

  it('applies a Patch whose condition holds', async () => {
    await container.items.create({ id: 'product', pk: 'c5', stock: 9 });

    const response = await container.items.batch(
      [
        {
          operationType: 'Patch',
          id: 'product',
          resourceBody: {
            condition: 'from c where c.stock >= 5',
            operations: [{ op: 'incr', path: '/stock', value: -5 }],
          },
        },
      ],
      'c5',
    );

    expect(response.code).toBe(200);
    expect((await container.item('product', 'c5').read<{ stock: number }>()).resource?.stock).toBe(4);
  });
});

describe('transactional batch: limits', () => {
  const creates = (pk: string, n: number): OperationInput[] =>
    Array.from(
      { length: n },
      (_, i) => ({ operationType: 'Create', resourceBody: { id: `item-${i}`, pk } }) as const,
    );

  it('accepts 100 operations', async () => {
    const response = await container.items.batch(creates('l1', 100), 'l1');

    expect(response.code).toBe(200);
    expect(response.result).toHaveLength(100);
  });

  it('refuses 101 operations (the SDK refuses before sending; the server answers 400)', async () => {
    await expect(container.items.batch(creates('l2', 101), 'l2')).rejects.toThrow(/100 operations/);

    const raw = await rawRequest(target, 'POST', `/dbs/${container.database.id}/colls/${container.id}/docs`, {
      body: JSON.stringify(creates('l2', 101).map((op) => ({ ...op }))),
      headers: batchHeaders('l2'),
    });

    expect(raw.status).toBe(400);
    expect(await exists('item-0', 'l2')).toBe(false);
  });

  it('refuses a batch over 2 MB as a whole (413) and writes nothing', async () => {
    const blob = 'x'.repeat(700 * 1024);
    const operations: OperationInput[] = [0, 1, 2].map((i) => ({
      operationType: 'Create',
      resourceBody: { id: `big-${i}`, pk: 'l3', blob },
    }));

    const status = await batchErrorStatus(container.items.batch(operations, 'l3'));

    expect(status).toBe(413);
    expect(await exists('big-0', 'l3')).toBe(false);
  });

  it('refuses the whole batch (400) when one operation names another partition key, in Azure’s words', async () => {
    let message = '';
    const status = await batchErrorStatus(
      container.items
        .batch(
          [
            { operationType: 'Create', resourceBody: { id: 'mine', pk: 'l4' } },
            {
              operationType: 'Create',
              partitionKey: 'elsewhere',
              resourceBody: { id: 'theirs', pk: 'elsewhere' },
            },
          ],
          'l4',
        )
        .catch((error: Error) => {
          message = `${error.message} ${String((error.cause as { message?: string } | undefined)?.message)}`;
          throw error;
        }),
    );

    expect(status).toBe(400);
    expect(message).toContain(
      'One or more operations within the batch request have a different partition key value than the request.',
    );
    expect(await exists('mine', 'l4')).toBe(false);
    expect(await exists('theirs', 'elsewhere')).toBe(false);
  });

  it('fails the operation whose body belongs to another partition, and writes nothing', async () => {
    const outcome = await container.items
      .batch(
        [
          { operationType: 'Create', resourceBody: { id: 'mine', pk: 'l5' } },
          { operationType: 'Create', resourceBody: { id: 'theirs', pk: 'other' } },
        ],
        'l5',
      )
      .then(
        (response) => response.result?.map((r) => r.statusCode),
        (error: Error) => (error.cause as { code?: number }).code,
      );

    // The local server answers 207 with that operation's 400; a service may reject the whole request
    // with 400 instead. Either way nothing may be written.
    expect(target.local ? [[424, 400]] : [[424, 400], 400]).toContainEqual(outcome);
    expect(await exists('mine', 'l5')).toBe(false);
    expect(await exists('theirs', 'other')).toBe(false);
  });
});

describe('transactional batch: isolation', () => {
  it('never lets a query observe half of a batch', async () => {
    // Each batch adds one entry and increments the ledger; any snapshot must agree on the count.
    await container.items.create({ id: 'ledger', pk: 'iso', entries: 0 });
    const writers = Array.from({ length: 40 }, (_, i) =>
      container.items.batch(
        [
          { operationType: 'Create', resourceBody: { id: `entry-${i}`, pk: 'iso', kind: 'entry' } },
          {
            operationType: 'Patch',
            id: 'ledger',
            resourceBody: { operations: [{ op: 'incr', path: '/entries', value: 1 }] },
          },
        ],
        'iso',
      ),
    );
    const snapshots = Array.from({ length: 40 }, () =>
      container.items
        .query<{ id: string; kind?: string; entries?: number }>('SELECT * FROM c', { partitionKey: 'iso' })
        .fetchAll(),
    );

    const [, observed] = await Promise.all([Promise.all(writers), Promise.all(snapshots)]);

    for (const { resources } of observed) {
      const entries = resources.filter((doc) => doc.kind === 'entry').length;
      const ledger = resources.find((doc) => doc.id === 'ledger');
      expect(ledger?.entries).toBe(entries);
    }
  });
});

function batchHeaders(pk: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-ms-documentdb-partitionkey': JSON.stringify([pk]),
    'x-ms-cosmos-is-batch-request': 'true',
    'x-ms-cosmos-batch-atomic': 'true',
  };
}
