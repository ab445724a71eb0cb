import { writeFileSync } from 'node:fs';
import path from 'node:path';

import { type Topology, validateTopology } from '../src/topology';
import { formatted } from './formatted';

/** The project the tools change: the checkout they are in. */
export { PROJECT_ROOT } from '../local/project';
import { PROJECT_ROOT } from '../local/project';

export const TOPOLOGY_PATH = path.join(PROJECT_ROOT, 'src', 'topology.json');

/** Validates `topology` and writes it to src/topology.json, formatted. */
export async function writeTopology(topology: Topology): Promise<void> {
  validateTopology(topology);
  writeFileSync(TOPOLOGY_PATH, await formatted(TOPOLOGY_PATH, JSON.stringify(topology, null, 2)));
}

/** A path for the operator: relative to the project. */
export const relative = (file: string): string => path.relative(PROJECT_ROOT, file);
