import { type Container } from '@azure/cosmos';

import { rawRequest, statusOf, useTarget } from '../../support/conformanceTarget';

const target = useTarget();
let container: Container;
beforeAll(async () => {
  container = await target.container();
});

interface Invoice {
  id: string;
  pk: string;
  total?: number;
  status?: string;
}

describe('create', () => {
  it('stores the item with system properties and returns 201', async () => {
    const response = await container.items.create<Invoice>({ id: 'create-1', pk: 'p', total: 10 });

    expect(response.statusCode).toBe(201);
    expect(response.resource).toMatchObject({ id: 'create-1', pk: 'p', total: 10 });
    expect(response.resource?._etag).toEqual(expect.any(String));
    expect(response.resource?._rid).toEqual(expect.any(String));
    expect(response.resource?._self).toEqual(expect.any(String));
    expect(response.resource?._ts).toBeGreaterThan(1_600_000_000);
    expect(response.etag).toBe(response.resource?._etag);
  });

  it('answers 409 for an id that already exists in the partition, and keeps the original', async () => {
    await container.items.create<Invoice>({ id: 'create-2', pk: 'p', total: 1 });

    const status = await statusOf(container.items.create<Invoice>({ id: 'create-2', pk: 'p', total: 2 }));
    const { resource } = await container.item('create-2', 'p').read<Invoice>();

    expect(status).toBe(409);
    expect(resource?.total).toBe(1);
  });

  it('allows the same id in another partition', async () => {
    await container.items.create({ id: 'create-3', pk: 'p1' });

    const response = await container.items.create({ id: 'create-3', pk: 'p2' });

    expect(response.statusCode).toBe(201);
  });

  it('accepts an id of 255 characters and refuses 256 (400)', async () => {
    const ok = await container.items.create({ id: 'x'.repeat(255), pk: 'p' });

    expect(ok.statusCode).toBe(201);
    expect(await statusOf(container.items.create({ id: 'y'.repeat(256), pk: 'p' }))).toBe(400);
  });

  // The SDK refuses some of these itself, so the request is sent raw to see what the server does.
  it.each(['a/b', 'a\\b', 'a#b'])('refuses the id %j (400) and stores nothing', async (id) => {
    const response = await rawRequest(
      target,
      'POST',
      `/dbs/${container.database.id}/colls/${container.id}/docs`,
      {
        body: JSON.stringify({ id, pk: 'p', marker: 'illegal-id' }),
        headers: { 'content-type': 'application/json', 'x-ms-documentdb-partitionkey': '["p"]' },
      },
    );
    const { resources } = await container.items
      .query({ query: 'SELECT * FROM c WHERE c.marker = "illegal-id"' })
      .fetchAll();

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'BadRequest' });
    expect(resources).toHaveLength(0);
  });

  it("serves an item whose id holds '?', as Azure does: create, read, replace, query, delete", async () => {
    const id = 'question?mark';

    const created = await container.items.create({ id, pk: 'p', total: 1 });
    const read = await container.item(id, 'p').read<Invoice>();
    const replaced = await container.item(id, 'p').replace({ id, pk: 'p', total: 2 });
    const { resources } = await container.items
      .query<Invoice>({ query: 'SELECT * FROM c WHERE c.id = @id', parameters: [{ name: '@id', value: id }] })
      .fetchAll();
    const deleted = await container.item(id, 'p').delete();
    const gone = await container.item(id, 'p').read();

    expect(created.statusCode).toBe(201);
    expect(read.resource?.id).toBe(id);
    expect(replaced.resource?.total).toBe(2);
    expect(resources.map((item) => item.total)).toEqual([2]);
    expect(deleted.statusCode).toBe(204);
    expect(gone.statusCode).toBe(404);
  });

  it('keeps ids with spaces, percent signs and non-ASCII characters intact', async () => {
    const id = 'order 100% — ünïcødé';

    await container.items.create({ id, pk: 'p' });
    const { resource } = await container.item(id, 'p').read<{ id: string }>();

    expect(resource?.id).toBe(id);
  });

  it('refuses an item over 2 MB (413) and stores nothing', async () => {
    const status = await statusOf(
      container.items.create({ id: 'huge', pk: 'p', blob: 'x'.repeat(2 * 1024 * 1024) }),
    );

    expect(status).toBe(413);
    expect((await container.item('huge', 'p').read()).statusCode).toBe(404);
  });

  it('accepts an item just under 2 MB', async () => {
    const response = await container.items.create({
      id: 'large',
      pk: 'p',
      blob: 'x'.repeat(2 * 1024 * 1024 - 1024),
    });

    expect(response.statusCode).toBe(201);
  });

  it('refuses a body whose partition key differs from the request header (400)', async () => {
    const path = `/dbs/${container.database.id}/colls/${container.id}/docs`;

    const response = await rawRequest(target, 'POST', path, {
      body: JSON.stringify({ id: 'mismatch', pk: 'in-body' }),
      headers: { 'content-type': 'application/json', 'x-ms-documentdb-partitionkey': '["in-header"]' },
    });

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'BadRequest' });
    expect((await container.item('mismatch', 'in-body').read()).statusCode).toBe(404);
  });
});

