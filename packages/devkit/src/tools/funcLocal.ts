import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { loadSettings, SettingsError } from '@idempotent-consumers/inbox/internal';
import {
  connectionStringFor,
  DEFAULT_KEY,
  startInWorker,
  startServiceBus,
} from '@idempotent-consumers/local-azure';

import { localRunPath, readLocalRun, removeLocalRun, writeLocalRun } from '../build/localRun';
import { EnvironmentError } from '../cli/errors';
import { appTopology, PROJECT_ROOT, RETRY_COPIES } from '../cli/project';
import { listening, type LocalServer, serverCommand } from '../cli/serve';
import { type FlagValues, numberFlag, runCommand, type ToolContext } from '../cli/tool';
import {
  hostLocalSettings,
  LOCAL_SETTINGS_PATH,
  type LocalSettingsFile,
  SAMPLE_PATH,
} from '../emulators/localSettings';
import { provisionAppContainer } from '../emulators/provisionCosmos';

const topology = appTopology();

const USAGE = `Usage: npm run func:local -- [--cosmos-port 8081] [--servicebus-port 5672] [--settings local.settings.json]
                             [--force] [--no-azurite]

Starts what Azure Functions Core Tools' host needs to run this app with \`func start\`, on this
machine and without Docker:
  - the local Cosmos DB server, with the app's database and container and the outbox relay's lease
    container, created as the Bicep creates them;
  - the local Service Bus peer, with the topics and subscriptions of src/topology.json, the lock
    duration, max delivery count and message TTL of the app settings, and a one-hour duplicate window;
  - Azurite, Microsoft's storage emulator, for AzureWebJobsStorage (blob 10000, queue 10001, table 10002);
and writes local.settings.json from local.settings.sample.json with the connections pointed at them
(the Service Bus emulator's connection-string format, the Cosmos DB endpoint and key, gateway mode
for the Cosmos DB extension, UseDevelopmentStorage=true). Then, in another terminal:

  npm run build
  func start

npm run send, peek and dead-letters reach the same servers without flags. Everything is in memory
and gone when it stops (Ctrl+C).

Options:
  --cosmos-port <n>      default 8081 (LOCAL_COSMOS_PORT)
  --servicebus-port <n>  default 5672 (LOCAL_SERVICEBUS_PORT)
  --settings <file>      the settings file to write; default local.settings.json
  --force                replace a settings file that holds other values
  --no-azurite           do not start Azurite (one already listens on 10000-10002)`;

