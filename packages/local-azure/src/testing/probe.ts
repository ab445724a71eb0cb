import { extname, join } from 'node:path';

import type { InvocationContext } from '@azure/functions';

/**
 * Two functions that record what the worker path hands them, then do what the test asked: `probe`, a
 * Service Bus trigger (topic `events`, subscription `sub`), and `probeTimer`, a timer. Load them as
 * an entry point, `await loadFunctionApp(PROBE_FUNCTION)`; this module only holds what they record,
 * so importing it registers no function.
 */
export interface ProbeDelivery {
  message: unknown;
  context: InvocationContext;
}

export const PROBE_FUNCTION = join(__dirname, `probeFunction${extname(__filename)}`);

/** What the probe functions received, oldest first; a test may empty it. */
export const probeDeliveries: ProbeDelivery[] = [];
let behaviour: (delivery: ProbeDelivery) => Promise<void> = () => Promise.resolve();

/** What the probe does after recording a delivery (default: return, so the message completes). */
export function onProbeDelivery(next: (delivery: ProbeDelivery) => Promise<void>): void {
  behaviour = next;
}

/** The probe functions' handler. */
export async function recordProbeDelivery(message: unknown, context: InvocationContext): Promise<void> {
  const delivery = { message, context };
  probeDeliveries.push(delivery);
  await behaviour(delivery);
}
