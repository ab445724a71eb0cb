import { app } from '@azure/functions';

import { consume } from '../src/app';
import { invoiceStatusProjector } from '../src/sample';

export const handler = consume(invoiceStatusProjector);

app.serviceBusTopic('invoiceStatusProjector', {
  connection: 'ServiceBusConnection',
  topicName: invoiceStatusProjector.topic,
  subscriptionName: invoiceStatusProjector.subscription,
  handler,
});
