import { CosmosClient } from '@azure/cosmos';

import {
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  processContext,
  runTool,
  type ToolContext,
} from '../../tools/cli';
import { UsageError } from '../../tools/errors';
import { ensureAppContainer } from '../appContainer';
import { DEFAULT_KEY, start } from './server';

const usage = `Usage: npm run cosmos -- [--port 8081] [--host 127.0.0.1] [--key <base64>] [--latency-ms 0]
                          [--throughput <RU/s>] [--database app] [--container state] [--no-provision]

Starts the local Cosmos DB server (in memory; data is lost when it stops) and runs until interrupted.
Unless --no-provision is given, it creates the app's database and container as the Bicep does
(partition key /partitionKey, defaultTtl -1), so that \`func start\` can use it at once.
--throughput models provisioned throughput: data requests beyond that many request units per second
are answered 429 with x-ms-retry-after-ms, as Cosmos DB does. Without it there is no limit.`;

async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values } = parseFlags(
    argv,
    {
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
    },
    usage,
  );
  if (values.help) {
    context.out(usage);
    return EXIT_CODES.ok;
  }
  const usageError = (message: string): UsageError => new UsageError(`${message}\n${usage}`);
  const port = Number(values.port);
  const latencyMs = Number(values['latency-ms']);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw usageError(`--port must be 0..65535; got '${values.port}'.`);
  if (!Number.isFinite(latencyMs) || latencyMs < 0)
    throw usageError(`--latency-ms must be >= 0; got '${values['latency-ms']}'.`);
  const throughput = values.throughput === undefined ? undefined : Number(values.throughput);
  if (throughput !== undefined && !(Number.isInteger(throughput) && throughput > 0))
    throw usageError(`--throughput must be a whole number of RU/s above 0; got '${values.throughput}'.`);

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
  context.out(`Press Ctrl+C to stop.`);
  await new Promise((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.stop();
  return EXIT_CODES.ok;
}

void runTool('cosmos', main, process.argv.slice(2), processContext()).then((code) => process.exit(code));
