import { parseArgs } from 'node:util';

import { parseDurationSeconds } from '../../../src/inbox/duration';
import { start } from './server';

const usage = `Usage: npx tsx offline/servicebus/amqp/cli.ts [--port 5672] [--host 127.0.0.1]
         [--duplicate-window PT1H] [--lock-duration PT1M] [--max-delivery-count 10]

Serves the Service Bus model (topics and subscriptions from src/topology.json, in memory, real time)
over AMQP 1.0 without TLS, for @azure/service-bus with a UseDevelopmentEmulator=true connection
string, as the send and dead-letter tools in tools/ use it. (Other clients, such as the Functions
host's .NET extension, may need protocol the peer does not implement; they are untested.)
It runs until interrupted; messages are lost when it stops.`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: process.env.LOCAL_SERVICEBUS_PORT ?? '5672' },
      host: { type: 'string', default: '127.0.0.1' },
      'duplicate-window': { type: 'string', default: 'PT1H' },
      'lock-duration': { type: 'string', default: 'PT1M' },
      'max-delivery-count': { type: 'string', default: '10' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  const port = Number(values.port);
  const maxDeliveryCount = Number(values['max-delivery-count']);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port must be 0..65535; got '${values.port}'.`);
  if (!Number.isInteger(maxDeliveryCount) || maxDeliveryCount < 1)
    throw new Error(
      `--max-delivery-count must be a positive integer; got '${values['max-delivery-count']}'.`,
    );

  const peer = await start({
    port,
    host: values.host,
    duplicateWindowMs: parseDurationSeconds(values['duplicate-window'], '--duplicate-window') * 1000,
    lockDurationMs: parseDurationSeconds(values['lock-duration'], '--lock-duration') * 1000,
    maxDeliveryCount,
  });
  const subscriptions = peer.broker.subscriptions.map(
    (s) => `${s.topic}/Subscriptions/${s.name} [${s.subjects.join(', ')}]`,
  );
  console.log(
    `Local Service Bus peer listening on amqp://${peer.host}:${peer.port} (plain AMQP, in memory).`,
  );
  console.log(`  ${subscriptions.join('\n  ')}`);
  console.log(`  SERVICEBUS_CONNECTION_STRING="${peer.connectionString}"`);
  console.log('Press Ctrl+C to stop.');
  const stop = (): void => {
    void peer.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(`local service bus: ${(error as Error).message}`);
  process.exit(1);
});
