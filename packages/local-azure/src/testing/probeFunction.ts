import { app } from '@azure/functions';

import { recordProbeDelivery } from './probe';

/** The probe functions (see probe.ts): an entry point for loadFunctionApp, never imported. */
app.serviceBusTopic('probe', {
  connection: 'ServiceBusConnection',
  topicName: 'events',
  subscriptionName: 'sub',
  handler: recordProbeDelivery,
});

app.timer('probeTimer', { schedule: '0 */5 * * * *', handler: recordProbeDelivery });
