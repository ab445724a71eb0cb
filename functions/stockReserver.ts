import { app } from '@azure/functions';

import { consume } from '../src/app';
import { stockReserver } from '../src/sample';

app.serviceBusTopic('stockReserver', {
  connection: 'ServiceBusConnection',
  topicName: stockReserver.topic,
  subscriptionName: stockReserver.subscription,
  handler: consume(stockReserver),
});
