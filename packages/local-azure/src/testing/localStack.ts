import { type Container, CosmosClient } from '@azure/cosmos';

import { type LocalCosmos, type LocalCosmosOptions, start } from '../cosmos';
import { ensureAppContainer } from '../cosmos/appContainer';
import { testHooks } from './hooks';

export interface LocalStack {
  server: LocalCosmos;
  client: CosmosClient;
  /** The app's container: partitioned on /partitionKey, defaultTtl -1, as the Bicep creates it. */
  container: Container;
}

/**
 * A local Cosmos server with the app's database and container, started before the tests of the
 * file (or describe block) that calls this and stopped after them, with the environment pointed at
 * it so that src/app.ts (built on the first delivery) talks to it. Faults injected by a test are
 * cleared after it. The handle's fields are set once the tests run.
 */
export function useLocalStack(options: LocalCosmosOptions = {}): LocalStack {
  const stack = {} as LocalStack;
  let started: Omit<LocalStack, 'container'> | undefined;
  const { afterAll, afterEach, beforeAll } = testHooks();
  beforeAll(async () => {
    const server = await start({ seed: 7, ...options });
    const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
    started = { server, client };
    const { database } = await client.databases.createIfNotExists({ id: 'app' });
    Object.assign(stack, { server, client, container: await ensureAppContainer(database) });
    Object.assign(process.env, {
      COSMOS_ENDPOINT: server.endpoint,
      COSMOS_KEY: server.key,
      COSMOS_DATABASE: 'app',
      COSMOS_CONTAINER: 'state',
    });
  });
  afterEach(() => stack.server.faults.clear());
  afterAll(async () => {
    started?.client.dispose();
    await started?.server.stop();
  });
  return stack;
}
