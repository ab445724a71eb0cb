import { app } from '@azure/functions';

import { consume } from '../src/app';
import { invoiceStatusProjector } from '../src/sample';

app.serviceBusTopic('invoiceStatusProjector', {
  connection: 'ServiceBusConnection',
  topicName: invoiceStatusProjector.topic,
  subscriptionName: invoiceStatusProjector.subscription,
  handler: consume(invoiceStatusProjector),
});
