import { writeFileSync } from 'node:fs';
import path from 'node:path';

import { type Topology, validateTopology } from '../src/topology';

/** The project the tools change: the checkout they are in. */
export const PROJECT_ROOT = path.join(__dirname, '..');
export const TOPOLOGY_PATH = path.join(PROJECT_ROOT, 'src', 'topology.json');

/** `text` as Prettier writes the file at `file` (the project's .prettierrc.json), so `npm run format:check` passes. */
export async function formatted(file: string, text: string): Promise<string> {
  // Loaded on use: Prettier's CommonJS entry imports its ES module, which a jest test file cannot.
  const { format, resolveConfig } = await import('prettier');
  return format(text, { ...(await resolveConfig(file)), filepath: file });
}

/** Validates `topology` and writes it to src/topology.json, formatted. */
export async function writeTopology(topology: Topology): Promise<void> {
  validateTopology(topology);
  writeFileSync(TOPOLOGY_PATH, await formatted(TOPOLOGY_PATH, JSON.stringify(topology, null, 2)));
}

/** A path for the operator: relative to the project. */
export const relative = (file: string): string => path.relative(PROJECT_ROOT, file);
