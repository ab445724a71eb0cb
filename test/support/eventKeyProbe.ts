import { app } from '@azure/functions';
import { defineInboxConsumer } from '@idempotent-consumers/inbox';
import { type EventKeyConflict, serviceBusHandler } from '@idempotent-consumers/inbox/internal';
import { z } from 'zod';

import { inboxRuntime } from '../../src/app';

/**
 * Two consumer functions that declare an event key (the payment's `paymentId`), registered as
 * src/app.ts registers a consumer: `eventKeyAbsorb` (consumer `test.event-key-absorb`) and
 * `eventKeyFlag` (`test.event-key-flag`). Each records the message it applies as a document of its
 * own (`applied-<MessageId>`). Load them as an entry point: `await loadFunctionApp(EVENT_KEY_PROBE)`.
 */
export const EVENT_KEY_PROBE = __filename;

export const KeyedPayment = z.object({ accountId: z.string(), paymentId: z.string() });

function keyedConsumer(onConflict: EventKeyConflict) {
  return defineInboxConsumer({
    name: `test.event-key-${onConflict}`,
    schema: KeyedPayment,
    partitionKey: (payment) => `account:${payment.accountId}`,
    eventKey: { of: (payment) => payment.paymentId, onConflict },
    handle(payment, tx, { messageId }) {
      tx.create({ id: `applied-${messageId}`, type: 'applied', paymentId: payment.paymentId });
    },
  });
}

for (const [name, onConflict] of [
  ['eventKeyAbsorb', 'absorb'],
  ['eventKeyFlag', 'flag'],
] as const) {
  app.serviceBusTopic(name, {
    connection: 'ServiceBusConnection',
    topicName: 'payments',
    subscriptionName: `test.event-key-${onConflict}`,
    handler: serviceBusHandler(keyedConsumer(onConflict), inboxRuntime),
  });
}
