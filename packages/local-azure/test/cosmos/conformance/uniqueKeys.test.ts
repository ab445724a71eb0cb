import { statusOf, useTarget } from '../../support/conformanceTarget';

/**
 * (statusOf: 0 when the operation succeeds, else the status it was refused with.)
 *
 * Unique keys, as Cosmos DB keeps them: the container returns its policy, and within one logical
 * partition no two items share the values at a key's paths (a missing value counts as null), on
 * create, upsert, replace, patch and in a transactional batch (409, nothing written).
 */
const target = useTarget();

describe('unique keys', () => {
  it('returns the policy it was created with, and an empty one by default', async () => {
    const keyed = await target.container({ uniqueKeyPolicy: { uniqueKeys: [{ paths: ['/email'] }] } });
    const plain = await target.container();

    expect((await keyed.read()).resource?.uniqueKeyPolicy).toEqual({ uniqueKeys: [{ paths: ['/email'] }] });
    expect((await plain.read()).resource?.uniqueKeyPolicy?.uniqueKeys ?? []).toEqual([]);
  });

  it('refuses a second item with the same values in the same partition, on every kind of write', async () => {
    const container = await target.container({
      uniqueKeyPolicy: { uniqueKeys: [{ paths: ['/email'] }, { paths: ['/name/first', '/name/last'] }] },
    });
    await container.items.create({
      id: 'a',
      pk: 'p',
      email: 'a@example.com',
      name: { first: 'A', last: 'Z' },
    });
    await container.items.create({
      id: 'b',
      pk: 'p',
      email: 'b@example.com',
      name: { first: 'B', last: 'Z' },
    });

    expect(await statusOf(container.items.create({ id: 'c', pk: 'p', email: 'a@example.com' }))).toBe(409);
    expect(
      await statusOf(
        container.items.upsert({ id: 'c', pk: 'p', email: 'c@example.com', name: { first: 'A', last: 'Z' } }),
      ),
    ).toBe(409);
    expect(
      await statusOf(container.item('b', 'p').replace({ id: 'b', pk: 'p', email: 'a@example.com' })),
    ).toBe(409);
    expect(
      await statusOf(container.item('b', 'p').patch([{ op: 'set', path: '/email', value: 'a@example.com' }])),
    ).toBe(409);
    const batch = await container.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'd', pk: 'p', email: 'd@example.com' } },
        { operationType: 'Create', resourceBody: { id: 'e', pk: 'p', email: 'd@example.com' } },
      ],
      'p',
    );
    expect(batch.result?.map((r) => r.statusCode)).toEqual([424, 409]);
    // A read of a missing item answers 404 without throwing.
    expect((await container.item('d', 'p').read()).statusCode).toBe(404);
  });

  it('lets the same values live in another partition, and an item keep its own values', async () => {
    const container = await target.container({ uniqueKeyPolicy: { uniqueKeys: [{ paths: ['/email'] }] } });
    await container.items.create({ id: 'a', pk: 'p', email: 'a@example.com' });

    expect(await statusOf(container.items.create({ id: 'a2', pk: 'q', email: 'a@example.com' }))).toBe(0);
    expect(
      await statusOf(container.item('a', 'p').replace({ id: 'a', pk: 'p', email: 'a@example.com', v: 2 })),
    ).toBe(0);
  });

  it('counts a missing value as null: two items without the path collide', async () => {
    const container = await target.container({ uniqueKeyPolicy: { uniqueKeys: [{ paths: ['/email'] }] } });
    await container.items.create({ id: 'a', pk: 'p' });

    expect(await statusOf(container.items.create({ id: 'b', pk: 'p' }))).toBe(409);
    expect(await statusOf(container.items.create({ id: 'c', pk: 'p', email: null }))).toBe(409);
  });

  it('frees the values of a deleted item', async () => {
    const container = await target.container({ uniqueKeyPolicy: { uniqueKeys: [{ paths: ['/email'] }] } });
    await container.items.create({ id: 'a', pk: 'p', email: 'a@example.com' });
    await container.item('a', 'p').delete();

    expect(await statusOf(container.items.create({ id: 'b', pk: 'p', email: 'a@example.com' }))).toBe(0);
  });
});
