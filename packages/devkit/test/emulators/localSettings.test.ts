// The local settings for the emulators: what packages/devkit/src/emulators/localSettings.ts writes must be accepted by the
// app's own settings check, connect the trigger to the emulator, and agree with the values the README
// tells a user to set by hand.

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { loadSettings } from '@idempotent-consumers/inbox/internal';

import {
  COSMOS_EMULATOR_CONNECTION_STRING,
  emulatorLocalSettings,
  type LocalSettingsFile,
  SAMPLE_PATH,
  SERVICE_BUS_EMULATOR_CONNECTION_STRING,
} from '../../src/emulators/localSettings';
import { COSMOS_EMULATOR } from '../../src/emulators/provisionCosmos';

const sample = JSON.parse(readFileSync(SAMPLE_PATH, 'utf8')) as LocalSettingsFile;
const settings = emulatorLocalSettings(sample);

describe('packages/devkit/src/emulators/localSettings.ts', () => {
  it('writes settings the app accepts, pointed at the Cosmos DB emulator with its key', () => {
    const loaded = loadSettings(settings.Values);

    expect(loaded.cosmos).toMatchObject({
      endpoint: COSMOS_EMULATOR.endpoint,
      key: COSMOS_EMULATOR.key,
      database: 'app',
      container: 'state',
    });
  });

  it('connects the trigger with the emulator connection string instead of the identity-based namespace', () => {
    expect(settings.Values['ServiceBusConnection']).toBe(SERVICE_BUS_EMULATOR_CONNECTION_STRING);
    expect(SERVICE_BUS_EMULATOR_CONNECTION_STRING).toMatch(
      /^Endpoint=sb:\/\/localhost;.*UseDevelopmentEmulator=true;$/,
    );
    expect(Object.keys(settings.Values).filter((name) => name.startsWith('ServiceBusConnection__'))).toEqual(
      [],
    );
    expect(Object.keys(sample.Values)).toContain('ServiceBusConnection__fullyQualifiedNamespace');
  });

  it("connects the outbox relay's Cosmos DB trigger with the emulator's endpoint and key", () => {
    expect(settings.Values['CosmosDBConnection']).toBe(COSMOS_EMULATOR_CONNECTION_STRING);
    expect(COSMOS_EMULATOR_CONNECTION_STRING).toBe(
      `AccountEndpoint=${COSMOS_EMULATOR.endpoint};AccountKey=${COSMOS_EMULATOR.key};`,
    );
    expect(Object.keys(settings.Values).filter((name) => name.startsWith('CosmosDBConnection__'))).toEqual(
      [],
    );
    expect(Object.keys(sample.Values)).toContain('CosmosDBConnection__accountEndpoint');
  });

  it('uses Azurite for the host storage and keeps every other setting of the sample', () => {
    const replaced = [
      'AzureWebJobsStorage',
      'ServiceBusConnection',
      'CosmosDBConnection',
      'COSMOS_ENDPOINT',
      'COSMOS_KEY',
    ];

    expect(settings.Values['AzureWebJobsStorage']).toBe('UseDevelopmentStorage=true');
    for (const [name, value] of Object.entries(sample.Values)) {
      if (!replaced.includes(name) && !/^(ServiceBus|CosmosDB)Connection__/.test(name)) {
        expect({ name, value: settings.Values[name] }).toEqual({ name, value });
      }
    }
  });

  it('sets the values emulators/README.md lists for setting them by hand', () => {
    const readme = readFileSync(
      path.resolve(__dirname, '..', '..', '..', '..', 'emulators', 'README.md'),
      'utf8',
    );
    const block = /```json\n([\s\S]*?)\n\s*```/.exec(readme)?.[1];
    const documented = JSON.parse(block ?? '{}') as Record<string, string>;

    expect(Object.keys(documented).sort()).toEqual(
      [
        'AzureWebJobsStorage',
        'COSMOS_ENDPOINT',
        'COSMOS_KEY',
        'CosmosDBConnection',
        'ServiceBusConnection',
      ].sort(),
    );
    for (const [name, value] of Object.entries(documented)) {
      expect({ name, value: settings.Values[name] }).toEqual({ name, value });
    }
  });
});
