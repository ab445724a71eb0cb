// emulators/docker-compose.yml cannot be started here (no Docker engine), so what can go wrong without
// running it is checked from the file: the Service Bus emulator gets the generated config where it
// reads it, finds the SQL Server it needs, and every emulator listens where local.settings.json and
// the tools expect it, on this machine only.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { parse } from 'yaml';

import { CONFIG_PATH } from '../../src/emulators/generateConfig';
import { COSMOS_EMULATOR } from '../../src/emulators/provisionCosmos';

interface Service {
  image: string;
  command?: string;
  ports?: string[];
  volumes?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
}

const composeDir = path.resolve(__dirname, '..', '..', '..', '..', 'emulators');
const compose = parse(readFileSync(path.join(composeDir, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, Service>;
};
const service = (name: string): Service => {
  const found = compose.services[name];
  if (!found) throw new Error(`docker-compose.yml has no service '${name}'`);
  return found;
};
/** Host ports a service publishes, from 'host-ip:host-port:container-port' entries. */
const published = (name: string): string[] =>
  (service(name).ports ?? []).map((port) => port.split(':')[1] ?? '');

describe('emulators/docker-compose.yml', () => {
  it('runs the Service Bus, SQL Server, Cosmos DB and Azurite emulators from their Microsoft images', () => {
    expect(Object.fromEntries(Object.entries(compose.services).map(([name, s]) => [name, s.image]))).toEqual({
      servicebus: 'mcr.microsoft.com/azure-messaging/servicebus-emulator:latest',
      sqlserver: 'mcr.microsoft.com/mssql/server:2022-latest',
      cosmos: 'mcr.microsoft.com/cosmosdb/linux/azure-cosmos-emulator:vnext-latest',
      azurite: 'mcr.microsoft.com/azure-storage/azurite:latest',
    });
  });

  it('mounts the generated config where the Service Bus emulator reads it', () => {
    const [source, target] = (service('servicebus').volumes ?? [''])[0]?.split(':') ?? [];

    expect(path.resolve(composeDir, source ?? '')).toBe(CONFIG_PATH);
    expect(existsSync(CONFIG_PATH)).toBe(true);
    expect(target).toBe('/ServiceBus_Emulator/ConfigFiles/Config.json');
  });

  it('points the Service Bus emulator at the SQL Server service, with the same password, once it is healthy', () => {
    const servicebus = service('servicebus');
    const sqlserver = service('sqlserver');

    expect(servicebus.environment?.['SQL_SERVER']).toBe('sqlserver');
    expect(servicebus.environment?.['MSSQL_SA_PASSWORD']).toBe(sqlserver.environment?.['MSSQL_SA_PASSWORD']);
    expect(servicebus.depends_on).toEqual({ sqlserver: { condition: 'service_healthy' } });
    expect(sqlserver.healthcheck?.test.join(' ')).toContain('sqlcmd');
  });

  it('requires the licence terms to be accepted explicitly, for both images that have them', () => {
    for (const name of ['servicebus', 'sqlserver']) {
      expect(service(name).environment?.['ACCEPT_EULA']).toMatch(/^\$\{ACCEPT_EULA:\?.+\}$/);
    }
  });

  it('listens where the app and the tools expect each emulator', () => {
    const cosmosEndpoint = new URL(COSMOS_EMULATOR.endpoint);

    expect(published('servicebus')).toContain('5672');
    expect(published('cosmos')).toContain(cosmosEndpoint.port);
    expect(service('cosmos').environment?.['PROTOCOL']).toBe(cosmosEndpoint.protocol.replace(':', ''));
    // UseDevelopmentStorage=true means these three ports on localhost.
    expect(published('azurite')).toEqual(['10000', '10001', '10002']);
    expect(service('azurite').command).toMatch(
      /--blobHost 0\.0\.0\.0 --queueHost 0\.0\.0\.0 --tableHost 0\.0\.0\.0/,
    );
  });

  it('publishes every port on 127.0.0.1 only, and SQL Server not at all', () => {
    const ports = Object.values(compose.services).flatMap((s) => s.ports ?? []);

    expect(ports.length).toBeGreaterThan(0);
    for (const port of ports) {
      expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    }
    expect(service('sqlserver').ports).toBeUndefined();
  });
});
