import type { Container, ContainerRequest, Database } from '@azure/cosmos';

/**
 * The app's container as infra/modules/cosmos.bicep creates it: business documents and inbox
 * markers together, partitioned on /partitionKey, TTL on without a default (markers may carry `ttl`).
 */
export const appContainerDefinition = (id = 'state'): ContainerRequest => ({
  id,
  partitionKey: { paths: ['/partitionKey'], version: 2 },
  defaultTtl: -1,
});

/** Creates the app's container if it is missing. */
export async function ensureAppContainer(database: Database, id?: string): Promise<Container> {
  const { container } = await database.containers.createIfNotExists(appContainerDefinition(id));
  return container;
}

/** Deletes and re-creates the app's container: an empty store for the next run. */
export async function freshAppContainer(database: Database): Promise<Container> {
  const { id } = appContainerDefinition();
  await database
    .container(id ?? 'state')
    .delete()
    .catch(() => undefined);
  return ensureAppContainer(database);
}
