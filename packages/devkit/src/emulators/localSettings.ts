// Writes local.settings.json for `func start` against the emulators of docker-compose.yml, from
// local.settings.sample.json with the connection values swapped:
//
//   npx tsx packages/devkit/src/emulators/localSettings.ts            # refuses to replace an existing local.settings.json
//   npx tsx packages/devkit/src/emulators/localSettings.ts --force
//
// In Azure the triggers connect with the app's identity (ServiceBusConnection__fullyQualifiedNamespace,
// CosmosDBConnection__accountEndpoint); the emulators have no Microsoft Entra ID, so locally each
// trigger gets its connection string instead.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '../cli/project';
import { COSMOS_EMULATOR } from './provisionCosmos';

export const SAMPLE_PATH = path.join(PROJECT_ROOT, 'local.settings.sample.json');
export const LOCAL_SETTINGS_PATH = path.join(PROJECT_ROOT, 'local.settings.json');

/** The emulator's fixed connection string for a client on the same machine (its documented value). */
export const SERVICE_BUS_EMULATOR_CONNECTION_STRING =
  'Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;';

export interface LocalSettingsFile {
  IsEncrypted: boolean;
  Values: Record<string, string>;
  [key: string]: unknown;
}

/** The Cosmos DB emulator as the outbox relay's trigger connects to it: its endpoint and published key. */
export const COSMOS_EMULATOR_CONNECTION_STRING = `AccountEndpoint=${COSMOS_EMULATOR.endpoint};AccountKey=${COSMOS_EMULATOR.key};`;

/** Where the host's connections point: a Service Bus connection string and a Cosmos DB endpoint and key. */
export interface LocalTargets {
  serviceBusConnectionString: string;
  cosmosEndpoint: string;
  cosmosKey: string;
}

/**
 * The Cosmos DB extension's connection mode. The extension defaults to gateway mode already
 * (`CosmosDBUtility.BuildClientOptions` in azure-webjobs-sdk-extensions); written out, it stays
 * gateway when host.json changes it, as both the emulator and the local server need.
 */
export const COSMOS_EXTENSION_CONNECTION_MODE = 'AzureFunctionsJobHost__extensions__cosmosDB__connectionMode';

/**
 * The sample's settings with the connections pointed at local servers: each trigger gets a
 * connection string instead of the identity-based settings (`…__fullyQualifiedNamespace`,
 * `…__accountEndpoint`), which are removed; Azurite holds the host's storage.
 */
export function hostLocalSettings(sample: LocalSettingsFile, targets: LocalTargets): LocalSettingsFile {
  const values = Object.fromEntries(
    Object.entries(sample.Values).filter(
      ([name]) => !name.startsWith('ServiceBusConnection__') && !name.startsWith('CosmosDBConnection__'),
    ),
  );
  return {
    ...sample,
    Values: {
      ...values,
      AzureWebJobsStorage: 'UseDevelopmentStorage=true',
      ServiceBusConnection: targets.serviceBusConnectionString,
      CosmosDBConnection: `AccountEndpoint=${targets.cosmosEndpoint};AccountKey=${targets.cosmosKey};`,
      [COSMOS_EXTENSION_CONNECTION_MODE]: 'Gateway',
      COSMOS_ENDPOINT: targets.cosmosEndpoint,
      COSMOS_KEY: targets.cosmosKey,
    },
  };
}

/** The sample's settings, pointed at the emulators. */
export function emulatorLocalSettings(sample: LocalSettingsFile): LocalSettingsFile {
  return hostLocalSettings(sample, {
    serviceBusConnectionString: SERVICE_BUS_EMULATOR_CONNECTION_STRING,
    cosmosEndpoint: COSMOS_EMULATOR.endpoint,
    cosmosKey: COSMOS_EMULATOR.key,
  });
}

function main(): void {
  if (existsSync(LOCAL_SETTINGS_PATH) && !process.argv.includes('--force')) {
    console.error(
      'local.settings.json exists; run with --force to replace it, or set the values of emulators/README.md by hand.',
    );
    process.exit(1);
  }
  const sample = JSON.parse(readFileSync(SAMPLE_PATH, 'utf8')) as LocalSettingsFile;
  writeFileSync(LOCAL_SETTINGS_PATH, `${JSON.stringify(emulatorLocalSettings(sample), null, 2)}\n`);
  console.log('Wrote local.settings.json for the emulators (Service Bus, Cosmos DB, Azurite).');
}

if (require.main === module) {
  main();
}
