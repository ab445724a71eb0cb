import { CosmosClient } from '@azure/cosmos';
import { DefaultAzureCredential } from '@azure/identity';

import type { Settings } from './settings';

/**
 * One client per process (it holds connections and caches partition maps). In Azure there is no
 * key: DefaultAzureCredential signs in as the app's user-assigned identity (AZURE_CLIENT_ID), which
 * holds the Cosmos DB Built-in Data Contributor role on the database. A key is only ever used for
 * the local server or an emulator.
 */
export function createCosmosClient(settings: Settings['cosmos']): CosmosClient {
  const userAgentSuffix = 'idempotent-servicebus-consumers';
  return settings.key
    ? new CosmosClient({ endpoint: settings.endpoint, key: settings.key, userAgentSuffix })
    : new CosmosClient({
        endpoint: settings.endpoint,
        aadCredentials: new DefaultAzureCredential(
          // Stryker disable next-line ConditionalExpression: equivalent: an undefined managedIdentityClientId is no client id
          settings.clientId === undefined ? {} : { managedIdentityClientId: settings.clientId },
        ),
        userAgentSuffix,
      });
}
