import { DefaultAzureCredential } from '@azure/identity';
import { ServiceBusAdministrationClient, type ServiceBusClient } from '@azure/service-bus';
import { functionNameOf, type Topology } from '@idempotent-consumers/inbox/internal';

import { localRunContext } from '../../build/localRun';
import { bounded } from '../../cli/errors';
import { appTopology } from '../../cli/project';
import { listening, type LocalServer, serverCommand } from '../../cli/serve';
import { type FlagValues, numberFlag, runCommand, type ToolContext } from '../../cli/tool';
import { peekQueue } from '../deadLetterQueue';
import {
  CLOCK_SKEW,
  DEFAULT_CLOCK_SKEW_SECONDS,
  DEFAULT_DUPLICATE_WINDOW_SECONDS,
  DUPLICATE_WINDOW,
  durationFromEnvironment,
} from '../deadLetters';
import { connectInbox } from '../inboxState';
import { connectServiceBus, ENVIRONMENT, fullyQualified } from '../serviceBus';
import { ConsoleBackend, type CountsRead, type SubscriptionCounts } from './backend';
import { explainRefusal } from './errors';
import { startConsole } from './server';
import { startToolThread, type ToolCalls } from './toolThread';

const declared = appTopology();

const USAGE = `Usage: npm run console -- [--port 7072] [--allow-actions]

The console against a deployment (or any Service Bus and Cosmos DB the other tools reach): the
topics and subscriptions with their message counts, each consumer's inbox, outbox and documents,
and the dead-letter queues with the verdicts of npm run dead-letters, on http://127.0.0.1:<port>
(this machine only; the address printed carries this run's token). It signs in as you
(DefaultAzureCredential: az login, azd auth login) and reads through the data plane with the roles
you have; a read refused names the role it needs. Read-only unless --allow-actions: then it also
resubmits and discards dead letters and sends events, as npm run dead-letters and npm run send do.

Options:
  --port <n>          default 7072 (CONSOLE_PORT); 0 picks a free port
  --allow-actions     allow resubmit, discard and send (default: read-only)
Environment, as npm run dead-letters takes it: SERVICEBUS_NAMESPACE (identity) or
  SERVICEBUS_CONNECTION_STRING (emulator or local peer only); COSMOS_ENDPOINT, COSMOS_DATABASE,
  COSMOS_CONTAINER (COSMOS_KEY only for a local server or an emulator); INBOX_RETENTION;
  SERVICEBUS_DUPLICATE_WINDOW (default PT1H) and SERVICEBUS_CLOCK_SKEW (default PT5M). After azd up:
  export SERVICEBUS_NAMESPACE=$(azd env get-value SERVICEBUS_FQDN) COSMOS_ENDPOINT=$(azd env get-value COSMOS_ENDPOINT)
With neither SERVICEBUS_* nor COSMOS_ENDPOINT set: the running npm start's.`;

