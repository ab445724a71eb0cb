import { writeFileSync } from 'node:fs';
import path from 'node:path';

import { type FunctionAppEntry, functionSources } from '@idempotent-consumers/local-azure';

import { type Topology, validateTopology } from '../../../../src/topology';
import { formatted } from './formatted';

/**
 * The project's root: the checkout whose functions/ the tools load, and which the build and the
 * tools read and change. The one place it is worked out.
 */
export const PROJECT_ROOT = path.join(__dirname, '..', '..', '..', '..');

/** The app's function sources (functions/*.ts), as loadFunctionApp takes them: read at each call. */
export const appFunctions = (): FunctionAppEntry => functionSources(PROJECT_ROOT);

export const TOPOLOGY_PATH = path.join(PROJECT_ROOT, 'src', 'topology.json');

/** Validates `topology` and writes it to src/topology.json, formatted. */
export async function writeTopology(topology: Topology): Promise<void> {
  validateTopology(topology);
  writeFileSync(TOPOLOGY_PATH, await formatted(TOPOLOGY_PATH, JSON.stringify(topology, null, 2)));
}

/** A path for the operator: relative to the project. */
export const relative = (file: string): string => path.relative(PROJECT_ROOT, file);
