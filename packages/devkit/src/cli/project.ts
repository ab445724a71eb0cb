import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import {
  RETRY_PROPERTIES,
  RETRY_SUBJECT,
  type Topology,
  validateTopology,
} from '@idempotent-consumers/inbox/internal';
import type { FunctionAppEntry, RetryCopies } from '@idempotent-consumers/local-azure';

import { bounded } from './errors';
import { formatted } from './formatted';

/**
 * The project's root: the app whose functions/ the tools load, and which the build and the tools
 * read and change: the nearest folder, from where the command runs up, with the app's package.json
 * and host.json (npm runs a script from there, wherever the dev kit is installed). The one place
 * it is worked out.
 */
export const PROJECT_ROOT = projectRoot(process.cwd());

function projectRoot(start: string): string {
  for (let folder = path.resolve(start); ; folder = path.dirname(folder)) {
    if (existsSync(path.join(folder, 'host.json')) && existsSync(path.join(folder, 'package.json')))
      return folder;
    if (path.dirname(folder) === folder)
      throw new Error(
        `No Functions app here: neither ${bounded(start, 200)} nor a folder above it has host.json and package.json. Run the command from the app's folder.`,
      );
  }
}

/**
 * The app's function sources, as loadFunctionApp takes them and as the worker would load its built
 * app: each `.ts` or `.js` file of functions/ (no `.d.ts`), in name order, with the project as the
 * app directory. Read at each call.
 */
export function appFunctions(): FunctionAppEntry {
  const folder = path.join(PROJECT_ROOT, 'functions');
  const files = readdirSync(folder)
    .filter((file) => /\.(ts|js)$/.test(file) && !file.endsWith('.d.ts'))
    .sort()
    .map((file) => path.join(folder, file));
  return { directory: PROJECT_ROOT, files };
}

/**
 * The library's delayed-retry protocol as local Azure's Service Bus takes it (its retryCopies start
 * option): a subscription that declares delayedRetry also takes the copies scheduled for it.
 */
export const RETRY_COPIES: RetryCopies = { subject: RETRY_SUBJECT, forProperty: RETRY_PROPERTIES.for };

export const TOPOLOGY_PATH = path.join(PROJECT_ROOT, 'src', 'topology.json');

/** The app's topology: src/topology.json, read now and checked against the library's schema. */
export function appTopology(): Topology {
  return validateTopology(JSON.parse(readFileSync(TOPOLOGY_PATH, 'utf8')) as unknown);
}

/** Validates `topology` and writes it to src/topology.json, formatted. */
export async function writeTopology(topology: Topology): Promise<void> {
  validateTopology(topology);
  writeFileSync(TOPOLOGY_PATH, await formatted(TOPOLOGY_PATH, JSON.stringify(topology, null, 2)));
}

/** A path for the operator: relative to the project. */
export const relative = (file: string): string => path.relative(PROJECT_ROOT, file);
