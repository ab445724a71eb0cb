import { statusOf, type Target, useTarget } from '../../support/conformanceTarget';

const target = useTarget();

const visible = async (container: Awaited<ReturnType<Target['container']>>, id: string): Promise<boolean> =>
  (await container.item(id, 'p').read()).statusCode === 200;

describe('time to live', () => {
  it('with no container defaultTtl, nothing expires, not even items carrying ttl', async () => {
    const container = await target.container();
    await container.items.create({ id: 'short', pk: 'p', ttl: 1 });

    await target.advanceSeconds(3);

    expect(await visible(container, 'short')).toBe(true);
  });

  it('with defaultTtl -1, only items carrying a positive ttl expire', async () => {
    const container = await target.container({ defaultTtl: -1 });
    await container.items.create({ id: 'short', pk: 'p', ttl: 1 });
    await container.items.create({ id: 'forever', pk: 'p' });
    await container.items.create({ id: 'explicit-forever', pk: 'p', ttl: -1 });

    await target.advanceSeconds(3);

    expect(await visible(container, 'short')).toBe(false);
    expect(await visible(container, 'forever')).toBe(true);
    expect(await visible(container, 'explicit-forever')).toBe(true);
  });

  it('with defaultTtl n, items expire n seconds after their last write unless their ttl says otherwise', async () => {
    const container = await target.container({ defaultTtl: 2 });
    await container.items.create({ id: 'default', pk: 'p' });
    await container.items.create({ id: 'longer', pk: 'p', ttl: 3600 });
    await container.items.create({ id: 'never', pk: 'p', ttl: -1 });

    await target.advanceSeconds(4);

    expect(await visible(container, 'default')).toBe(false);
    expect(await visible(container, 'longer')).toBe(true);
    expect(await visible(container, 'never')).toBe(true);
  });

  it('counts from the last write: a replace restarts the clock', async () => {
    // Seconds of margin on each side: _ts is whole seconds, and a loaded machine takes its time
    // between two requests.
    const container = await target.container({ defaultTtl: 10 });
    await container.items.create({ id: 'touched', pk: 'p', v: 1 });
    await container.items.create({ id: 'untouched', pk: 'p', v: 1 });

    await target.advanceSeconds(6);
    await container.item('touched', 'p').replace({ id: 'touched', pk: 'p', v: 2 });
    await target.advanceSeconds(6);

    expect(await visible(container, 'touched')).toBe(true);
    expect(await visible(container, 'untouched')).toBe(false);
  });

  it('hides expired items from queries and point operations at once, and frees their id', async () => {
    const container = await target.container({ defaultTtl: -1 });
    await container.items.create({ id: 'old', pk: 'p', ttl: 1, kind: 'ttl-test' });
    await container.items.create({ id: 'kept', pk: 'p', kind: 'ttl-test' });

    await target.advanceSeconds(3);
    const { resources } = await container.items
      .query<{ id: string }>('SELECT c.id FROM c WHERE c.kind = "ttl-test"')
      .fetchAll();
    const replaceStatus = await statusOf(container.item('old', 'p').replace({ id: 'old', pk: 'p' }));
    const recreated = await container.items.create({ id: 'old', pk: 'p' });

    expect(resources.map((doc) => doc.id)).toEqual(['kept']);
    expect(replaceStatus).toBe(404);
    expect(recreated.statusCode).toBe(201);
  });

  it('refuses ttl 0, null and non-integer ttl values (400)', async () => {
    const container = await target.container({ defaultTtl: -1 });

    expect(await statusOf(container.items.create({ id: 'zero', pk: 'p', ttl: 0 }))).toBe(400);
    expect(
      await statusOf(container.items.create({ id: 'null', pk: 'p', ttl: null as unknown as number })),
    ).toBe(400);
    expect(
      await statusOf(container.items.create({ id: 'text', pk: 'p', ttl: '60' as unknown as number })),
    ).toBe(400);
  });
});
