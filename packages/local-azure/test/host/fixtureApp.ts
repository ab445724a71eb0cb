import { setTimeout as sleep } from 'node:timers/promises';

import { app } from '@azure/functions';

import { PAYMENTS, TOPIC } from '../../src/testing/peer';

/**
 * A function app for the trigger tests, independent of the sample: one Service Bus trigger whose
 * body says what to do ("ok", "slow", "throw", "hang"), and one timer. It counts what it sees.
 */
export const seen = { running: 0, maxRunning: 0, bodies: [] as string[], timerRuns: 0 };

app.serviceBusTopic('fixture-consumer', {
  connection: 'ServiceBusConnection',
  topicName: TOPIC,
  subscriptionName: PAYMENTS,
  handler: async (message) => {
    const body = String(message);
    seen.bodies.push(body);
    seen.running++;
    seen.maxRunning = Math.max(seen.maxRunning, seen.running);
    try {
      if (body === 'slow') await sleep(150);
      if (body === 'hang') await sleep(1500);
      if (body === 'throw') throw new Error('the fixture was told to throw');
    } finally {
      seen.running--;
    }
  },
});

app.timer('fixture-timer', {
  schedule: '* * * * * *',
  handler: (timer, context) => {
    seen.timerRuns++;
    context.log(`timer run ${seen.timerRuns}, past due: ${timer.isPastDue}`);
  },
});
