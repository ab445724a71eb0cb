import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

import { type Topology, validateTopology } from '@idempotent-consumers/inbox/internal';

import { PROJECT_ROOT } from '../cli/project';
import { processContext, type ToolContext } from '../cli/tool';

/**
 * The settings `npm start` writes for the other terminals: where its local Service Bus peer and
 * local Cosmos DB server listen, and the values the tools need to reach them. `npm run send`,
 * `npm run peek` and `npm run dead-letters` read it when their environment names neither Service
 * Bus nor Cosmos DB, so a user types no connection strings. LOCAL_RUN_FILE moves it (the
 * walkthrough test runs its own). The file is deleted when `npm start` stops, and ignored when the
 * process that wrote it is gone.
 */
export const LOCAL_RUN_FILE = 'LOCAL_RUN_FILE';
export const DEFAULT_LOCAL_RUN_FILE = join(PROJECT_ROOT, '.cache', 'local-run.json');

export interface LocalRun {
  /** The `npm start` process. */
  pid: number;
  startedAt: string;
  /**
   * Environment variables for the tools: SERVICEBUS_CONNECTION_STRING, COSMOS_*, INBOX_RETENTION,
   * SERVICEBUS_DUPLICATE_WINDOW and SERVICEBUS_CLOCK_SKEW (the defaults of dead-letters' flags).
   */
  environment: Record<string, string>;
  /**
   * The topics and subscriptions its local Service Bus serves: src/topology.json as it was when
   * the broker started or last reloaded it. `npm run send` warns when none of them takes a message.
   */
  topology?: Topology;
}

/** The variables that, when set, mean the operator chose a target: the local run file is then left alone. */
const TARGET_VARIABLES = ['SERVICEBUS_NAMESPACE', 'SERVICEBUS_CONNECTION_STRING', 'COSMOS_ENDPOINT'];

export function localRunPath(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return env[LOCAL_RUN_FILE]?.trim() || DEFAULT_LOCAL_RUN_FILE;
}

/** Writes the file atomically (a reader never sees half of it). */
export function writeLocalRun(path: string, run: LocalRun): void {
  mkdirSync(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.tmp`;
  writeFileSync(partial, `${JSON.stringify(run, null, 2)}\n`);
  renameSync(partial, path);
}

/** Deletes the file if the process `pid` wrote it (another npm start's stays). */
export function removeLocalRun(path: string, pid: number): void {
  let written: unknown;
  try {
    written = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return;
  }
  if (isLocalRun(written) && written.pid === pid) rmSync(path, { force: true });
}

/** The running `npm start`'s settings, or undefined when there is none (no file, or its process is gone). */
export function readLocalRun(path: string): LocalRun | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
  if (!isLocalRun(parsed) || !alive(parsed.pid)) return undefined;
  return parsed.topology === undefined ? parsed : { ...parsed, topology: validateTopology(parsed.topology) };
}

/**
 * A tool's context, with the running `npm start`'s settings under its environment when the
 * environment names no target of its own; it says so on stderr.
 */
export function localRunContext(
  context: ToolContext = processContext(),
): ToolContext & { localRun?: LocalRun } {
  if (TARGET_VARIABLES.some((name) => context.env[name]?.trim())) return context;
  const path = localRunPath(context.env);
  const run = readLocalRun(path);
  if (run === undefined) return context;
  context.err(`Using the app npm start runs (pid ${run.pid}; settings in ${shown(path)}).`);
  // The file's values win: a stray COSMOS_KEY in the shell must not break the local run's.
  return { ...context, env: { ...context.env, ...run.environment }, localRun: run };
}

function shown(path: string): string {
  const fromHere = relative(process.cwd(), path);
  return fromHere.startsWith('..') ? path : fromHere;
}

function isLocalRun(value: unknown): value is LocalRun {
  if (typeof value !== 'object' || value === null) return false;
  const { pid, environment } = value as Partial<LocalRun>;
  return (
    Number.isInteger(pid) &&
    typeof environment === 'object' &&
    environment !== null &&
    Object.values(environment).every((v) => typeof v === 'string')
  );
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
