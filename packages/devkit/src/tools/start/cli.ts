import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';

import { type Container, CosmosClient } from '@azure/cosmos';
import { ServiceBusClient } from '@azure/service-bus';
import {
  formatDuration,
  loadSettings,
  MARKER_TYPE,
  type Settings,
  SettingsError,
  type Topology,
  validateTopology,
} from '@idempotent-consumers/inbox/internal';
import {
  ChangeFeedTrigger,
  DEFAULT_KEY,
  ensureAppContainer,
  type FunctionApp,
  loadFunctionApp,
  type LocalServiceBus,
  reloadFunctionApp,
  scaledClock,
  ServiceBusTriggers,
  startInWorker,
  startServiceBus,
  TimerTriggers,
  type TopologyChanges,
  type TriggerSettings,
  triggerSettings,
} from '@idempotent-consumers/local-azure';

import {
  type LocalRun,
  localRunPath,
  readLocalRun,
  removeLocalRun,
  writeLocalRun,
} from '../../build/localRun';
import { buildPackage } from '../../build/package';
import { bounded, EnvironmentError } from '../../cli/errors';
import { appTopology, PROJECT_ROOT, RETRY_COPIES } from '../../cli/project';
import { listening } from '../../cli/serve';
import {
  commandWithFlags,
  duplicateWindowFlag,
  EXIT_CODES,
  type ExitCode,
  type FlagValues,
  numberFlag,
  runCommand,
  type ToolContext,
  usageError,
} from '../../cli/tool';
import { Feed } from '../console/feed';
import { startLocalConsole } from '../console/local';
import { LiveOutput } from './output';
import { SourceWatcher } from './watch';

const topology = appTopology();

const USAGE = `Usage: npm start -- [--duplicate-window PT1H] [--cosmos-port 8081] [--servicebus-port 5672] [--console-port 7070 | --no-console] [--app dist] [--watch | --no-watch]

Runs the function app on this machine, with no Azure, Docker or Core Tools: the local Cosmos DB
server (database and container created as the Bicep creates them), the local Service Bus peer
(topics and subscriptions from src/topology.json, duplicate detection, peek-lock, delivery counts,
dead-lettering), and the app built as azd deploys it (npm run build, into --app) and loaded through
the Node.js worker's path, its Service Bus triggers receiving from the peer with host.json's
settings, its timers on their schedules and its Cosmos DB trigger (the outbox relay) on the
container's change feed. Everything is in memory: it is gone when it stops.

In watch mode (on by default in a terminal), a saved change to the app's sources (functions/ and
what they import), src/topology.json or host.json rebuilds it and restarts it as the host restarts
its worker: the running invocations finish, the new build loads, the topics and subscriptions are
made to match src/topology.json (what they hold stays), and one line says what changed. A build
that fails leaves the running app as it was.

It serves a console on this machine (its address, with a per-run token, is printed at start): the
topics and subscriptions with their counts, a live feed of deliveries, each consumer's inbox, outbox
and documents, the dead-letter queues with resubmit and discard, and a form to send events.

It prints a line per delivery and the totals once things go quiet, and writes the settings the
other tools need to .cache/local-run.json (LOCAL_RUN_FILE moves it), so that in another terminal
npm run send, npm run peek and npm run dead-letters reach it without flags. Ctrl+C stops it all.

Options:
  --duplicate-window <d>   the topics' duplicate detection window (ISO 8601, PT20S to P7D; default PT1H,
                           as the Bicep)
  --cosmos-port <n>        default 8081 (LOCAL_COSMOS_PORT); 0 picks a free port
  --servicebus-port <n>    default 5672 (LOCAL_SERVICEBUS_PORT); 0 picks a free port
  --console-port <n>       the console's port on 127.0.0.1: default 7070 (LOCAL_CONSOLE_PORT); 0 picks a free port
  --no-console             no console
  --app <folder>           where to build the app, emptied first: new, empty, or an earlier build;
                           default dist (what npm run build writes)
  --watch, --no-watch      rebuild and restart the app when its sources change; default: on when the
                           output is a terminal
App settings: local.settings.sample.json's values, then local.settings.json's if it exists, then the
environment's; the Cosmos DB and Service Bus connections always point at the local servers.`;

