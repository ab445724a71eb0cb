import { app } from '@azure/functions';

import { consume } from '../src/app';
import { paymentApplier } from '../src/sample';

app.serviceBusTopic('paymentApplier', {
  connection: 'ServiceBusConnection',
  topicName: paymentApplier.topic,
  subscriptionName: paymentApplier.subscription,
  handler: consume(paymentApplier),
});
