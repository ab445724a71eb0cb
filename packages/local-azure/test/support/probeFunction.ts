import { app, type InvocationContext } from '@azure/functions';

/**
 * Two functions that record what the worker path hands them, then do what the test asked: `probe`,
 * a Service Bus trigger (topic `events`, subscription `sub`), and `probeTimer`, a timer. Load them
 * as an entry point: `await loadFunctionApp(PROBE_FUNCTION)`.
 */
export interface Received {
  message: unknown;
  context: InvocationContext;
}

export const PROBE_FUNCTION = __filename;
export const received: Received[] = [];
let behaviour: (received: Received) => Promise<void> = () => Promise.resolve();

/** What the probe does after recording a delivery (default: return, so the message completes). */
export function onDelivery(next: (received: Received) => Promise<void>): void {
  behaviour = next;
}

async function record(message: unknown, context: InvocationContext): Promise<void> {
  const delivery = { message, context };
  received.push(delivery);
  await behaviour(delivery);
}

app.serviceBusTopic('probe', {
  connection: 'ServiceBusConnection',
  topicName: 'events',
  subscriptionName: 'sub',
  handler: record,
});

app.timer('probeTimer', { schedule: '0 */5 * * * *', handler: record });
