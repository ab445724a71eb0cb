// Creates the app's database, its container and the outbox relay's lease container in the Cosmos DB
// emulator, as infra/modules/cosmos.bicep does in Azure (the app itself never creates them, and the
// relay's trigger is told not to create its leases):
//
//   npx tsx packages/devkit/src/emulators/provisionCosmos.ts
//
// Reads COSMOS_ENDPOINT, COSMOS_KEY, COSMOS_DATABASE, COSMOS_CONTAINER and COSMOS_LEASE_CONTAINER;
// without them it targets the emulator of emulators/docker-compose.yml. It waits for the emulator to
// answer, and running it again changes nothing.

import { setTimeout as sleep } from 'node:timers/promises';

import { CosmosClient } from '@azure/cosmos';
import { ensureAppContainer } from '@idempotent-consumers/local-azure';

/** The emulator of docker-compose.yml: plain http, and the published (public, local-only) emulator key. */
export const COSMOS_EMULATOR = {
  endpoint: 'http://localhost:8081/',
  key: 'C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==',
} as const;

export interface ProvisionOptions {
  endpoint: string;
  key: string;
  /** Default `app`, as COSMOS_DATABASE. */
  database?: string;
  /** Default `state`, as COSMOS_CONTAINER. */
  container?: string;
  /** Default `leases`, as COSMOS_LEASE_CONTAINER. */
  leaseContainer?: string;
  /** How long to wait for the emulator to accept requests. Default 120 s: its first start is slow. */
  timeoutMs?: number;
  /** Pause between attempts. Default 2 s. */
  retryDelayMs?: number;
}

export interface Provisioned {
  database: string;
  container: string;
  leaseContainer: string;
  attempts: number;
}

export async function provisionAppContainer(options: ProvisionOptions): Promise<Provisioned> {
  const database = options.database ?? 'app';
  const container = options.container ?? 'state';
  const leaseContainer = options.leaseContainer ?? 'leases';
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  let attempts = 0;
  for (;;) {
    attempts += 1;
    const client = new CosmosClient({ endpoint: options.endpoint, key: options.key });
    try {
      const created = await client.databases.createIfNotExists({ id: database });
      await ensureAppContainer(created.database, container);
      // Partitioned on /id, as the Cosmos DB trigger requires of its lease container.
      await created.database.containers.createIfNotExists({
        id: leaseContainer,
        partitionKey: { paths: ['/id'], version: 2 },
      });
      return { database, container, leaseContainer, attempts };
    } catch (error) {
      if (Date.now() >= deadline) {
        throw new Error(
          `Cosmos DB at ${options.endpoint} did not accept the database and containers after ${attempts} attempt(s): ${(error as Error).message}`,
          { cause: error },
        );
      }
      await sleep(options.retryDelayMs ?? 2_000);
    } finally {
      client.dispose();
    }
  }
}

async function main(): Promise<void> {
  const endpoint = process.env.COSMOS_ENDPOINT?.trim() || COSMOS_EMULATOR.endpoint;
  const key = process.env.COSMOS_KEY?.trim() || COSMOS_EMULATOR.key;
  console.log(`Waiting for Cosmos DB at ${endpoint} ...`);
  const result = await provisionAppContainer({
    endpoint,
    key,
    database: process.env.COSMOS_DATABASE?.trim() || undefined,
    container: process.env.COSMOS_CONTAINER?.trim() || undefined,
    leaseContainer: process.env.COSMOS_LEASE_CONTAINER?.trim() || undefined,
  });
  console.log(
    `Database '${result.database}', container '${result.container}' (/partitionKey, defaultTtl -1) and lease container '${result.leaseContainer}' (/id) are ready.`,
  );
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(`provisionCosmos: ${(error as Error).message}`);
    process.exit(1);
  });
}
