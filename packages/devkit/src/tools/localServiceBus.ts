import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { parseDurationSeconds } from '@idempotent-consumers/inbox/internal';
import { startServiceBus as start } from '@idempotent-consumers/local-azure';

import { appTopology, RETRY_COPIES } from '../cli/project';
import { type LocalServer, serverCommand } from '../cli/serve';
import { type FlagValues, numberFlag, runCommand, type ToolContext, usageError } from '../cli/tool';

const topology = appTopology();

const USAGE = `Usage: npx tsx packages/devkit/src/tools/localServiceBus.ts [--port 5672] [--host 127.0.0.1]
         [--duplicate-window PT1H] [--lock-duration PT1M] [--max-delivery-count 10] [--queue <name>]...
         [--session-queue <name>]...

Serves the Service Bus model (topics and subscriptions from src/topology.json, in memory, real time)
over AMQP 1.0 without TLS, for a client given its UseDevelopmentEmulator=true connection string:
@azure/service-bus (the tools in packages/devkit/src/tools/) and Azure.Messaging.ServiceBus, the Functions host's
Service Bus extension (packages/local-azure/test/engines/serviceBus.test.ts). npm run func:local starts it for func start.
--queue serves a queue of that name too (repeat it for more): no filter, otherwise as a subscription.
--session-queue serves a queue that requires sessions (RequiresSession): messages must carry a
SessionId and are received with acceptSession / acceptNextSession.
The same port serves HTTPS too: Service Bus's administration endpoint, for ServiceBusAdministrationClient
given the same connection string (create, read, update, delete and list queues, topics, subscriptions
and rules; runtime counts). Its certificate is self-signed, made at each start: the PEM is written to a
file it prints, for the client's tlsOptions.ca or NODE_EXTRA_CA_CERTS.
It runs until interrupted; messages are lost when it stops.`;

const FLAGS = {
  options: {
    port: { type: 'string', default: process.env.LOCAL_SERVICEBUS_PORT ?? '5672' },
    host: { type: 'string', default: '127.0.0.1' },
    'duplicate-window': { type: 'string', default: 'PT1H' },
    'lock-duration': { type: 'string', default: 'PT1M' },
    'max-delivery-count': { type: 'string', default: '10' },
    queue: { type: 'string', multiple: true },
    'session-queue': { type: 'string', multiple: true },
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

  const entityNames = (flag: 'queue' | 'session-queue'): string[] => {
    const names = (values[flag] ?? []).map((name) => name.trim());
    const invalid = names.find((name) => !/^[A-Za-z0-9][\w.-]{0,259}$/.test(name));
    if (invalid !== undefined)
      throw usageError(`--${flag} '${invalid.slice(0, 60)}' is not a Service Bus entity name.`, USAGE);
    return names;
  };
  const plainQueues = entityNames('queue');
  const sessionQueues = entityNames('session-queue');
  const peer = await start({
    port,
    host: values.host,
    topology,
    retryCopies: RETRY_COPIES,
    duplicateWindowMs,
    lockDurationMs,
    maxDeliveryCount,
    queues: [...plainQueues, ...sessionQueues.map((name) => ({ name, requiresSession: true }))],
  });
  const subscriptions = peer.broker.subscriptions.map(
    (s) => `${s.topic}/Subscriptions/${s.name} [${s.subjects.join(', ')}]`,
  );
  context.out(
    `Local Service Bus peer listening on amqp://${peer.host}:${peer.port} (plain AMQP, in memory).`,
  );
  context.out(`  ${subscriptions.join('\n  ')}`);
  const queues = [...plainQueues, ...sessionQueues.map((name) => `${name} (sessions)`)];
  if (queues.length > 0) context.out(`  queues: ${queues.join(', ')}`);
  context.out(`  SERVICEBUS_CONNECTION_STRING="${peer.connectionString}"`);
  // The certificate only (public); its key stays in the process.
  const certificateFile = join(tmpdir(), `local-servicebus-${peer.port}.pem`);
  writeFileSync(certificateFile, peer.certificate);
  context.out(
    `  Administration endpoint (ServiceBusAdministrationClient, same connection string): https://${peer.host}:${peer.port}/`,
  );
  context.out(`  its self-signed certificate, to trust: NODE_EXTRA_CA_CERTS="${certificateFile}"`);
  return {
    stop: async () => {
      await peer.stop();
      rmSync(certificateFile, { force: true });
    },
  };
}

export const command = serverCommand('local service bus', FLAGS, USAGE, startLocalServiceBus);

if (require.main === module) runCommand(command);
