import { connect } from 'node:net';

import { rawRequest, statusOf, type Target, useTarget } from '../../support/conformanceTarget';

const target = useTarget();
let docsPath: string;
let container: Awaited<ReturnType<Target['container']>>;
beforeAll(async () => {
  container = await target.container();
  docsPath = `/dbs/${container.database.id}/colls/${container.id}/docs`;
});

/** After every bad request, the server must still serve a good one. */
async function stillServing(): Promise<void> {
  const id = `alive-${Math.random()}`;
  await container.items.create({ id, pk: 'p' });
  expect((await container.item(id, 'p').read()).statusCode).toBe(200);
}

describe('bad requests', () => {
  it('malformed JSON → 400 with a Cosmos-shaped body', async () => {
    const response = await rawRequest(target, 'POST', docsPath, {
      body: '{"id": "broken", ',
      headers: { 'content-type': 'application/json', 'x-ms-documentdb-partitionkey': '["p"]' },
    });

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      code: 'BadRequest',
      message: expect.stringContaining('Message:') as unknown,
    });
    await stillServing();
  });

  it('a body that is not an object → 400', async () => {
    const response = await rawRequest(target, 'POST', docsPath, {
      body: '[1, 2, 3]',
      headers: { 'content-type': 'application/json', 'x-ms-documentdb-partitionkey': '["p"]' },
    });

    expect(response.status).toBe(400);
    await stillServing();
  });

  it('an unknown route → 404, an unsupported method → 405, both Cosmos-shaped', async () => {
    const unknown = await rawRequest(target, 'GET', `/dbs/${container.database.id}/nothing-here`);
    const method = await rawRequest(target, 'PATCH', `/dbs/${container.database.id}`);

    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'NotFound' });
    expect(method.status).toBe(405);
    expect(method.body).toMatchObject({ code: 'MethodNotAllowed' });
    await stillServing();
  });

  it('a partition-key header that is not JSON, has the wrong arity, or is missing → 400', async () => {
    await container.items.create({ id: 'pk-target', pk: 'p' });
    const itemPath = `${docsPath}/pk-target`;

    const notJson = await rawRequest(target, 'GET', itemPath, {
      headers: { 'x-ms-documentdb-partitionkey': 'p' },
    });
    const arity = await rawRequest(target, 'GET', itemPath, {
      headers: { 'x-ms-documentdb-partitionkey': '["p","q"]' },
    });
    const missing = await rawRequest(target, 'GET', itemPath);

    expect([notJson.status, arity.status, missing.status]).toEqual([400, 400, 400]);
    expect(notJson.body).toMatchObject({ code: 'BadRequest' });
    await stillServing();
  });

  it('a database or container that does not exist → 404 through the SDK', async () => {
    expect((await target.client.database('no-such-db').container('c').item('x', 'p').read()).statusCode).toBe(
      404,
    );
    expect(
      await statusOf(container.database.container('no-such-container').items.create({ id: 'x', pk: 'p' })),
    ).toBe(404);
  });

  it('garbage on the wire does not take the server down', async () => {
    const url = new URL(target.endpoint);
    await new Promise<void>((resolve) => {
      const socket = connect(Number(url.port), url.hostname, () => socket.end('NOT HTTP AT ALL\r\n\r\n'));
      socket.on('close', () => resolve());
      socket.on('error', () => resolve());
      socket.resume();
    });

    await stillServing();
  });
});