const FLAGS = {
  options: {
    port: { type: 'string', default: process.env.CONSOLE_PORT ?? '7072' },
    'allow-actions': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
} as const;

/** Counted by peeking when the exact counts are refused: a bound on what one refresh reads. */
const PEEK_COUNT_LIMIT = 500;

async function start(values: FlagValues<typeof FLAGS>, context: ToolContext): Promise<LocalServer> {
  const port = numberFlag('port', values.port, USAGE, { max: 65535, integer: true });
  const { env, localRun } = localRunContext(context);
  const { client, description } = connectServiceBus(env);
  const inbox = connectInbox(env);
  const topology = localRun?.topology ?? declared;
  const duplicateWindowSeconds = durationFromEnvironment(
    env,
    DUPLICATE_WINDOW,
    DEFAULT_DUPLICATE_WINDOW_SECONDS,
  );
  const clockSkewSeconds = durationFromEnvironment(env, CLOCK_SKEW, DEFAULT_CLOCK_SKEW_SECONDS);
  const closeClients = async (): Promise<void> => {
    await client.close();
    if (typeof inbox === 'object') inbox.close();
  };
  let tools: ToolCalls | undefined;
  try {
    const started = await startToolThread({ env, duplicateWindowSeconds, clockSkewSeconds });
    tools = started;
    const actions = values['allow-actions'];
    const backend = new ConsoleBackend({
      target: `${description}; Cosmos DB ${typeof inbox === 'string' ? 'not connected' : inbox.description}`,
      actions,
      readOnlyReason:
        'The console is read-only: start it with npm run console -- --allow-actions to resubmit, discard or send.',
      inbox,
      tools: () => started,
      topology: () => topology,
      counts: countsOf(env, client, topology),
      functions: () => topology.topics.flatMap((t) => t.subscriptions.map((s) => functionNameOf(s.name))),
      others: () => [],
      nextPurge: () => undefined,
      feed: undefined,
    });
    const running = await listening('the console', port, 'pass --port 0 for any free port.', () =>
      startConsole({ port, backend }),
    );
    context.out(`Console: ${running.url} (this machine only; the token in the address is this run's)`);
    context.out(`Service Bus: ${description}`);
    context.out(`Cosmos DB:   ${typeof inbox === 'string' ? `not connected: ${inbox}` : inbox.description}`);
    context.out(
      actions
        ? 'Actions on: resubmit, discard and send act on the target.'
        : 'Read-only (--allow-actions to act).',
    );
    return {
      stop: async () => {
        await running.stop();
        await started.close();
        await closeClients();
      },
    };
  } catch (error) {
    await tools?.close();
    await closeClients();
    throw error;
  }
}

/**
 * The subscriptions' message counts: exact from the runtime properties, which Azure gives only to
 * Azure Service Bus Data Owner (Manage); refused, or from the emulator or the local peer, counted by
 * peeking (Data Receiver, which a developer has), up to a bound, and said so.
 */
function countsOf(
  env: Readonly<Record<string, string | undefined>>,
  client: ServiceBusClient,
  topology: Topology,
): () => Promise<CountsRead> {
  const namespace = env[ENVIRONMENT.namespace]?.trim();
  const administration = namespace
    ? new ServiceBusAdministrationClient(fullyQualified(namespace), new DefaultAzureCredential())
    : undefined;
  const subscriptions = topology.topics.flatMap((t) =>
    t.subscriptions.map((s) => ({ topic: t.name, name: s.name })),
  );
  let refused: string | undefined;
  const read = async (): Promise<CountsRead> => {
    let failed: string | undefined;
    if (administration !== undefined && refused === undefined) {
      try {
        const counts = new Map<string, SubscriptionCounts>();
        for (const { topic, name } of subscriptions) {
          const properties = await administration.getSubscriptionRuntimeProperties(topic, name);
          counts.set(`${topic}/${name}`, {
            active: properties.activeMessageCount,
            deadLettered: properties.deadLetterMessageCount,
            inFlight: undefined,
          });
        }
        return { counts };
      } catch (error) {
        // A refusal stands (the role will not appear meanwhile); anything else is tried again next time.
        refused = explainRefusal(error, 'the exact message counts');
        failed =
          refused ??
          `The exact message counts could not be read (${bounded(error instanceof Error ? error.message : String(error), 200)}).`;
      }
    }
    const counts = new Map<string, SubscriptionCounts>();
    for (const { topic, name } of subscriptions) {
      const queue = { client, topic, subscription: name };
      const active = await peekQueue(queue, { deadLetter: false, max: PEEK_COUNT_LIMIT });
      const dead = await peekQueue(queue, { deadLetter: true, max: PEEK_COUNT_LIMIT });
      counts.set(`${topic}/${name}`, {
        active: active.length,
        deadLettered: dead.length,
        inFlight: undefined,
        atLeast: active.length === PEEK_COUNT_LIMIT || dead.length === PEEK_COUNT_LIMIT,
      });
    }
    const how = `Counted by peeking (up to ${PEEK_COUNT_LIMIT} per queue; in flight not known).`;
    const why = failed ?? refused;
    return { counts, note: why === undefined ? how : `${why} ${how}` };
  };
  // One read at a time, however many pages ask: they share it.
  let reading: Promise<CountsRead> | undefined;
  return () => (reading ??= read().finally(() => (reading = undefined)));
}

export const command = serverCommand('console', FLAGS, USAGE, start);

if (require.main === module) runCommand(command);
