import { parseDurationSeconds } from '#inbox/internal';

import { type LocalServer, serverCommand } from '../cli/serve';
import { runCommand } from '../cli/tool';
import { type FlagValues, numberFlag, type ToolContext, usageError } from '../cli/tool';
import { start } from '../local/servicebus/amqp/server';

const USAGE = `Usage: npx tsx tools/localServiceBus.ts [--port 5672] [--host 127.0.0.1]
         [--duplicate-window PT1H] [--lock-duration PT1M] [--max-delivery-count 10] [--queue <name>]...

Serves the Service Bus model (topics and subscriptions from src/topology.json, in memory, real time)
over AMQP 1.0 without TLS, for a client given its UseDevelopmentEmulator=true connection string:
@azure/service-bus (the tools in tools/) and Azure.Messaging.ServiceBus, the Functions host's
Service Bus extension (test/engines/serviceBus.test.ts). npm run func:local starts it for func start.
--queue serves a queue of that name too (repeat it for more): no filter, otherwise as a subscription.
It runs until interrupted; messages are lost when it stops.`;

const FLAGS = {
  options: {
    port: { type: 'string', default: process.env.LOCAL_SERVICEBUS_PORT ?? '5672' },
    host: { type: 'string', default: '127.0.0.1' },
    'duplicate-window': { type: 'string', default: 'PT1H' },
    'lock-duration': { type: 'string', default: 'PT1M' },
    'max-delivery-count': { type: 'string', default: '10' },
    queue: { type: 'string', multiple: true },
    help: { type: 'boolean', short: 'h', default: false },
  },
} as const;

async function startLocalServiceBus(
  values: FlagValues<typeof FLAGS>,
  context: ToolContext,
): Promise<LocalServer> {
  const port = numberFlag('port', values.port, USAGE, { max: 65535, integer: true });
  const maxDeliveryCount = numberFlag('max-delivery-count', values['max-delivery-count'], USAGE, {
    min: 1,
    integer: true,
  });
  const durationMs = (name: 'duplicate-window' | 'lock-duration'): number => {
    try {
      return parseDurationSeconds(values[name], `--${name}`) * 1000;
    } catch (error) {
      throw usageError((error as Error).message, USAGE, { cause: error });
    }
  };
  const duplicateWindowMs = durationMs('duplicate-window');
  const lockDurationMs = durationMs('lock-duration');

  const queues = (values.queue ?? []).map((name) => name.trim());
  const invalid = queues.find((name) => !/^[A-Za-z0-9][\w.-]{0,259}$/.test(name));
  if (invalid !== undefined)
    throw usageError(`--queue '${invalid.slice(0, 60)}' is not a Service Bus entity name.`, USAGE);
  const peer = await start({
    port,
    host: values.host,
    duplicateWindowMs,
    lockDurationMs,
    maxDeliveryCount,
    queues,
  });
  const subscriptions = peer.broker.subscriptions.map(
    (s) => `${s.topic}/Subscriptions/${s.name} [${s.subjects.join(', ')}]`,
  );
  context.out(
    `Local Service Bus peer listening on amqp://${peer.host}:${peer.port} (plain AMQP, in memory).`,
  );
  context.out(`  ${subscriptions.join('\n  ')}`);
  if (queues.length > 0) context.out(`  queues: ${queues.join(', ')}`);
  context.out(`  SERVICEBUS_CONNECTION_STRING="${peer.connectionString}"`);
  return peer;
}

export const command = serverCommand('local service bus', FLAGS, USAGE, startLocalServiceBus);

if (require.main === module) runCommand(command);
