import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import Module from 'node:module';
import { dirname, join, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { format } from 'node:util';

import type { InvocationResult, LogLine, RegisteredFunction, RpcRetryContext } from './core';
import * as core from './core';
import { cosmosDBInvocationRequest } from './toRpcCosmosDB';
import { type ServiceBusDelivery, serviceBusInvocationRequest } from './toRpcServiceBus';
import { timerInvocationRequest, type TimerRun } from './toRpcTimer';

/**
 * The function app as the Azure Functions Node.js worker runs it, offline: the worker's
 * `@azure/functions-core` (./core.ts) is injected, the entry points are loaded so that
 * `@azure/functions` registers each function through it, and every invocation is an RPC
 * `InvocationRequest` shaped as the Functions host sends it (./toRpcServiceBus.ts, ./toRpcTimer.ts, ./toRpcCosmosDB.ts), run through the
 * library's own InvocationModel. This is the only way the offline stack and the tests invoke a
 * function.
 */
export type { InvocationResult, LogLine, RegisteredFunction, RpcRetryContext, ServiceBusDelivery, TimerRun };

/** A Service Bus trigger as registered (the template's are topic subscriptions). */
export interface ServiceBusFunction {
  name: string;
  connection: string;
  topicName?: string;
  subscriptionName?: string;
  queueName?: string;
}

export interface TimerFunction {
  name: string;
  schedule: string;
  runOnStartup: boolean;
}

/**
 * A Cosmos DB trigger as registered (`app.cosmosDB`): the options the extension reads, and the
 * function's retry policy as the host gets it (the library sends intervals in whole seconds,
 * rounded: `toRpcDuration`).
 */
export interface CosmosDBFunction {
  name: string;
  connection: string;
  databaseName: string;
  containerName: string;
  leaseContainerName: string;
  /** The extension's processor name; default ''. */
  leaseContainerPrefix: string;
  createLeaseContainerIfNotExists: boolean;
  /** Default: none set (the service's page size). */
  maxItemsPerInvocation?: number;
  startFromBeginning: boolean;
  /** Milliseconds between polls of an empty feed; default: none set (the processor's 5 s). */
  feedPollDelay?: number;
  retry?: RetryPolicy;
}

export type RetryPolicy =
  | { strategy: 'fixedDelay'; maxRetryCount: number; delayIntervalMs: number }
  | {
      strategy: 'exponentialBackoff';
      maxRetryCount: number;
      minimumIntervalMs: number;
      maximumIntervalMs: number;
    };

export interface FunctionApp {
  /** Every registered function, with its metadata as the worker holds it. */
  functions: RegisteredFunction[];
  /** What was written with console.warn or console.error while loading (e.g. the "test mode" warning). */
  warnings: string[];
  serviceBus: ServiceBusFunction[];
  timers: TimerFunction[];
  cosmosDB: CosmosDBFunction[];
  invokeServiceBus: typeof invokeServiceBus;
  invokeTimer: typeof invokeTimer;
  invokeCosmosDB: typeof invokeCosmosDB;
}

const CORE_MODULE = '@azure/functions-core';
let installed = false;
// As in the worker, before any app code runs: a module that registers functions may be imported
// right after this one, and the library decides once whether it runs in test mode.
installCoreModule();

/**
 * The worker's `setupCoreModule`: `require('@azure/functions-core')` returns the stand-in, from
 * any module of the process. For plain Node.js (and tsx); jest bypasses Module.prototype.require,
 * so jest.config.js maps the name to the same file instead.
 */
export function installCoreModule(): void {
  if (installed) return;
  installed = true;
  const prototype = Module.prototype as unknown as { require: (id: string) => unknown };
  prototype.require = new Proxy(prototype.require, {
    apply(target, thisArg, args: [string]) {
      return args[0] === CORE_MODULE ? core : Reflect.apply(target, thisArg, args);
    },
  });
}

/**
 * Loads the app as the worker does and returns what it registered. `entry` is a function app
 * directory (its package.json `main` is loaded, a `*` in the file name allowed, as the worker's
 * glob), entry point files, or an app directory with the files to load from it (a project's
 * `functions/*.ts` sources, as the dev kit's appFunctions lists them). Modules are
 * cached: within one process (or one jest test file) the app is loaded once, and a later call
 * returns the same registrations. `definitionsOnly` loads the app to read what it registered and
 * does not start it: its `appStart` hooks (which may reach Azure) do not run.
 */
export async function loadFunctionApp(
  entry: FunctionAppEntry,
  options: { definitionsOnly?: boolean } = {},
): Promise<FunctionApp> {
  installCoreModule();
  const { directory, files } = entryPoints(entry);
  const warnings: string[] = [];
  const restore = captureConsole(warnings);
  try {
    await core.startApp(directory, files, loadScriptFile, options);
  } finally {
    restore();
  }
  const functions = core.registeredFunctions();
  const serviceBus: ServiceBusFunction[] = [];
  const timers: TimerFunction[] = [];
  const cosmosDB: CosmosDBFunction[] = [];
  for (const { name, metadata } of functions) {
    const trigger = Object.values(metadata.bindings).find((binding) => /trigger$/i.test(binding.type ?? ''));
    const option = (key: string): string | undefined =>
      typeof trigger?.[key] === 'string' ? trigger[key] : undefined;
    const number = (key: string): number | undefined =>
      typeof trigger?.[key] === 'number' ? trigger[key] : undefined;
    if (trigger?.type === 'serviceBusTrigger') {
      serviceBus.push({
        name,
        connection: option('connection') ?? '',
        ...optional('topicName', option('topicName')),
        ...optional('subscriptionName', option('subscriptionName')),
        ...optional('queueName', option('queueName')),
      });
    } else if (trigger?.type === 'timerTrigger') {
      timers.push({ name, schedule: option('schedule') ?? '', runOnStartup: trigger.runOnStartup === true });
    } else if (trigger?.type === 'cosmosDBTrigger') {
      const retry = retryPolicy(metadata.retryOptions);
      const maxItemsPerInvocation = number('maxItemsPerInvocation');
      const feedPollDelay = number('feedPollDelay');
      cosmosDB.push({
        name,
        connection: option('connection') ?? '',
        databaseName: option('databaseName') ?? '',
        containerName: option('containerName') ?? '',
        leaseContainerName: option('leaseContainerName') ?? 'leases',
        leaseContainerPrefix: option('leaseContainerPrefix') ?? '',
        createLeaseContainerIfNotExists: trigger.createLeaseContainerIfNotExists === true,
        ...(maxItemsPerInvocation === undefined ? {} : { maxItemsPerInvocation }),
        startFromBeginning: trigger.startFromBeginning === true,
        ...(feedPollDelay === undefined ? {} : { feedPollDelay }),
        ...(retry === undefined ? {} : { retry }),
      });
    }
  }
  return { functions, warnings, serviceBus, timers, cosmosDB, invokeServiceBus, invokeTimer, invokeCosmosDB };
}

/**
 * What the host does when the app's files change: it stops the worker (its `appTerminate` hooks
 * run) and starts a new one, which loads the app afresh. Here that is one process: the app's
 * modules under `directory` leave the module cache, and the app is loaded again from it.
 */
export async function reloadFunctionApp(directory: string): Promise<FunctionApp> {
  await core.terminateApp();
  const root = resolve(directory);
  for (const file of Object.keys(require.cache)) {
    if (file.startsWith(`${root}${sep}`) || file === root) delete require.cache[file];
  }
  return loadFunctionApp(root);
}

/**
 * One invocation with a page of the change feed; a thrown error is a failed invocation (the host
 * retries it per the function's policy, then checkpoints past it anyway). `retryContext` is the
 * host's, for a function with a retry policy.
 */
export function invokeCosmosDB(
  name: string,
  documents: readonly unknown[],
  retryContext?: RpcRetryContext,
): Promise<InvocationResult> {
  return core.invokeFunction(cosmosDBInvocationRequest(registered(name), documents, retryContext));
}

/** One delivery of a Service Bus message to a registered function; a thrown error means the host abandons it. */
export function invokeServiceBus(name: string, delivery: ServiceBusDelivery): Promise<InvocationResult> {
  return core.invokeFunction(serviceBusInvocationRequest(registered(name), delivery));
}

/** One run of a registered timer function. */
export function invokeTimer(name: string, run: TimerRun = {}): Promise<InvocationResult> {
  return core.invokeFunction(timerInvocationRequest(registered(name), run));
}

/** The outcome an inbox consumer logged for a delivery (its log lines end with JSON fields). */
export function loggedOutcome(logs: readonly LogLine[]): string | undefined {
  return loggedField(logs, 'outcome');
}

/** A word-like field of the last log line that has it (`outcome`, `alternative`, ...). */
export function loggedField(logs: readonly LogLine[], field: string): string | undefined {
  const pattern = new RegExp(`"${field}":"([\\w.-]{1,64})"`);
  for (let i = logs.length - 1; i >= 0; i--) {
    const match = pattern.exec(logs[i]?.text ?? '');
    if (match) return match[1];
  }
  return undefined;
}

function registered(name: string): RegisteredFunction {
  const found = core.registeredFunctions().find((f) => f.metadata.functionId === name || f.name === name);
  if (!found)
    throw new Error(`No function "${name}" is registered; load the app with loadFunctionApp() first.`);
  return found;
}

/** The library's RpcRetryOptions (`toCoreFunctionMetadata`): the strategy, and durations as `{ seconds }`. */
function retryPolicy(options: unknown): RetryPolicy | undefined {
  if (typeof options !== 'object' || options === null) return undefined;
  const rpc = options as Record<string, unknown>;
  const ms = (key: string): number => {
    const duration = rpc[key] as { seconds?: number } | undefined;
    return (duration?.seconds ?? 0) * 1000;
  };
  const maxRetryCount = typeof rpc.maxRetryCount === 'number' ? rpc.maxRetryCount : 0;
  if (rpc.retryStrategy === 'fixedDelay') {
    return { strategy: 'fixedDelay', maxRetryCount, delayIntervalMs: ms('delayInterval') };
  }
  if (rpc.retryStrategy === 'exponentialBackoff') {
    return {
      strategy: 'exponentialBackoff',
      maxRetryCount,
      minimumIntervalMs: ms('minimumInterval'),
      maximumIntervalMs: ms('maximumInterval'),
    };
  }
  return undefined;
}

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}

