import { CosmosClient, IndexingMode, type IndexingPolicy } from '@azure/cosmos';

import { type LocalCosmos, start } from '../../src/cosmos';

/**
 * Queries on the account's databases and on a database's containers, through @azure/cosmos: a POST
 * with the query header on /dbs or /dbs/{db}/colls is a query, as in Azure, not a create.
 */
let server: LocalCosmos;
let client: CosmosClient;

beforeAll(async () => {
  server = await start();
  client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
  for (const id of ['orders', 'payments', 'stock']) await client.databases.create({ id });
  for (const id of ['state', 'leases', 'archive'])
    await client.database('orders').containers.create({ id, partitionKey: '/id' });
});

afterAll(async () => {
  client.dispose();
  await server.stop();
});

describe('metadata queries', () => {
  it('queries the databases with a parameter, creating none', async () => {
    const { resources } = await client.databases
      .query({
        query: 'SELECT * FROM root r WHERE r.id = @id',
        parameters: [{ name: '@id', value: 'payments' }],
      })
      .fetchAll();
    const all = await client.databases.readAll().fetchAll();

    expect(resources.map((d: { id: string }) => d.id)).toEqual(['payments']);
    expect(all.resources.map((d) => d.id).sort()).toEqual(['orders', 'payments', 'stock']);
  });

  it("queries a database's containers, in pages when asked", async () => {
    const iterator = client
      .database('orders')
      .containers.query({ query: 'SELECT c.id FROM c ORDER BY c.id' }, { maxItemCount: 2 });
    const pages: string[][] = [];
    while (iterator.hasMoreResults()) {
      const { resources } = await iterator.fetchNext();
      if (resources.length > 0) pages.push(resources.map((c: { id: string }) => c.id));
    }

    expect(pages).toEqual([['archive', 'leases'], ['state']]);
  });

  it('refuses a query it cannot parse with 400, creating nothing', async () => {
    const refused = await client.databases
      .query({ query: 'SELECT FROM WHERE' })
      .fetchAll()
      .then(
        () => 200,
        (error: { code?: number }) => error.code,
      );

    expect(refused).toBe(400);
    expect((await client.databases.readAll().fetchAll()).resources).toHaveLength(3);
  });
});

describe('conflicts and partition key deletes', () => {
  it('reads and queries an empty conflicts feed: one write region, last writer wins', async () => {
    const container = client.database('orders').container('state');

    const read = await container.conflicts.readAll().fetchAll();
    const queried = await container.conflicts.query({ query: 'SELECT * FROM c' }).fetchAll();

    expect(read.resources).toEqual([]);
    expect(queried.resources).toEqual([]);
  });

  it('deletes every item of one partition key value, and only those', async () => {
    const { container } = await client
      .database('stock')
      .containers.create({ id: 'reservations', partitionKey: '/sku' });
    for (const [id, sku] of [
      ['r1', 'sku-a'],
      ['r2', 'sku-a'],
      ['r3', 'sku-a'],
      ['r4', 'sku-b'],
    ])
      await container.items.create({ id, sku });

    const response = await container.deleteAllItemsForPartitionKey('sku-a');
    const { resources } = await container.items.readAll<{ id: string }>().fetchAll();
    const gone = await container
      .item('r1', 'sku-a')
      .read()
      .then((r) => r.statusCode);

    expect(response.statusCode).toBe(200);
    expect(resources.map((item) => item.id)).toEqual(['r4']);
    expect(gone).toBe(404);
  });
});

describe('a container read with quota information', () => {
  it('reports the index transformation as done and the items it holds', async () => {
    const { container } = await client
      .database('payments')
      .containers.create({ id: 'quota', partitionKey: '/id' });
    await container.items.create({ id: 'one', text: 'x'.repeat(3000) });
    await container.items.create({ id: 'two' });

    const plain = await container.read();
    const withQuota = await container.read({ populateQuotaInfo: true });

    expect(plain.headers['x-ms-documentdb-collection-index-transformation-progress']).toBeUndefined();
    expect(withQuota.headers['x-ms-documentdb-collection-index-transformation-progress']).toBe('100');
    expect(withQuota.headers['x-ms-resource-usage']).toMatch(/^documentsCount=2;documentsSize=4;/);
  });
});

describe('indexing policies', () => {
  const created = async (id: string, indexingPolicy?: IndexingPolicy) =>
    (
      await client
        .database('stock')
        .containers.create({ id, partitionKey: '/id', ...(indexingPolicy ? { indexingPolicy } : {}) })
    ).resource?.indexingPolicy;

  it('fills in the defaults as Cosmos DB does, keeping what was given and always excluding _etag', async () => {
    const none = await created('policy-none');
    const partial = await created('policy-partial', {
      automatic: true,
      excludedPaths: [{ path: '/blob/*' }],
    });

    expect(none).toEqual({
      indexingMode: 'consistent',
      automatic: true,
      includedPaths: [{ path: '/*' }],
      excludedPaths: [{ path: '/"_etag"/?' }],
    });
    expect(partial).toEqual({
      indexingMode: 'consistent',
      automatic: true,
      includedPaths: [{ path: '/*' }],
      excludedPaths: [{ path: '/blob/*' }, { path: '/"_etag"/?' }],
    });
  });

  it('keeps no paths for indexingMode none, and refuses it automatic', async () => {
    expect(await created('policy-off', { indexingMode: IndexingMode.none, automatic: false })).toEqual({
      indexingMode: 'none',
      automatic: false,
      includedPaths: [],
      excludedPaths: [],
    });
    expect(
      await created('policy-contradiction', { indexingMode: IndexingMode.none, automatic: true }).then(
        () => 201,
        (error: { code?: number }) => error.code,
      ),
    ).toBe(400);
  });
});

describe('container replace', () => {
  it('refuses a body that names another id with 400, renaming nothing', async () => {
    const container = client.database('payments').container('ledger');
    await client.database('payments').containers.create({ id: 'ledger', partitionKey: '/id' });
    const { resource } = await container.read();

    const refused = await container.replace({ ...resource!, id: 'ledger-renamed' }).then(
      () => 200,
      (error: { code?: number }) => error.code,
    );
    const kept = await container.replace({ ...resource!, defaultTtl: 60 });

    expect(refused).toBe(400);
    expect(kept.resource?.defaultTtl).toBe(60);
    const ids = (await client.database('payments').containers.readAll().fetchAll()).resources.map(
      (c) => c.id,
    );
    expect(ids).toContain('ledger');
    expect(ids).not.toContain('ledger-renamed');
  });
});
