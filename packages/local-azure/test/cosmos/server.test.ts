import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

import { CosmosClient } from '@azure/cosmos';

import { DEFAULT_KEY, start } from '../../src/cosmos';

describe('start()', () => {
  it('listens on a free port when asked for port 0, and servers do not share state', async () => {
    const first = await start({ port: 0 });
    const second = await start({ port: 0 });
    const clientOf = (server: typeof first): CosmosClient =>
      new CosmosClient({ endpoint: server.endpoint, key: server.key });

    await clientOf(first).databases.create({ id: 'only-in-first' });
    const { resources } = await clientOf(second).databases.readAll().fetchAll();
    await Promise.all([first.stop(), second.stop()]);

    expect(first.endpoint).not.toBe(second.endpoint);
    expect(resources.map((database) => database.id)).not.toContain('only-in-first');
  });

  it('accepts a custom key and then refuses the default one', async () => {
    const key = Buffer.from('a custom local key').toString('base64');
    const server = await start({ key });

    const withCustom = await new CosmosClient({ endpoint: server.endpoint, key }).databases
      .readAll()
      .fetchAll();
    const withDefault = await new CosmosClient({
      endpoint: server.endpoint,
      key: DEFAULT_KEY,
    }).databases
      .readAll()
      .fetchAll()
      .then(
        () => 200,
        (error: { code?: number }) => error.code,
      );
    await server.stop();

    expect(withCustom.resources).toEqual([]);
    expect(withDefault).toBe(401);
  });

  it('removes expired items physically in the background', async () => {
    let offsetMs = 0;
    const server = await start({ now: () => Date.now() + offsetMs, sweepIntervalMs: 10 });
    const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
    const { database } = await client.databases.create({ id: 'db' });
    const { container } = await database.containers.create({
      id: 'c',
      partitionKey: { paths: ['/pk'] },
      defaultTtl: -1,
    });
    await container.items.create({ id: 'short', pk: 'p', ttl: 5 });
    await container.items.create({ id: 'kept', pk: 'p' });
    const before = server.storedItemCount();

    offsetMs = 10_000;
    for (let waited = 0; server.storedItemCount() > 1 && waited < 5_000; waited += 10) await sleep(10);
    const after = server.storedItemCount();
    await server.stop();

    expect(before).toBe(2);
    expect(after).toBe(1);
  });

  it('sweepExpired() removes what has expired now and reports how many', async () => {
    let offsetMs = 0;
    const server = await start({ now: () => Date.now() + offsetMs, sweepIntervalMs: 3_600_000 });
    const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
    const { database } = await client.databases.create({ id: 'db' });
    const { container } = await database.containers.create({
      id: 'c',
      partitionKey: { paths: ['/pk'] },
      defaultTtl: 60,
    });
    await Promise.all(['a', 'b', 'c'].map((id) => container.items.create({ id, pk: 'p' })));

    const early = server.sweepExpired();
    offsetMs = 61_000;
    const late = server.sweepExpired();
    await server.stop();

    expect(early).toBe(0);
    expect(late).toBe(3);
  });
});

describe('npm run cosmos (the CLI)', () => {
  it('prints the endpoint and key, provisions the app container, serves requests, and stops on SIGINT', async () => {
    const cli = spawn(
      process.execPath,
      [require.resolve('tsx/cli'), 'packages/devkit/src/tools/localCosmos.ts', '--port', '0'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    cli.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    for (let waited = 0; !output.includes('COSMOS_KEY=') && waited < 20_000; waited += 50) await sleep(50);

    const endpoint = /COSMOS_ENDPOINT=(\S+)/.exec(output)?.[1];
    const key = /COSMOS_KEY=(\S+)/.exec(output)?.[1];
    const client = new CosmosClient({ endpoint: endpoint!, key: key! });
    const { resource: container } = await client.database('app').container('state').read();
    client.dispose();
    cli.kill('SIGINT');
    const [code] = (await once(cli, 'exit')) as [number | null];

    expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(container?.partitionKey?.paths).toEqual(['/partitionKey']);
    expect(container?.defaultTtl).toBe(-1);
    expect(code).toBe(0);
  });
});
