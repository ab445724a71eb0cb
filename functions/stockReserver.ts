import { app } from '@azure/functions';

import { consume } from '../src/app';
import { stockReserver } from '../src/sample';

export const handler = consume(stockReserver);

app.serviceBusTopic('stockReserver', {
  connection: 'ServiceBusConnection',
  topicName: stockReserver.topic,
  subscriptionName: stockReserver.subscription,
  handler,
});
