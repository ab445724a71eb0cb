import { type Container, type PatchOperation } from '@azure/cosmos';

import { statusOf, useTarget } from '../../support/conformanceTarget';

const target = useTarget();
let container: Container;
beforeAll(async () => {
  container = await target.container();
});

let sequence = 0;
async function seed(document: Record<string, unknown>): Promise<string> {
  const id = `patch-${++sequence}`;
  await container.items.create({ id, pk: 'p', ...document });
  return id;
}

async function patchAndRead(
  id: string,
  operations: PatchOperation[],
): Promise<Record<string, unknown> | undefined> {
  const { resource } = await container.item(id, 'p').patch<Record<string, unknown>>(operations);
  return resource;
}

describe('patch operations', () => {
  it('add creates a property and inserts into arrays', async () => {
    const id = await seed({ tags: ['a', 'c'] });

    const result = await patchAndRead(id, [
      { op: 'add', path: '/status', value: 'Open' },
      { op: 'add', path: '/tags/1', value: 'b' },
      { op: 'add', path: '/tags/-', value: 'd' },
    ]);

    expect(result?.status).toBe('Open');
    expect(result?.tags).toEqual(['a', 'b', 'c', 'd']);
  });

  it('set creates or overwrites and replaces array elements', async () => {
    const id = await seed({ status: 'Open', tags: ['a', 'b'] });

    const result = await patchAndRead(id, [
      { op: 'set', path: '/status', value: 'Paid' },
      { op: 'set', path: '/paidBy', value: 'card' },
      { op: 'set', path: '/tags/0', value: 'z' },
    ]);

    expect(result).toMatchObject({ status: 'Paid', paidBy: 'card', tags: ['z', 'b'] });
  });

  it('replace needs an existing target (400 otherwise, and nothing changes)', async () => {
    const id = await seed({ status: 'Open' });

    const replaced = await patchAndRead(id, [{ op: 'replace', path: '/status', value: 'Paid' }]);
    const status = await statusOf(
      container.item(id, 'p').patch([
        { op: 'set', path: '/status', value: 'Void' },
        { op: 'replace', path: '/missing', value: 1 },
      ]),
    );
    const { resource } = await container.item(id, 'p').read<{ status: string; missing?: number }>();

    expect(replaced?.status).toBe('Paid');
    expect(status).toBe(400);
    expect(resource?.status).toBe('Paid');
    expect(resource?.missing).toBeUndefined();
  });

  it('remove deletes a property or an array element, and needs it to exist', async () => {
    const id = await seed({ note: 'x', tags: ['a', 'b', 'c'] });

    const result = await patchAndRead(id, [
      { op: 'remove', path: '/note' },
      { op: 'remove', path: '/tags/1' },
    ]);

    expect(result?.note).toBeUndefined();
    expect(result?.tags).toEqual(['a', 'c']);
    expect(await statusOf(container.item(id, 'p').patch([{ op: 'remove', path: '/note' }]))).toBe(400);
  });

  it('incr adds to a number and creates a missing one', async () => {
    const id = await seed({ paid: 10 });

    const result = await patchAndRead(id, [
      { op: 'incr', path: '/paid', value: 5.5 },
      { op: 'incr', path: '/count', value: 1 },
    ]);

    expect(result?.paid).toBe(15.5);
    expect(result?.count).toBe(1);
  });

  it('incr on a value that is not a number is refused (400)', async () => {
    const id = await seed({ status: 'Open' });

    expect(await statusOf(container.item(id, 'p').patch([{ op: 'incr', path: '/status', value: 1 }]))).toBe(
      400,
    );
  });

  it('move takes a value from one path to another', async () => {
    const id = await seed({ draft: { total: 7 } });

    // The SDK's PatchOperation type has no 'move' yet; the service (and this server) accept it.
    const move = { op: 'move', from: '/draft', path: '/final' } as unknown as PatchOperation;
    const result = await patchAndRead(id, [move]);

    expect(result?.draft).toBeUndefined();
    expect(result?.final).toEqual({ total: 7 });
  });

  it('add and set do not create missing parents (400)', async () => {
    const id = await seed({});

    expect(await statusOf(container.item(id, 'p').patch([{ op: 'set', path: '/a/b', value: 1 }]))).toBe(400);
    expect(await statusOf(container.item(id, 'p').patch([{ op: 'add', path: '/a/b', value: 1 }]))).toBe(400);
  });

  it('can patch ttl but not id, the partition key or system properties (400)', async () => {
    const id = await seed({});

    const withTtl = await patchAndRead(id, [{ op: 'set', path: '/ttl', value: 3600 }]);

    expect(withTtl?.ttl).toBe(3600);
    for (const path of ['/id', '/pk', '/_etag', '/_ts', '/_rid']) {
      expect(await statusOf(container.item(id, 'p').patch([{ op: 'set', path, value: 'x' }]))).toBe(400);
    }
  });

  it('accepts 10 operations and refuses 11 (400)', async () => {
    const id = await seed({});
    const ops = (n: number): PatchOperation[] =>
      Array.from({ length: n }, (_, i) => ({ op: 'set', path: `/f${i}`, value: i }));

    const ten = await patchAndRead(id, ops(10));

    expect(ten?.f9).toBe(9);
    expect(await statusOf(container.item(id, 'p').patch(ops(11)))).toBe(400);
  });

  it('answers 404 for a missing item', async () => {
    expect(
      await statusOf(container.item('patch-missing', 'p').patch([{ op: 'set', path: '/a', value: 1 }])),
    ).toBe(404);
  });

  it('changes the ETag and honours if-match', async () => {
    const { etag } = await container.items.create({ id: 'patch-etag', pk: 'p', n: 1 });

    const { etag: next } = await container
      .item('patch-etag', 'p')
      .patch([{ op: 'incr', path: '/n', value: 1 }]);
    const stale = await statusOf(
      container.item('patch-etag', 'p').patch([{ op: 'incr', path: '/n', value: 1 }], {
        accessCondition: { type: 'IfMatch', condition: etag },
      }),
    );

    expect(next).not.toBe(etag);
    expect(stale).toBe(412);
  });
});

