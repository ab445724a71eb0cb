import { CosmosClient } from '@azure/cosmos';

import { rawRequest, statusOf, useTarget } from '../../support/conformanceTarget';

const target = useTarget();

describe('master-key auth', () => {
  it('accepts requests signed with the key', async () => {
    const { resources } = await target.client.databases.readAll().fetchAll();

    expect(Array.isArray(resources)).toBe(true);
  });

  it('answers 401 with a Cosmos-shaped body when the signature is made with another key', async () => {
    const wrongKey = Buffer.from('not the account key at all, but well formed').toString('base64');
    const client = new CosmosClient({ endpoint: target.endpoint, key: wrongKey });

    let error: { code?: number; body?: { code?: string; message?: string } } = {};
    try {
      await client.databases.readAll().fetchAll();
    } catch (caught) {
      error = caught as typeof error;
    }
    client.dispose();

    expect(error.code).toBe(401);
    expect(error.body?.code).toBe('Unauthorized');
    expect(error.body?.message).toEqual(expect.any(String));
  });

  it('answers 401 when the authorization header is missing', async () => {
    const response = await rawRequest(target, 'GET', '/dbs', { sign: false });

    expect(response.status).toBe(401);
    expect(response.body).toMatchObject({ code: 'Unauthorized', message: expect.any(String) as unknown });
  });

  it('answers 401 when a token signed for one resource is used for another', async () => {
    const container = await target.container();
    await container.items.create({ id: 'a', pk: 'p' });
    const itemPath = `/dbs/${container.database.id}/colls/${container.id}/docs/a`;
    const headers = { 'x-ms-documentdb-partitionkey': '["p"]' };

    const honest = await rawRequest(target, 'GET', itemPath, { headers });
    const replayed = await rawRequest(target, 'GET', itemPath, { headers, sign: { asPath: '/dbs' } });

    expect(honest.status).toBe(200);
    expect(replayed.status).toBe(401);
  });

  it('protects item reads too (a wrong key cannot read a document)', async () => {
    const container = await target.container();
    await container.items.create({ id: 'secret', pk: 'p' });
    const wrongKey = Buffer.from('another key').toString('base64');
    const client = new CosmosClient({ endpoint: target.endpoint, key: wrongKey });

    const status = await statusOf(
      client.database(container.database.id).container(container.id).item('secret', 'p').read(),
    );
    client.dispose();

    expect(status).toBe(401);
  });
});
