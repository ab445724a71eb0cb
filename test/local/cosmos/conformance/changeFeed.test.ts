import { ChangeFeedMode, ChangeFeedStartFrom, type Container, StatusCodes } from '@azure/cosmos';

import { local, useTarget } from '../../../support/conformanceTarget';

const target = useTarget();

interface Doc {
  id: string;
  pk: string;
  n?: number;
}

/** Reads a change feed iterator until it says there is nothing new: the ids in order, and the continuation. */
async function drain(
  container: Container,
  changeFeedStartFrom: ChangeFeedStartFrom,
  maxItemCount?: number,
): Promise<{ items: Doc[]; pages: number[]; continuation: string | undefined }> {
  const iterator = container.items.getChangeFeedIterator<Doc>({
    changeFeedStartFrom,
    ...(maxItemCount === undefined ? {} : { maxItemCount }),
  });
  const items: Doc[] = [];
  const pages: number[] = [];
  for (let reads = 0; reads < 50; reads++) {
    const response = await iterator.readNext();
    if (response.statusCode === StatusCodes.NotModified) {
      return { items, pages, continuation: response.continuationToken };
    }
    items.push(...response.result);
    pages.push(response.result.length);
  }
  throw new Error('The change feed never ran dry.');
}

const ids = (items: Doc[]): string[] => items.map((item) => item.id);

describe('change feed (latest version)', () => {
  it('from the beginning: every item once, in the order of its last write, with its _lsn', async () => {
    const container = await target.container();
    await container.items.create({ id: 'a', pk: 'p1', n: 1 });
    await container.items.create({ id: 'b', pk: 'p2', n: 1 });
    await container.items.create({ id: 'c', pk: 'p1', n: 1 });
    await container.item('a', 'p1').replace({ id: 'a', pk: 'p1', n: 2 });

    const { items } = await drain(container, ChangeFeedStartFrom.Beginning());

    expect(ids(items).sort()).toEqual(['a', 'b', 'c']);
    // Within one partition key, in commit order: c was written before a's second version.
    expect(ids(items.filter((item) => item.pk === 'p1'))).toEqual(['c', 'a']);
    expect(items.find((item) => item.id === 'a')?.n).toBe(2);
    for (const item of items) expect(typeof (item as unknown as { _lsn: unknown })._lsn).toBe('number');
  });

  it('leaves deleted items out', async () => {
    const container = await target.container();
    await container.items.create({ id: 'kept', pk: 'p' });
    await container.items.create({ id: 'gone', pk: 'p' });
    await container.item('gone', 'p').delete();

    expect(ids((await drain(container, ChangeFeedStartFrom.Beginning())).items)).toEqual(['kept']);
  });

  it('leaves expired items out', async () => {
    const container = await target.container({ defaultTtl: -1 });
    await container.items.create({ id: 'lasting', pk: 'p' });
    await container.items.create({ id: 'expiring', pk: 'p', ttl: 1 });
    await target.advanceSeconds(3);

    expect(ids((await drain(container, ChangeFeedStartFrom.Beginning())).items)).toEqual(['lasting']);
  });

  it('resumes from a continuation with only what was written since', async () => {
    const container = await target.container();
    await container.items.create({ id: 'before', pk: 'p' });
    const { continuation } = await drain(container, ChangeFeedStartFrom.Beginning());
    expect(continuation).toBeDefined();

    await container.items.create({ id: 'after', pk: 'p' });
    await container.item('before', 'p').replace({ id: 'before', pk: 'p', n: 2 });

    const resumed = await drain(container, ChangeFeedStartFrom.Continuation(continuation!));
    expect(ids(resumed.items)).toEqual(['after', 'before']);
    expect((await drain(container, ChangeFeedStartFrom.Continuation(resumed.continuation!))).items).toEqual(
      [],
    );
  });

  it('from now: nothing that was there, then what comes', async () => {
    const container = await target.container();
    await container.items.create({ id: 'old', pk: 'p' });
    const iterator = container.items.getChangeFeedIterator<Doc>({
      changeFeedStartFrom: ChangeFeedStartFrom.Now(),
    });

    expect((await iterator.readNext()).statusCode).toBe(StatusCodes.NotModified);
    await container.items.create({ id: 'new', pk: 'p' });
    const next = await iterator.readNext();

    expect(next.statusCode).toBe(StatusCodes.Ok);
    expect(ids(next.result)).toEqual(['new']);
  });

  it('for one partition key: only its items', async () => {
    const container = await target.container();
    await container.items.create({ id: 'x1', pk: 'x' });
    await container.items.create({ id: 'y1', pk: 'y' });
    await container.items.create({ id: 'x2', pk: 'x' });

    expect(ids((await drain(container, ChangeFeedStartFrom.Beginning('x'))).items)).toEqual(['x1', 'x2']);
  });

  it('from a point in time: the items last written at or after it', async () => {
    const container = await target.container();
    const { resource: earlier } = await container.items.create({ id: 'earlier', pk: 'p' });
    // The second after the first write, on the server's clock (a time span the target can move).
    const from = new Date(((earlier?._ts ?? 0) + 1) * 1000);
    await target.advanceSeconds(2);
    await container.items.create({ id: 'later', pk: 'p' });

    expect(ids((await drain(container, ChangeFeedStartFrom.Time(from))).items)).toEqual(['later']);
  });

  it('pages by maxItemCount, and a continuation loses nothing between pages', async () => {
    const container = await target.container();
    for (const id of ['1', '2', '3', '4', '5']) await container.items.create({ id, pk: 'p' });

    const { items, pages } = await drain(container, ChangeFeedStartFrom.Beginning(), 2);

    expect(ids(items)).toEqual(['1', '2', '3', '4', '5']);
    expect(pages).toEqual([2, 2, 1]);
  });

  it('delivers a transactional batch as one commit, never split across pages', async () => {
    const container = await target.container();
    await container.items.create({ id: 'first', pk: 'p' });
    await container.items.batch(
      ['b1', 'b2', 'b3'].map((id) => ({ operationType: 'Create' as const, resourceBody: { id, pk: 'p' } })),
      'p',
    );

    const { items, pages } = await drain(container, ChangeFeedStartFrom.Beginning(), 2);

    expect(ids(items)).toEqual(['first', 'b1', 'b2', 'b3']);
    if (target.local) expect(pages).toEqual([4]);
    const lsns = items.slice(1).map((item) => (item as unknown as { _lsn: number })._lsn);
    expect(new Set(lsns).size).toBe(1);
  });

  // A real account serves this mode only with continuous backup; the local server says it does not.
  (local ? it : it.skip)('refuses the all-versions-and-deletes mode, saying so', async () => {
    const container = await target.container();
    const iterator = container.items.getChangeFeedIterator({
      changeFeedStartFrom: ChangeFeedStartFrom.Now(),
      changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes,
    });

    await expect(iterator.readNext()).rejects.toMatchObject({
      code: 400,
      message: expect.stringContaining('latest-version mode only') as unknown,
    });
  });
});
