// packages/devkit/src/emulators/provisionCosmos.ts, run against the template's local Cosmos DB server (which speaks the
// same REST API as the emulator): it must create the containers the app needs, wait for a server that
// is still starting, and give up with a clear message.

import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { CosmosClient } from '@azure/cosmos';
import { DEFAULT_KEY, type LocalCosmos, startCosmos as start } from '@idempotent-consumers/local-azure';

import { provisionAppContainer } from '../../src/emulators/provisionCosmos';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

describe('packages/devkit/src/emulators/provisionCosmos.ts', () => {
  let cosmos: LocalCosmos | undefined;

  afterEach(async () => {
    await cosmos?.stop();
    cosmos = undefined;
  });

  it('creates database app, container state on /partitionKey with TTL on and no default expiry, and the lease container leases on /id, once', async () => {
    cosmos = await start({ port: 0 });
    const options = { endpoint: cosmos.endpoint, key: cosmos.key, timeoutMs: 5_000 };

    const first = await provisionAppContainer(options);
    const second = await provisionAppContainer(options);

    const client = new CosmosClient({ endpoint: cosmos.endpoint, key: cosmos.key });
    const { resource } = await client.database('app').container('state').read();
    const { resource: leases } = await client.database('app').container('leases').read();
    const { resources: containers } = await client.database('app').containers.readAll().fetchAll();
    client.dispose();
    expect([first, second]).toEqual([
      { database: 'app', container: 'state', leaseContainer: 'leases', attempts: 1 },
      { database: 'app', container: 'state', leaseContainer: 'leases', attempts: 1 },
    ]);
    expect(resource?.partitionKey?.paths).toEqual(['/partitionKey']);
    expect(resource?.defaultTtl).toBe(-1);
    expect(leases?.partitionKey?.paths).toEqual(['/id']);
    expect(containers.map((container) => container.id).sort()).toEqual(['leases', 'state']);
  });

  it('waits for an emulator that is still starting', async () => {
    const port = await freePort();
    const starting = sleep(400).then(() => start({ port }));

    const result = await provisionAppContainer({
      endpoint: `http://127.0.0.1:${port}/`,
      key: DEFAULT_KEY,
      database: 'waited',
      timeoutMs: 10_000,
      retryDelayMs: 100,
    });
    cosmos = await starting;

    expect(result.database).toBe('waited');
    expect(result.attempts).toBeGreaterThan(1);
  });

  it('gives up after its timeout, saying where it looked', async () => {
    const port = await freePort();

    await expect(
      provisionAppContainer({
        endpoint: `http://127.0.0.1:${port}/`,
        key: DEFAULT_KEY,
        timeoutMs: 300,
        retryDelayMs: 50,
      }),
    ).rejects.toThrow(`Cosmos DB at http://127.0.0.1:${port}/ did not accept the database and containers`);
  });
});
