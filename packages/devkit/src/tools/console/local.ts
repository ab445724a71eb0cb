import type { Topology } from '@idempotent-consumers/inbox/internal';
import { type FunctionApp, type LocalServiceBus, parseSchedule } from '@idempotent-consumers/local-azure';

import type { LocalRun } from '../../build/localRun';
import { connectInbox } from '../inboxState';
import { ConsoleBackend, type CountsRead } from './backend';
import type { Feed } from './feed';
import { type RunningConsole, startConsole } from './server';
import { startToolThread, type ToolCalls } from './toolThread';

/** The timer functions/purge-expired-markers.ts registers: the console shows its next run per consumer. */
const PURGE_FUNCTION = 'purge-expired-markers';

/** What npm start gives its console. */
export interface LocalConsoleOptions {
  port: number;
  serviceBus: LocalServiceBus;
  /** The settings npm start writes for the tools: the console connects with them, as the tools do. */
  run: LocalRun;
  duplicateWindowSeconds: number;
  /** The app running now (watch mode replaces it). */
  app: () => FunctionApp | undefined;
  topology: () => Topology;
  feed: Feed;
}

/**
 * The console of npm start: its local Service Bus and Cosmos DB, read and acted on through the same
 * settings and code as the tools (the run file's, connectInbox, the tool side), the broker's own counts (with the
 * messages in flight, which Azure's runtime properties do not give), and the live feed of deliveries.
 * Actions are on: it is a throwaway stack on this machine.
 */
export async function startLocalConsole(
  options: LocalConsoleOptions,
): Promise<RunningConsole & { reloaded(): Promise<void> }> {
  const { serviceBus, run } = options;
  const env = run.environment;
  const toolOptions = {
    env,
    duplicateWindowSeconds: options.duplicateWindowSeconds,
    // The broker runs on this machine's clock.
    clockSkewSeconds: 0,
  };
  const inbox = connectInbox(env);
  let tools: ToolCalls | undefined;
  try {
    tools = await startToolThread(toolOptions);
    const current = tools;
    const backend = new ConsoleBackend({
      target: `npm start on this machine (Service Bus amqp://127.0.0.1:${serviceBus.port}, Cosmos DB ${env.COSMOS_ENDPOINT})`,
      actions: true,
      readOnlyReason: '',
      inbox,
      tools: () => tools ?? current,
      topology: options.topology,
      counts: () => Promise.resolve(brokerCounts(serviceBus)),
      functions: () => options.app()?.functions.map((f) => f.name) ?? [],
      others: () => others(options.app()),
      nextPurge: () => nextRun(options.app(), PURGE_FUNCTION),
      feed: options.feed,
    });
    const running = await startConsole({ port: options.port, backend });
    return {
      ...running,
      /** A new build runs: a new tool side loads its consumers and topology; the old one is closed. */
      reloaded: async () => {
        const old = tools;
        tools = await startToolThread(toolOptions);
        await old?.close();
      },
      stop: async () => {
        await running.stop();
        await tools?.close();
        if (typeof inbox === 'object') inbox.close();
      },
    };
  } catch (error) {
    await tools?.close();
    if (typeof inbox === 'object') inbox.close();
    throw error;
  }
}

/** Each subscription's messages as the broker holds them: active (waiting or locked), dead-lettered, locked. */
function brokerCounts(serviceBus: LocalServiceBus): CountsRead {
  const counts = new Map(
    serviceBus.broker.subscriptions.map((s) => [
      `${s.topic}/${s.name}`,
      {
        active: s.entity.activeCount,
        deadLettered: s.deadLetterQueue.activeCount,
        inFlight: s.entity.lockedCount,
      },
    ]),
  );
  return { counts };
}

function others(
  app: FunctionApp | undefined,
): { name: string; kind: 'timer' | 'change feed'; detail: string }[] {
  if (app === undefined) return [];
  return [
    ...app.timers.map((timer) => ({
      name: timer.name,
      kind: 'timer' as const,
      detail: `schedule ${timer.schedule}, next run ${nextRun(app, timer.name)?.toISOString() ?? 'unknown'}`,
    })),
    ...app.cosmosDB.map((relay) => ({
      name: relay.name,
      kind: 'change feed' as const,
      detail: `reads the change feed of ${relay.databaseName}/${relay.containerName} and sends what the outbox holds`,
    })),
  ];
}

/** A timer's next occurrence after now, by its schedule. */
function nextRun(app: FunctionApp | undefined, name: string): Date | undefined {
  const timer = app?.timers.find((candidate) => candidate.name === name);
  if (timer === undefined) return undefined;
  try {
    return parseSchedule(timer.schedule).next(new Date());
  } catch {
    return undefined;
  }
}