/** What loadFunctionApp loads: a function app directory, entry point files, or both. */
export type FunctionAppEntry = string | readonly string[] | { directory: string; files: readonly string[] };

function entryPoints(entry: FunctionAppEntry): { directory: string; files: readonly string[] } {
  if (typeof entry === 'object' && 'directory' in entry) return entry;
  const entries = (typeof entry === 'string' ? [entry] : entry).map((path) => resolve(path));
  const appDirectory = entries.find((path) => statSync(path).isDirectory());
  if (appDirectory) return { directory: appDirectory, files: mainFiles(appDirectory) };
  return { directory: dirname(entries[0] ?? '.'), files: entries };
}

/** The worker's entry point: package.json `main`, a file or a pattern such as `dist/functions/*.js`. */
function mainFiles(directory: string): string[] {
  const main = (readPackageJson(directory).main as string | undefined) ?? 'index.js';
  const path = join(directory, main);
  if (!main.includes('*')) {
    if (!existsSync(path))
      throw new Error(`Worker was unable to load entry point "${main}": File does not exist`);
    return [path];
  }
  const folder = dirname(path);
  const pattern = new RegExp(
    `^${path
      .slice(folder.length + 1)
      .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')}$`,
  );
  const files = existsSync(folder)
    ? readdirSync(folder)
        .filter((file) => pattern.test(file))
        .sort()
    : [];
  if (files.length === 0) {
    throw new Error(
      `Worker was unable to load entry point "${main}": Found zero files matching the supplied pattern`,
    );
  }
  return files.map((file) => join(folder, file));
}

/** The worker's loadScriptFile: `import()` for an ES module, `require` otherwise. */
async function loadScriptFile(file: string): Promise<unknown> {
  const esModule = file.endsWith('.mjs') || (!file.endsWith('.cjs') && nearestPackageType(file) === 'module');
  if (esModule) return import(pathToFileURL(file).href);
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the worker loads CommonJS entry points with require
  return require(file);
}

function nearestPackageType(file: string): unknown {
  for (let folder = dirname(file); ; folder = dirname(folder)) {
    if (existsSync(join(folder, 'package.json'))) return readPackageJson(folder).type;
    if (dirname(folder) === folder) return undefined;
  }
}

function readPackageJson(directory: string): Record<string, unknown> {
  const path = join(directory, 'package.json');
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>) : {};
}

/** Records console.warn and console.error output (still printing it) until the returned function is called. */
function captureConsole(lines: string[]): () => void {
  const { warn, error } = console;
  const recording =
    (print: (...args: unknown[]) => void) =>
    (...args: unknown[]): void => {
      lines.push(format(...args));
      print.apply(console, args);
    };
  console.warn = recording(warn);
  console.error = recording(error);
  return () => Object.assign(console, { warn, error });
}