const FLAGS = {
  options: {
    'duplicate-window': { type: 'string', default: 'PT1H' },
    'cosmos-port': { type: 'string', default: process.env.LOCAL_COSMOS_PORT ?? '8081' },
    'servicebus-port': { type: 'string', default: process.env.LOCAL_SERVICEBUS_PORT ?? '5672' },
    'console-port': { type: 'string', default: process.env.LOCAL_CONSOLE_PORT ?? '7070' },
    'no-console': { type: 'boolean', default: false },
    app: { type: 'string', default: 'dist' },
    watch: { type: 'boolean', default: false },
    'no-watch': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
} as const;

const HOST = '127.0.0.1';
/** How long stopping may take: the running invocations finish first, unless they hang. */
const STOP_DEADLINE_MS = 30_000;

/** What npm start was asked for, validated: every usage error is found before anything starts. */
interface StartRequest {
  cosmosPort: number;
  serviceBusPort: number;
  /** Undefined with --no-console. */
  consolePort: number | undefined;
  duplicateWindowSeconds: number;
  appDirectory: string;
  runFile: string;
  watch: boolean;
  /** Why watch mode is on or off, as the banner says it. */
  watchWhy: string;
}

/** The app's settings (the files, then the environment), validated as the app validates them. */
interface AppSettings {
  values: Record<string, string>;
  sources: string[];
  settings: Settings;
}

/** What npm start started, stopped in reverse order. */
class Started {
  private readonly stops: (() => unknown)[] = [];

  add(stop: () => unknown): void {
    this.stops.push(stop);
  }

  async stopAll(): Promise<void> {
    for (const stop of this.stops.splice(0).reverse()) {
      try {
        await stop();
      } catch {
        // Stopping the rest matters more than one part's error.
      }
    }
  }
}

async function main(values: FlagValues<typeof FLAGS>, context: ToolContext): Promise<ExitCode> {
  const request = startRequest(values, context);
  const app = appSettingsOf(context.env);
  const started = new Started();
  let output: LiveOutput;
  try {
    output = await startEverything(request, app, started, context);
  } catch (error) {
    await started.stopAll();
    throw error;
  }
  await untilInterrupted();
  await output.printTotals().catch(() => undefined);
  context.out('Stopping: no new deliveries; waiting for the running ones...');
  const deadline = setTimeout(() => {
    context.err(`Still stopping after ${STOP_DEADLINE_MS / 1000} s; exiting anyway.`);
    process.exit(EXIT_CODES.failed);
  }, STOP_DEADLINE_MS);
  await started.stopAll();
  clearTimeout(deadline);
  context.out('Stopped.');
  return EXIT_CODES.ok;
}

function startRequest(values: FlagValues<typeof FLAGS>, context: ToolContext): StartRequest {
  const cosmosPort = numberFlag('cosmos-port', values['cosmos-port'], USAGE, { max: 65535, integer: true });
  const serviceBusPort = numberFlag('servicebus-port', values['servicebus-port'], USAGE, {
    max: 65535,
    integer: true,
  });
  const consolePort = numberFlag('console-port', values['console-port'], USAGE, {
    max: 65535,
    integer: true,
  });
  const duplicateWindowSeconds = duplicateWindowFlag('duplicate-window', values['duplicate-window'], USAGE);
  const appDirectory = resolve(values.app);
  refuseAppFolder(appDirectory);
  const runFile = localRunPath(context.env);
  const running = readLocalRun(runFile);
  if (running !== undefined) {
    throw new EnvironmentError(
      `npm start is already running (pid ${running.pid}; ${shown(runFile)}). Stop it first, or give this one ` +
        'its own settings file with LOCAL_RUN_FILE=<path> (and other ports), and the same LOCAL_RUN_FILE to its tools.',
    );
  }
  if (values.watch && values['no-watch']) throw usageError('Pass --watch or --no-watch, not both.', USAGE);
  const { watch, why: watchWhy } = watchMode(values, process.stdout.isTTY === true);
  return {
    cosmosPort,
    serviceBusPort,
    consolePort: values['no-console'] ? undefined : consolePort,
    duplicateWindowSeconds,
    appDirectory,
    runFile,
    watch,
    watchWhy,
  };
}

/** Whether npm start watches the app's sources, and why: the flags, else whether its output is a terminal. */
export function watchMode(
  flags: { watch: boolean; 'no-watch': boolean },
  terminal: boolean,
): { watch: boolean; why: string } {
  if (flags.watch) return { watch: true, why: '--watch' };
  if (flags['no-watch']) return { watch: false, why: '--no-watch' };
  return terminal
    ? { watch: true, why: 'output is a terminal; --no-watch turns it off' }
    : { watch: false, why: 'output is not a terminal; --watch turns it on' };
}

/** The app's settings, validated before anything starts (the app validates them again on load). */
function appSettingsOf(env: Readonly<Record<string, string | undefined>>): AppSettings {
  const { values, sources } = readAppSettings(env);
  // npm start supplies the Cosmos DB and Service Bus connections itself: the file's are not checked.
  const probe = {
    ...values,
    COSMOS_ENDPOINT: `http://${HOST}:1/`,
    COSMOS_KEY: DEFAULT_KEY,
    ServiceBusConnection: undefined,
    ServiceBusConnection__fullyQualifiedNamespace: undefined,
  };
  try {
    return { values, sources, settings: loadSettings(probe) };
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    throw new EnvironmentError(
      `The app settings (${sources.join(', ')}) are not valid: ${error.problems.join('; ')}`,
    );
  }
}

/**
 * The local servers first (so that a second npm start fails before it touches a build), then the
 * app built and loaded as the worker loads it, its triggers, and the settings file for the tools;
 * prints where everything is.
 */
async function startEverything(
  request: StartRequest,
  app: AppSettings,
  started: Started,
  context: ToolContext,
): Promise<LiveOutput> {
  const { settings } = app;
  const { database: databaseId, container: containerId } = settings.cosmos;
  const duplicateWindow = formatDuration(request.duplicateWindowSeconds);
  const sweep = fitSweeper(settings.outbox, request.duplicateWindowSeconds);
  await refuseTakenPorts([
    { what: 'Cosmos DB', flag: 'cosmos-port', port: request.cosmosPort },
    { what: 'Service Bus', flag: 'servicebus-port', port: request.serviceBusPort },
    ...(request.consolePort === undefined
      ? []
      : [{ what: 'the console', flag: 'console-port', port: request.consolePort }]),
  ]);
  const cosmos = await listening(
    'Cosmos DB',
    request.cosmosPort,
    'pass --cosmos-port 0 for any free port.',
    () => startInWorker({ port: request.cosmosPort, host: HOST }),
  );
  started.add(() => cosmos.stop());
  const cosmosClient = new CosmosClient({ endpoint: cosmos.endpoint, key: cosmos.key });
  started.add(() => cosmosClient.dispose());
  const database = (await cosmosClient.databases.createIfNotExists({ id: databaseId })).database;
  const container = await ensureAppContainer(database, containerId);
  const output = new LiveOutput(context.out, () => totals(container, serviceBus), duplicateWindow, {
    unsubscribed: (topic, subject) =>
      currentTopology.topics.find((t) => t.name === topic)?.unsubscribedSubjects?.includes(subject) === true,
    watching: request.watch,
  });
  started.add(() => output.stop());
  // The console's live feed hears what the output prints.
  const current: { hosted?: HostedApp } = {};
  const feed = new Feed((name) => {
    const registration = current.hosted?.functionApp()?.serviceBus.find((f) => f.name === name);
    return registration?.topicName === undefined || registration.subscriptionName === undefined
      ? undefined
      : { topic: registration.topicName, subscription: registration.subscriptionName };
  });
  const watchers = fanOut(output, request.consolePort === undefined ? undefined : feed);
  const serviceBus = await listening(
    'Service Bus',
    request.serviceBusPort,
    'pass --servicebus-port 0 for any free port.',
    () =>
      startServiceBus({
        port: request.serviceBusPort,
        host: HOST,
        topology,
        retryCopies: RETRY_COPIES,
        duplicateWindowMs: request.duplicateWindowSeconds * 1000,
        lockDurationMs: settings.redelivery.lockDurationSeconds * 1000,
        maxDeliveryCount: settings.redelivery.maxDeliveryCount,
        messageTimeToLiveMs: settings.redelivery.messageTtlSeconds * 1000,
        observer: watchers,
      }),
  );
  started.add(() => serviceBus.stop());

  context.out(`Building the app into ${shown(request.appDirectory)} (as npm run build does)...`);
  const sources = new Set<string>();
  const files = await buildPackage(request.appDirectory, PROJECT_ROOT, sources);
  context.out(`  ${files.length} files.`);
  // The app's environment, as the Functions host gives it to the worker. The outbox relay sends
  // with ServiceBusConnection, the local peer's connection string; the namespace setting (for
  // Azure, from the settings file) would contradict it.
  Object.assign(process.env, app.values, {
    COSMOS_ENDPOINT: cosmos.endpoint,
    COSMOS_KEY: cosmos.key,
    ServiceBusConnection: serviceBus.connectionString,
    ...sweep.environment,
  });
  delete process.env.ServiceBusConnection__fullyQualifiedNamespace;
  const run: LocalRun = {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    environment: {
      SERVICEBUS_CONNECTION_STRING: serviceBus.connectionString,
      SERVICEBUS_DUPLICATE_WINDOW: duplicateWindow,
      // The broker runs on this machine's clock: no margin for skew before a resubmit.
      SERVICEBUS_CLOCK_SKEW: 'PT0S',
      COSMOS_ENDPOINT: cosmos.endpoint,
      COSMOS_KEY: cosmos.key,
      COSMOS_DATABASE: databaseId,
      COSMOS_CONTAINER: containerId,
      INBOX_RETENTION: app.values.INBOX_RETENTION ?? '',
      // The tools validate the app's settings too: the sweeper's must fit the window.
      ...sweep.environment,
    },
    topology,
  };
  const hostedApp = new HostedApp({
    appDirectory: request.appDirectory,
    serviceBus,
    cosmosClient,
    output,
    watchers,
    publishTopology: (declared) => writeLocalRun(request.runFile, { ...run, topology: declared }),
  });
  current.hosted = hostedApp;
  const running = await hostedApp.start(sources);
  started.add(() => hostedApp.stop());
  writeLocalRun(request.runFile, run);
  started.add(() => removeLocalRun(request.runFile, process.pid));
  if (request.watch) {
    const watcher = new SourceWatcher(PROJECT_ROOT, (changed) => hostedApp.changed(changed));
    watcher.watch(sources);
    hostedApp.onSources = (next) => watcher.watch(next);
    // Stopped before the app: no rebuild starts while it stops.
    started.add(() => watcher.close());
  }

  let consoleUrl: string | undefined;
  if (request.consolePort !== undefined) {
    const consolePort = request.consolePort;
    const console = await listening(
      'the console',
      consolePort,
      'pass --console-port 0 for any free port.',
      () =>
        startLocalConsole({
          port: consolePort,
          serviceBus,
          run,
          duplicateWindowSeconds: request.duplicateWindowSeconds,
          app: () => hostedApp.functionApp(),
          topology: () => currentTopology,
          feed,
        }),
    );
    started.add(() => console.stop());
    hostedApp.onReloaded = () => console.reloaded();
    consoleUrl = console.url;
  }

  context.out(
    readyLines({
      request,
      consoleUrl,
      app,
      cosmos,
      serviceBus,
      functionApp: running.functionApp,
      trigger: running.trigger,
      armed: running.armed,
      duplicateWindow,
      sweep,
    }).join('\n'),
  );
  return output;
}

/** The app running: what it registered, the host.json trigger settings, its timers' next runs. */
interface RunningApp {
  functionApp: FunctionApp;
  trigger: TriggerSettings;
  armed: ReturnType<TimerTriggers['start']>;
  stop(): Promise<void>;
}

/**
 * The app as npm start hosts it: built into the app folder, loaded through the worker's path, its
 * triggers running. In watch mode, a change rebuilds it into a folder of its own first, so that a
 * build that fails leaves the running app as it was; a build the same as the running one changes
 * nothing; otherwise the app restarts as the host restarts its worker (the running invocations
 * finish, appTerminate hooks run, the new build loads) on a broker whose topics and subscriptions
 * now match src/topology.json.
 */
class HostedApp {
  /** Told the sources of each new build (watch mode watches their folders). */
  onSources: (sources: ReadonlySet<string>) => void = () => undefined;
  /** Told when a new build runs (the console's tool side loads its consumers again). */
  onReloaded: () => Promise<void> = () => Promise.resolve();
  private running: RunningApp | undefined;
  private reloading: Promise<void> = Promise.resolve();
  private pending: string[] = [];

  constructor(
    private readonly host: {
      appDirectory: string;
      serviceBus: LocalServiceBus;
      cosmosClient: CosmosClient;
      output: LiveOutput;
      /** Told every delivery: the output and the console's feed. */
      watchers: Watchers;
      /** Writes the local run file with the topology the broker now serves. */
      publishTopology: (declared: Topology) => void;
    },
  ) {}

  /** The app running now, if one is. */
  functionApp(): FunctionApp | undefined {
    return this.running?.functionApp;
  }

  /** Loads the build in the app folder and starts its triggers. */
  async start(
    sources: ReadonlySet<string>,
    load: (directory: string) => Promise<FunctionApp> = loadFunctionApp,
  ): Promise<RunningApp> {
    const { appDirectory, serviceBus, cosmosClient, output, watchers } = this.host;
    const functionApp = await load(appDirectory);
    const hostJson = JSON.parse(readFileSync(join(appDirectory, 'host.json'), 'utf8')) as unknown;
    const trigger = triggerSettings(hostJson);
    const group = new Started();
    const armed = await startTriggers(
      functionApp,
      trigger,
      serviceBus.connectionString,
      cosmosClient,
      output,
      watchers,
      group,
    );
    this.running = { functionApp, trigger, armed, stop: () => group.stopAll() };
    this.onSources(sources);
    return this.running;
  }

  /** Files changed: one rebuild at a time, the changes that come meanwhile in the next. */
  changed(files: string[]): void {
    this.pending.push(...files);
    this.reloading = this.reloading.then(async () => {
      const changed = [...new Set(this.pending.splice(0))].sort();
      if (changed.length > 0) await this.reload(changed);
    });
  }

  async stop(): Promise<void> {
    await this.reloading;
    await this.running?.stop();
    this.running = undefined;
  }

  private async reload(changed: string[]): Promise<void> {
    const { appDirectory, serviceBus, output } = this.host;
    const startedAt = performance.now();
    const named =
      changed.length > 3
        ? `${changed.slice(0, 3).join(', ')} and ${changed.length - 3} more`
        : changed.join(', ');
    output.note(`Changed: ${named}. Rebuilding...`);
    const staging = mkdtempSync(join(tmpdir(), 'npm-start-build-'));
    try {
      const sources = new Set<string>();
      let declared: Topology;
      try {
        declared = validateTopology(
          JSON.parse(readFileSync(join(PROJECT_ROOT, 'src', 'topology.json'), 'utf8')),
        );
        await buildPackage(staging, PROJECT_ROOT, sources);
        triggerSettings(JSON.parse(readFileSync(join(staging, 'host.json'), 'utf8')));
      } catch (error) {
        output.note(`The build failed; the app runs on as it was. ${firstLine(error)}`);
        return;
      }
      if (sameFiles(staging, appDirectory)) {
        this.onSources(sources);
        output.note('The build is the same as the running one: nothing to restart.');
        return;
      }
      const before = new Set(this.running?.functionApp.functions.map((f) => f.name));
      await this.running?.stop();
      this.running = undefined;
      rmSync(appDirectory, { recursive: true, force: true });
      cpSync(staging, appDirectory, { recursive: true });
      const topologyChanges = serviceBus.broker.declare(declared);
      currentTopology = declared;
      this.host.publishTopology(declared);
      let running: RunningApp;
      try {
        running = await this.start(sources, reloadFunctionApp);
      } catch (error) {
        this.onSources(sources);
        output.note(
          `The new build does not load, so no function runs until a change that does: ${firstLine(error)}`,
        );
        return;
      }
      await this.onReloaded().catch((error: unknown) =>
        output.note(`The console could not load the new build's consumers: ${firstLine(error)}`),
      );
      const after = running.functionApp.functions.map((f) => f.name);
      output.note(
        `Restarted in ${((performance.now() - startedAt) / 1000).toFixed(1)} s: ${after.length} functions` +
          listed(
            ' (added: ',
            after.filter((name) => !before.has(name)),
            ')',
          ) +
          listed(
            ' (removed: ',
            [...before].filter((name) => !after.includes(name)),
            ')',
          ) +
          `; ${describeTopologyChanges(topologyChanges)}.`,
      );
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
}

/** The topology the local broker serves: src/topology.json as it was at start or the last reload. */
let currentTopology: Topology = topology;

function describeTopologyChanges({ added, removed, refiltered }: TopologyChanges): string {
  const parts = [
    listed('added ', added, ''),
    listed('removed ', removed, ''),
    // Its subjects changed, or it gained or lost delayedRetry (broker.ts declare).
    listed('new filter for ', refiltered, ''),
  ].filter((part) => part !== '');
  return parts.length === 0
    ? 'topics and subscriptions unchanged'
    : `topics and subscriptions: ${parts.join('; ')}`;
}

function listed(prefix: string, names: readonly string[], suffix: string): string {
  return names.length === 0 ? '' : `${prefix}${names.join(', ')}${suffix}`;
}

/**
 * An error in one line, bounded: esbuild's first error with its place (esbuild has printed them all
 * above), or the first line of any other.
 */
function firstLine(error: unknown): string {
  const first = (error as { errors?: { text?: unknown; location?: Record<string, unknown> | null }[] })
    .errors?.[0];
  if (first !== undefined) {
    const where = first.location ? `${String(first.location.file)}:${String(first.location.line)}: ` : '';
    return bounded(`${where}${String(first.text)}`, 300);
  }
  const text = error instanceof Error ? error.message : String(error);
  return bounded(text.split('\n').find((line) => line.trim() !== '') ?? text, 300);
}

/** Whether two folders hold the same files with the same bytes. */
function sameFiles(a: string, b: string): boolean {
  if (!existsSync(b)) return false;
  const files = readdirSync(a).sort();
  const others = readdirSync(b).sort();
  return (
    files.join('\n') === others.join('\n') &&
    files.every((file) => readFileSync(join(a, file)).equals(readFileSync(join(b, file))))
  );
}

/** What npm start prints once everything runs: where it is, and the settings another terminal needs. */
function readyLines({
  request,
  consoleUrl,
  app,
  cosmos,
  serviceBus,
  functionApp,
  trigger,
  armed,
  duplicateWindow,
  sweep,
}: {
  request: StartRequest;
  consoleUrl: string | undefined;
  app: AppSettings;
  cosmos: { endpoint: string; key: string };
  serviceBus: LocalServiceBus;
  functionApp: FunctionApp;
  trigger: TriggerSettings;
  armed: ReturnType<TimerTriggers['start']>;
  duplicateWindow: string;
  sweep: ReturnType<typeof fitSweeper>;
}): string[] {
  const { database: databaseId, container: containerId } = app.settings.cosmos;
  const { OUTBOX_SWEEP_AGE: age, OUTBOX_SWEEP_INTERVAL: every } = sweep.environment;
  const { redelivery } = app.settings;
  return [
    `App settings from ${app.sources.join(', ')}; in memory: everything is gone when it stops.`,
    `Local Cosmos DB:   ${cosmos.endpoint} database '${databaseId}', container '${containerId}' (/partitionKey)`,
    `Local Service Bus: amqp://${HOST}:${serviceBus.port} (duplicate detection ${duplicateWindow}, lock ${formatDuration(redelivery.lockDurationSeconds)}, max deliveries ${redelivery.maxDeliveryCount})`,
    ...serviceBus.broker.subscriptions.map(
      (s) => `  ${s.topic}/Subscriptions/${s.name} [${s.subjects.join(', ')}]`,
    ),
    `Functions (host.json: maxConcurrentCalls ${trigger.maxConcurrentCalls}, prefetchCount ${trigger.prefetchCount}, ` +
      `autoCompleteMessages ${trigger.autoCompleteMessages}, lock renewal up to ${trigger.maxAutoLockRenewalMs / 1000} s, ` +
      `functionTimeout ${trigger.functionTimeoutMs / 1000} s):`,
    ...functionApp.serviceBus.map((f) => `  ${f.name}: ${f.topicName}/Subscriptions/${f.subscriptionName}`),
    ...armed.map((t) => `  ${t.function}: timer, next run ${t.next.toISOString()}`),
    `  outbox sweeper: resends what is pending after ${age}, every ${every}` +
      (sweep.adjusted
        ? ` (fitted to the ${duplicateWindow} window: the settings' sweeper would resend after the window has passed)`
        : ''),
    ...functionApp.cosmosDB.map(
      (f) =>
        `  ${f.name}: change feed of ${f.databaseName}/${f.containerName}, leases in ${f.leaseContainerName}`,
    ),
    request.watch
      ? `Watching for changes (${request.watchWhy}): a saved change to the app's sources rebuilds and restarts it.`
      : `Not watching for changes (${request.watchWhy}).`,
    consoleUrl === undefined
      ? 'Console: off (--no-console).'
      : `Console: ${consoleUrl} (this machine only; the token in the address is this run's)`,
    `For another terminal (npm run send, peek and dead-letters read them from ${shown(request.runFile)}):`,
    `  SERVICEBUS_CONNECTION_STRING="${serviceBus.connectionString}"`,
    `  COSMOS_ENDPOINT=${cosmos.endpoint}`,
    `  COSMOS_KEY=${cosmos.key}`,
    ...(trigger.autoCompleteMessages
      ? []
      : [
          'Warning: autoCompleteMessages is false, and these functions never settle a message: every one comes back when its lock runs out.',
        ]),
    'Ready. Press Ctrl+C to stop.',
  ];
}

/** Who hears what happens to messages: npm start's output, and the console's feed when it runs. */
type Watchers = Pick<Feed, 'delivery' | 'droppedAsDuplicate' | 'matchedNoSubscription' | 'deadLettered'>;

function fanOut(output: LiveOutput, feed: Feed | undefined): Watchers {
  return {
    delivery: (d) => {
      output.delivery(d);
      feed?.delivery(d);
    },
    droppedAsDuplicate: (topic, message) => {
      output.droppedAsDuplicate(topic, message);
      feed?.droppedAsDuplicate(topic, message);
    },
    matchedNoSubscription: (topic, message) => {
      output.matchedNoSubscription(topic, message);
      feed?.matchedNoSubscription(topic, message);
    },
    deadLettered: (path, message) => {
      output.deadLettered(path, message);
      feed?.deadLettered(path, message);
    },
  };
}

/** The totals line: the inbox markers in Cosmos DB, and the messages waiting and dead-lettered. */
async function totals(container: Container, serviceBus: LocalServiceBus): Promise<string> {
  const { resources: markers } = await container.items
    .query<string>({
      query: 'SELECT VALUE c.id FROM c WHERE c.type = @type',
      parameters: [{ name: '@type', value: MARKER_TYPE }],
    })
    .fetchAll();
  const waiting = serviceBus.broker.subscriptions.reduce((sum, s) => sum + s.entity.activeCount, 0);
  const dead = serviceBus.broker.subscriptions.reduce((sum, s) => sum + s.deadLetterQueue.activeCount, 0);
  return `inbox markers ${markers.length}, messages waiting ${waiting}, in dead-letter queues ${dead}`;
}

/**
 * The app's triggers: its Service Bus functions on receivers of the real SDK, its timers, and its
 * Cosmos DB triggers (the outbox relay) on the change feed, their lease containers created as the
 * Bicep creates them (the trigger does not: createLeaseContainerIfNotExists is false). Returns the
 * timers' next runs.
 */
async function startTriggers(
  app: FunctionApp,
  trigger: TriggerSettings,
  connectionString: string,
  cosmosClient: CosmosClient,
  output: LiveOutput,
  watchers: Watchers,
  started: Started,
): Promise<ReturnType<TimerTriggers['start']>> {
  const client = new ServiceBusClient(connectionString);
  started.add(() => client.close());
  const triggers = new ServiceBusTriggers(
    client,
    app.serviceBus,
    trigger,
    (delivery) => watchers.delivery(delivery),
    (name, error) =>
      output.line(`${name}: receive error (${bounded(`${error.name}: ${error.message}`, 160)})`),
  );
  triggers.start();
  started.add(() => triggers.stop());
  const timers = new TimerTriggers(app.timers, (run) => output.timerRun(run));
  const armed = timers.start();
  started.add(() => timers.stop());
  for (const registration of app.cosmosDB) {
    const triggerDatabase = cosmosClient.database(registration.databaseName);
    const { container: leases } = await triggerDatabase.containers.createIfNotExists({
      id: registration.leaseContainerName,
      partitionKey: { paths: ['/id'] },
    });
    const changeFeed = new ChangeFeedTrigger(registration, {
      clock: scaledClock(1),
      monitored: triggerDatabase.container(registration.containerName),
      leases,
      onPage: (page, logs) => output.changeFeedPage(page, logs),
    });
    await changeFeed.start();
    started.add(() => changeFeed.stop());
  }
  return armed;
}

/** The app settings `func start` would read, local.settings.json over the sample, the environment over both. */
function readAppSettings(env: Readonly<Record<string, string | undefined>>): {
  values: Record<string, string>;
  sources: string[];
} {
  const values: Record<string, string> = {};
  const sources: string[] = [];
  for (const file of ['local.settings.sample.json', 'local.settings.json']) {
    const path = join(PROJECT_ROOT, file);
    if (!existsSync(path)) continue;
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as { Values?: Record<string, unknown> };
    for (const [name, value] of Object.entries(parsed.Values ?? {})) {
      if (typeof value === 'string') values[name] = value;
    }
    sources.push(file);
  }
  for (const name of Object.keys(values)) {
    const fromEnvironment = env[name];
    if (fromEnvironment !== undefined) values[name] = fromEnvironment;
  }
  sources.push('the environment');
  return { values, sources };
}

/**
 * The build folder is emptied first (as npm run build empties dist/): refuse the project itself, a
 * folder above it, and a folder holding anything but an earlier build.
 */
function refuseAppFolder(directory: string): void {
  const inside = relative(directory, PROJECT_ROOT);
  if (inside === '' || !inside.startsWith('..')) {
    throw new EnvironmentError(
      `--app ${shown(directory)} is the project or holds it; name a build folder such as dist.`,
    );
  }
  if (!existsSync(directory) || readdirSync(directory).length === 0) return;
  const manifest = join(directory, 'package.json');
  const name = existsSync(manifest)
    ? (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name
    : undefined;
  const ours = (JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { name: string })
    .name;
  if (name !== ours || !existsSync(join(directory, 'host.json')) || existsSync(join(directory, 'src'))) {
    throw new EnvironmentError(
      `--app ${shown(directory)} is not empty and holds no earlier build of this app; it would be emptied. Name another folder.`,
    );
  }
}

/**
 * Every port npm start needs that something else holds, named at once with the one command that
 * avoids them all (0 is any free port, never taken).
 */
async function refuseTakenPorts(ports: { what: string; flag: string; port: number }[]): Promise<void> {
  const taken: typeof ports = [];
  for (const entry of ports) {
    if (entry.port !== 0 && (await inUse(entry.port))) taken.push(entry);
  }
  if (taken.length === 0) return;
  const named = taken.map(({ what, port }) => `${what} ${port}`).join(' and ');
  throw new EnvironmentError(
    `${taken.length === 1 ? 'The port' : 'The ports'} for ${named} ${taken.length === 1 ? 'is' : 'are'} in use ` +
      '(another npm start, npm run cosmos or an emulator?). Stop it, or pick free ports: ' +
      `npm start -- ${taken.map(({ flag }) => `--${flag} 0`).join(' ')}`,
  );
}

/** Whether something listens on the port, found by trying to listen on it. */
function inUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(true));
    probe.listen(port, HOST, () => probe.close(() => resolve(false)));
  });
}