describe('conditional patch', () => {
  it('applies when the predicate holds', async () => {
    const id = await seed({ stock: 5 });

    const { resource } = await container.item(id, 'p').patch<{ stock: number }>({
      condition: 'from c where c.stock >= 3',
      operations: [{ op: 'incr', path: '/stock', value: -3 }],
    });

    expect(resource?.stock).toBe(2);
  });

  it('answers 412 and changes nothing when the predicate does not hold', async () => {
    const id = await seed({ stock: 2 });

    const status = await statusOf(
      container.item(id, 'p').patch({
        condition: 'from c where c.stock >= 3',
        operations: [{ op: 'incr', path: '/stock', value: -3 }],
      }),
    );
    const { resource } = await container.item(id, 'p').read<{ stock: number }>();

    expect(status).toBe(412);
    expect(resource?.stock).toBe(2);
  });

  it('understands AND, OR and IS_DEFINED in the predicate', async () => {
    const id = await seed({ stock: 4, reserved: 0 });

    const { resource } = await container.item(id, 'p').patch<{ reserved: number }>({
      condition: 'from c where (c.stock >= 4 AND IS_DEFINED(c.reserved)) OR c.override = true',
      operations: [{ op: 'incr', path: '/reserved', value: 1 }],
    });

    expect(resource?.reserved).toBe(1);
  });

  it('refuses a malformed predicate (400)', async () => {
    const id = await seed({ stock: 4 });

    expect(
      await statusOf(
        container.item(id, 'p').patch({
          condition: 'from c where c.stock >=',
          operations: [{ op: 'incr', path: '/stock', value: 1 }],
        }),
      ),
    ).toBe(400);
  });
});