describe('read', () => {
  it('returns the item, or undefined with 404 when absent', async () => {
    await container.items.create<Invoice>({ id: 'read-1', pk: 'p', total: 3 });

    const found = await container.item('read-1', 'p').read<Invoice>();
    const absent = await container.item('read-missing', 'p').read<Invoice>();
    const otherPartition = await container.item('read-1', 'other').read<Invoice>();

    expect(found.statusCode).toBe(200);
    expect(found.resource?.total).toBe(3);
    expect(absent.statusCode).toBe(404);
    expect(absent.resource).toBeUndefined();
    expect(otherPartition.statusCode).toBe(404);
  });

  it('answers 304 to if-none-match with the current ETag', async () => {
    const { etag } = await container.items.create({ id: 'read-2', pk: 'p' });

    const response = await container
      .item('read-2', 'p')
      .read({ accessCondition: { type: 'IfNoneMatch', condition: etag } });

    expect(response.statusCode).toBe(304);
  });
});

describe('replace', () => {
  it('replaces the item and gives it a new ETag', async () => {
    const { resource: created } = await container.items.create<Invoice>({
      id: 'replace-1',
      pk: 'p',
      total: 1,
    });

    const replaced = await container
      .item('replace-1', 'p')
      .replace<Invoice>({ id: 'replace-1', pk: 'p', total: 2 });

    expect(replaced.statusCode).toBe(200);
    expect(replaced.resource?.total).toBe(2);
    expect(replaced.resource?._etag).not.toBe(created?._etag);
    expect(replaced.resource?._rid).toBe(created?._rid);
  });

  it('honours if-match: the current ETag wins, a stale one gets 412 and changes nothing', async () => {
    const { etag: first } = await container.items.create<Invoice>({ id: 'replace-2', pk: 'p', total: 1 });
    const { etag: second } = await container
      .item('replace-2', 'p')
      .replace<Invoice>(
        { id: 'replace-2', pk: 'p', total: 2 },
        { accessCondition: { type: 'IfMatch', condition: first } },
      );

    const stale = await statusOf(
      container
        .item('replace-2', 'p')
        .replace<Invoice>(
          { id: 'replace-2', pk: 'p', total: 3 },
          { accessCondition: { type: 'IfMatch', condition: first } },
        ),
    );
    const { resource } = await container.item('replace-2', 'p').read<Invoice>();

    expect(second).not.toBe(first);
    expect(stale).toBe(412);
    expect(resource?.total).toBe(2);
  });

  it('answers 404 for a missing item', async () => {
    expect(
      await statusOf(container.item('replace-missing', 'p').replace({ id: 'replace-missing', pk: 'p' })),
    ).toBe(404);
  });
});

describe('upsert', () => {
  it('creates (201) then replaces (200)', async () => {
    const created = await container.items.upsert<Invoice>({ id: 'upsert-1', pk: 'p', total: 1 });
    const replaced = await container.items.upsert<Invoice>({ id: 'upsert-1', pk: 'p', total: 2 });
    const { resource } = await container.item('upsert-1', 'p').read<Invoice>();

    expect(created.statusCode).toBe(201);
    expect(replaced.statusCode).toBe(200);
    expect(resource?.total).toBe(2);
  });
});

describe('delete', () => {
  it('deletes (204); a second delete and a read answer 404', async () => {
    await container.items.create({ id: 'delete-1', pk: 'p' });

    const deleted = await container.item('delete-1', 'p').delete();

    expect(deleted.statusCode).toBe(204);
    expect(await statusOf(container.item('delete-1', 'p').delete())).toBe(404);
    expect((await container.item('delete-1', 'p').read()).statusCode).toBe(404);
  });

  it('honours if-match (412 on a stale ETag, the item stays)', async () => {
    const { etag } = await container.items.create<Invoice>({ id: 'delete-2', pk: 'p', total: 1 });
    await container.item('delete-2', 'p').replace<Invoice>({ id: 'delete-2', pk: 'p', total: 2 });

    const status = await statusOf(
      container.item('delete-2', 'p').delete({ accessCondition: { type: 'IfMatch', condition: etag } }),
    );

    expect(status).toBe(412);
    expect((await container.item('delete-2', 'p').read()).statusCode).toBe(200);
  });

  it('frees the id for a new create', async () => {
    await container.items.create<Invoice>({ id: 'delete-3', pk: 'p', total: 1 });
    await container.item('delete-3', 'p').delete();

    const again = await container.items.create<Invoice>({ id: 'delete-3', pk: 'p', total: 5 });

    expect(again.statusCode).toBe(201);
    expect(again.resource?.total).toBe(5);
  });
});

describe('partition keys', () => {
  it('routes by nested paths and keeps number and string keys apart', async () => {
    const nested = await target.container({ partitionKey: { paths: ['/tenant/id'] } });

    await nested.items.create({ id: 'n1', tenant: { id: 't1' } });
    await nested.items.create({ id: 'n2', tenant: { id: 42 } });
    const byString = await nested.item('n1', 't1').read();
    const byNumber = await nested.item('n2', 42).read();
    const wrongType = await nested.item('n2', '42').read();

    expect(byString.statusCode).toBe(200);
    expect(byNumber.statusCode).toBe(200);
    expect(wrongType.statusCode).toBe(404);
  });
});