/**
 * Resolves on the first Ctrl+C (SIGINT) or SIGTERM. A terminal's Ctrl+C reaches every process of the
 * group, and npm and tsx pass it on as well, so later signals are expected and ignored.
 */
function untilInterrupted(): Promise<void> {
  return new Promise((resolve) => {
    const stop = (): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      process.on('SIGINT', () => undefined);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

function shown(path: string): string {
  const fromRoot = relative(process.cwd(), path);
  return fromRoot.startsWith('..') ? path : fromRoot;
}

/**
 * The app refuses a sweeper whose first resend could come after the broker's duplicate window
 * (OUTBOX_SWEEP_AGE + OUTBOX_SWEEP_INTERVAL ≤ SERVICEBUS_DUPLICATE_WINDOW). npm start tells the app
 * its broker's window, and keeps the settings file's sweeper when it fits; a short window (as in
 * the README's walkthrough, PT20S) gets a sweeper that fits: every 5, 10 or 60 seconds, resending
 * what is pending for the rest of the window.
 */
function fitSweeper(
  outbox: { sweepAgeSeconds: number; sweepIntervalSeconds: number },
  windowSeconds: number,
): { adjusted: boolean; environment: Record<string, string> } {
  const fits = outbox.sweepAgeSeconds + outbox.sweepIntervalSeconds <= windowSeconds;
  const interval = fits
    ? outbox.sweepIntervalSeconds
    : windowSeconds >= 120
      ? 60
      : windowSeconds >= 40
        ? 10
        : 5;
  const age = fits ? outbox.sweepAgeSeconds : windowSeconds - interval;
  return {
    adjusted: !fits,
    environment: {
      SERVICEBUS_DUPLICATE_WINDOW: formatDuration(windowSeconds),
      OUTBOX_SWEEP_AGE: formatDuration(age),
      OUTBOX_SWEEP_INTERVAL: formatDuration(interval),
    },
  };
}

export const command = commandWithFlags('start', FLAGS, USAGE, main, { exitWhenDone: true });

if (require.main === module) runCommand(command);
