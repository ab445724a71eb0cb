import { type Topology, validateTopology } from '@idempotent-consumers/inbox/internal';

import declaration from './topology.json';

/**
 * The app's topics, subscriptions and publishers: src/topology.json, checked against the library's
 * schema (packages/inbox/src/topology.ts) when the app loads. The function registrations, the
 * app's tests and the sample read it from here; the dev kit reads the file itself, at run time.
 */
export const topology: Topology = validateTopology(declaration);
