import type { Container } from '@azure/cosmos';
import { CosmosClient } from '@azure/cosmos';

import { ensureAppContainer } from '../../offline/appContainer';
import { type LocalCosmos, type LocalCosmosOptions, start } from '../../offline/cosmos';

export interface LocalStack {
  server: LocalCosmos;
  client: CosmosClient;
  /** The app's container: partitioned on /partitionKey, defaultTtl -1, as the Bicep creates it. */
  container: Container;
  stop(): Promise<void>;
}

/**
 * A local Cosmos server with the app's database and container, and the environment pointed at it,
 * so that src/app.ts (built on the first delivery) talks to it.
 */
export async function startLocalStack(options: LocalCosmosOptions = {}): Promise<LocalStack> {
  const server = await start({ seed: 7, ...options });
  const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
  const { database } = await client.databases.createIfNotExists({ id: 'app' });
  const container = await ensureAppContainer(database);
  Object.assign(process.env, {
    COSMOS_ENDPOINT: server.endpoint,
    COSMOS_KEY: server.key,
    COSMOS_DATABASE: 'app',
    COSMOS_CONTAINER: 'state',
  });
  return {
    server,
    client,
    container,
    stop: async () => {
      client.dispose();
      await server.stop();
    },
  };
}
