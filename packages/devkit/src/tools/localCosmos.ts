import { CosmosClient } from '@azure/cosmos';
import { DEFAULT_KEY, ensureAppContainer, startCosmos as start } from '@idempotent-consumers/local-azure';

import { type LocalServer, serverCommand } from '../cli/serve';
import { type FlagValues, numberFlag, runCommand, type ToolContext, usageError } from '../cli/tool';

const USAGE = `Usage: npm run cosmos -- [--port 8081] [--host 127.0.0.1] [--key <base64>] [--latency-ms 0]
                          [--throughput <RU/s>] [--database app] [--container state] [--no-provision]

Starts the local Cosmos DB server (in memory; data is lost when it stops) and runs until interrupted.
Unless --no-provision is given, it creates the app's database and container as the Bicep does
(partition key /partitionKey, defaultTtl -1), so that \`func start\` can use it at once.
--throughput models provisioned throughput: data requests beyond that many request units per second
are answered 429 with x-ms-retry-after-ms, as Cosmos DB does, and every database created without
throughput of its own shares that budget as its offer. Without it there is no limit.`;

const FLAGS = {
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
} as const;

async function startLocalCosmos(
  values: FlagValues<typeof FLAGS>,
  context: ToolContext,
): Promise<LocalServer> {
  const port = numberFlag('port', values.port, USAGE, { max: 65535, integer: true });
  const latencyMs = numberFlag('latency-ms', values['latency-ms'], USAGE);
  const throughput = values.throughput === undefined ? undefined : Number(values.throughput);
  if (throughput !== undefined && !(Number.isInteger(throughput) && throughput > 0)) {
    const shown = values.throughput?.slice(0, 40);
    throw usageError(`--throughput must be a whole number of RU/s above 0; got '${shown}'.`, USAGE);
  }

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
    context.out(
      `Created database '${values.database}' with container '${values.container}' (/partitionKey, defaultTtl -1).`,
    );
  }
  context.out(
    `Local Cosmos DB server listening (in memory, plain http${throughput === undefined ? '' : `, ${throughput} RU/s provisioned`}).`,
  );
  context.out(`  COSMOS_ENDPOINT=${server.endpoint}`);
  context.out(`  COSMOS_KEY=${server.key}`);
  return server;
}

export const command = serverCommand('cosmos', FLAGS, USAGE, startLocalCosmos);

if (require.main === module) runCommand(command);