const FLAGS = {
  options: {
    'cosmos-port': { type: 'string', default: process.env.LOCAL_COSMOS_PORT ?? '8081' },
    'servicebus-port': { type: 'string', default: process.env.LOCAL_SERVICEBUS_PORT ?? '5672' },
    settings: { type: 'string', default: LOCAL_SETTINGS_PATH },
    force: { type: 'boolean', default: false },
    'no-azurite': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
} as const;

const HOST = '127.0.0.1';
/** The ports `UseDevelopmentStorage=true` names: Azurite's blob, queue and table services. */
export const AZURITE_PORTS = [10000, 10001, 10002] as const;
const AZURITE_START_TIMEOUT_MS = 30_000;

export interface LocalStackOptions {
  cosmosPort: number;
  serviceBusPort: number;
  /** The local.settings.json to write. */
  settingsPath: string;
  /** Replace a settings file that holds other values. */
  force?: boolean;
  azurite: boolean;
  /** Where the tools find the servers (packages/devkit/src/build/localRun.ts); default .cache/local-run.json or LOCAL_RUN_FILE. */
  runFile?: string;
  out?: (line: string) => void;
}

export interface LocalStack extends LocalServer {
  /** What was written to the settings file. */
  settings: LocalSettingsFile;
}

/**
 * Starts the local Cosmos DB server, the local Service Bus peer and (unless told not to) Azurite,
 * then writes the host's settings file. On any failure, what started is stopped again.
 */
export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const out = options.out ?? (() => undefined);
  const sample = JSON.parse(readFileSync(SAMPLE_PATH, 'utf8')) as LocalSettingsFile;
  const redelivery = redeliveryOf(sample);
  const runFile = options.runFile ?? localRunPath();
  const running = readLocalRun(runFile);
  if (running !== undefined) {
    throw new EnvironmentError(
      `npm start or npm run func:local is already running (pid ${running.pid}); stop it first.`,
    );
  }
  // A settings file with other values is refused before anything starts (and again when written,
  // once ports 0 have become real ones).
  const planned = hostLocalSettings(sample, {
    serviceBusConnectionString: connectionStringFor(HOST, options.serviceBusPort),
    cosmosEndpoint: `http://${HOST}:${options.cosmosPort}/`,
    cosmosKey: DEFAULT_KEY,
  });
  refuseOtherSettings(options.settingsPath, planned, options.force === true);
  if (options.azurite) await refuseTakenAzuritePorts();

  const stops: (() => Promise<unknown>)[] = [];
  const stopAll = async (): Promise<void> => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
  };
  try {
    const cosmos = await listening(
      'Cosmos DB',
      options.cosmosPort,
      'pass --cosmos-port <another port>: the settings file names it.',
      () => startInWorker({ port: options.cosmosPort, host: HOST }),
    );
    stops.push(() => cosmos.stop());
    const provisioned = await provisionAppContainer({
      endpoint: cosmos.endpoint,
      key: cosmos.key,
      database: sample.Values.COSMOS_DATABASE,
      container: sample.Values.COSMOS_CONTAINER,
      leaseContainer: sample.Values.COSMOS_LEASE_CONTAINER,
      timeoutMs: 10_000,
    });
    out(
      `Cosmos DB: ${cosmos.endpoint} (database '${provisioned.database}', containers '${provisioned.container}' ` +
        `and '${provisioned.leaseContainer}').`,
    );

    const serviceBus = await listening(
      'Service Bus',
      options.serviceBusPort,
      'pass --servicebus-port <another port>: the settings file names it.',
      () =>
        startServiceBus({
          port: options.serviceBusPort,
          host: HOST,
          topology,
          retryCopies: RETRY_COPIES,
          duplicateWindowMs: 3_600_000,
          ...redelivery,
        }),
    );
    stops.push(() => serviceBus.stop());
    out(
      `Service Bus: amqp://${serviceBus.host}:${serviceBus.port} (${serviceBus.broker.subscriptions.length} ` +
        'subscriptions of src/topology.json).',
    );

    if (options.azurite) {
      const azurite = await startAzurite();
      stops.push(() => stopChild(azurite));
      out(`Azurite: blob, queue and table on ${HOST}:${AZURITE_PORTS.join(', ')} (in memory).`);
    }

    const settings = hostLocalSettings(sample, {
      serviceBusConnectionString: serviceBus.connectionString,
      cosmosEndpoint: cosmos.endpoint,
      cosmosKey: cosmos.key,
    });
    writeSettings(options.settingsPath, settings, options.force === true);
    out(`Wrote ${shown(options.settingsPath)}.`);

    writeLocalRun(runFile, {
      pid: process.pid,
      startedAt: new Date().toISOString(),
      environment: {
        SERVICEBUS_CONNECTION_STRING: serviceBus.connectionString,
        SERVICEBUS_DUPLICATE_WINDOW: 'PT1H',
        SERVICEBUS_CLOCK_SKEW: 'PT0S',
        COSMOS_ENDPOINT: cosmos.endpoint,
        COSMOS_KEY: cosmos.key,
        COSMOS_DATABASE: provisioned.database,
        COSMOS_CONTAINER: provisioned.container,
        INBOX_RETENTION: sample.Values.INBOX_RETENTION ?? '',
      },
      topology,
    });
    stops.push(() => Promise.resolve(removeLocalRun(runFile, process.pid)));
    return { settings, stop: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** The broker's redelivery settings, from the sample's app settings (the app checks its bound on them). */
function redeliveryOf(sample: LocalSettingsFile): {
  lockDurationMs: number;
  maxDeliveryCount: number;
  messageTimeToLiveMs: number;
} {
  try {
    const { redelivery } = loadSettings({
      ...sample.Values,
      COSMOS_ENDPOINT: `http://${HOST}:1/`,
      COSMOS_KEY: DEFAULT_KEY,
    });
    return {
      lockDurationMs: redelivery.lockDurationSeconds * 1000,
      maxDeliveryCount: redelivery.maxDeliveryCount,
      messageTimeToLiveMs: redelivery.messageTtlSeconds * 1000,
    };
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    throw new EnvironmentError(`${shown(SAMPLE_PATH)} is not valid: ${error.problems.join('; ')}`);
  }
}

const settingsText = (settings: LocalSettingsFile): string => `${JSON.stringify(settings, null, 2)}\n`;

/** Refuses a settings file that holds other values, unless --force was given. */
function refuseOtherSettings(path: string, settings: LocalSettingsFile, force: boolean): void {
  if (force || !existsSync(path) || readFileSync(path, 'utf8') === settingsText(settings)) return;
  throw new EnvironmentError(
    `${shown(path)} exists with other values. Run with --force to replace it (it is never committed), ` +
      'or --settings <file> to write elsewhere.',
  );
}

/** Writes the settings, unless the file holds other values and --force was not given. */
function writeSettings(path: string, settings: LocalSettingsFile, force: boolean): void {
  refuseOtherSettings(path, settings, force);
  writeFileSync(path, settingsText(settings));
}

async function refuseTakenAzuritePorts(): Promise<void> {
  const taken: number[] = [];
  for (const port of AZURITE_PORTS) if (await answers(port)) taken.push(port);
  if (taken.length > 0) {
    throw new EnvironmentError(
      `Port ${taken.join(', ')} is in use: is Azurite already running? Stop it, or pass --no-azurite to use it.`,
    );
  }
}

/** Azurite from node_modules, in memory, without telemetry, accepting the host's newer storage API versions. */
async function startAzurite(): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      require.resolve('azurite/dist/src/azurite.js'),
      '--inMemoryPersistence',
      '--disableTelemetry',
      '--skipApiVersionCheck',
      '--silent',
      '--blobHost',
      HOST,
      '--queueHost',
      HOST,
      '--tableHost',
      HOST,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  // Not left behind when this process ends without stopping it (Ctrl+C reaches it through the terminal).
  process.once('exit', () => child.kill());
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-2000);
  });
  const deadline = Date.now() + AZURITE_START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) {
      throw new EnvironmentError(
        `Azurite exited with code ${child.exitCode}: ${stderr.trim() || 'no output'}`,
      );
    }
    const ready = await Promise.all(AZURITE_PORTS.map((port) => answers(port)));
    if (ready.every(Boolean)) return child;
    if (Date.now() > deadline) {
      child.kill();
      throw new EnvironmentError(`Azurite did not listen within ${AZURITE_START_TIMEOUT_MS / 1000} s.`);
    }
    await sleep(200);
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill();
  await exited;
}

function answers(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host: HOST, port }, () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });
}

function shown(path: string): string {
  const near = relative(PROJECT_ROOT, resolve(path));
  return near.startsWith('..') ? path : near;
}

async function start(values: FlagValues<typeof FLAGS>, context: ToolContext): Promise<LocalServer> {
  const cosmosPort = numberFlag('cosmos-port', values['cosmos-port'], USAGE, { max: 65535, integer: true });
  const serviceBusPort = numberFlag('servicebus-port', values['servicebus-port'], USAGE, {
    max: 65535,
    integer: true,
  });
  const stack = await startLocalStack({
    cosmosPort,
    serviceBusPort,
    settingsPath: resolve(values.settings),
    force: values.force,
    azurite: !values['no-azurite'],
    out: context.out,
  });
  context.out('Now, in another terminal: npm run build && func start');
  return stack;
}

export const command = serverCommand('func:local', FLAGS, USAGE, start);

if (require.main === module) runCommand(command);
