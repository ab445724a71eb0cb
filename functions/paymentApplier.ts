import { app } from '@azure/functions';

import { consume } from '../src/app';
import { paymentApplier } from '../src/sample';

export const handler = consume(paymentApplier);

app.serviceBusTopic('paymentApplier', {
  connection: 'ServiceBusConnection',
  topicName: paymentApplier.topic,
  subscriptionName: paymentApplier.subscription,
  handler,
});
