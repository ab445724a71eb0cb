import { parseArgs } from 'node:util';

import { CosmosClient } from '@azure/cosmos';

import { ensureAppContainer } from '../appContainer';
import { DEFAULT_KEY, start } from './server';

const usage = `Usage: npm run cosmos -- [--port 8081] [--host 127.0.0.1] [--key <base64>] [--latency-ms 0]
                          [--throughput <RU/s>] [--database app] [--container state] [--no-provision]

Starts the local Cosmos DB server (in memory; data is lost when it stops) and runs until interrupted.
Unless --no-provision is given, it creates the app's database and container as the Bicep does
(partition key /partitionKey, defaultTtl -1), so that \`func start\` can use it at once.
--throughput models provisioned throughput: data requests beyond that many request units per second
are answered 429 with x-ms-retry-after-ms, as Cosmos DB does. Without it there is no limit.`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: process.env.LOCAL_COSMOS_PORT ?? '8081' },
      host: { type: 'string', default: '127.0.0.1' },
      key: { type: 'string', default: process.env.LOCAL_COSMOS_KEY ?? DEFAULT_KEY },
      'latency-ms': { type: 'string', default: '0' },
      throughput: { type: 'string' },
      database: { type: 'string', default: 'app' },
      container: { type: 'string', default: 'state' },
      'no-provision': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  const port = Number(values.port);
  const latencyMs = Number(values['latency-ms']);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port must be 0..65535; got '${values.port}'.`);
  if (!Number.isFinite(latencyMs) || latencyMs < 0)
    throw new Error(`--latency-ms must be >= 0; got '${values['latency-ms']}'.`);
  const throughput = values.throughput === undefined ? undefined : Number(values.throughput);
  if (throughput !== undefined && !(Number.isInteger(throughput) && throughput > 0))
    throw new Error(`--throughput must be a whole number of RU/s above 0; got '${values.throughput}'.`);

  const server = await start({
    port,
    host: values.host,
    key: values.key,
    latencyMs,
    ...(throughput === undefined ? {} : { throughput }),
  });
  if (!values['no-provision']) {
    const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
    const { database } = await client.databases.createIfNotExists({ id: values.database });
    await ensureAppContainer(database, values.container);
    client.dispose();
    console.log(
      `Created database '${values.database}' with container '${values.container}' (/partitionKey, defaultTtl -1).`,
    );
  }
  console.log(
    `Local Cosmos DB server listening (in memory, plain http${throughput === undefined ? '' : `, ${throughput} RU/s provisioned`}).`,
  );
  console.log(`  COSMOS_ENDPOINT=${server.endpoint}`);
  console.log(`  COSMOS_KEY=${server.key}`);
  console.log(`Press Ctrl+C to stop.`);
  const stop = (): void => {
    void server.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(`local cosmos: ${(error as Error).message}`);
  process.exit(1);
});
