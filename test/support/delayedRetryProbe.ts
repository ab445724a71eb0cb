import { randomUUID } from 'node:crypto';

import { app } from '@azure/functions';
import {
  bindingOf,
  type Delivery,
  serviceBusHandler,
  type Topology,
  validateTopology,
} from '@idempotent-consumers/inbox/internal';
import { testConsumer, type TestMessage } from '@idempotent-consumers/inbox/testing';

import { inboxRuntime } from '../../src/app';

/**
 * Two consumer functions on one topic, registered as src/app.ts registers a consumer (the library's
 * Service Bus handler on the app's runtime, whose retry scheduler is the app's own
 * @azure/service-bus publisher), with RETRY_TOPOLOGY instead of src/topology.json, so that the tests
 * do not change with the sample:
 *
 *   delayedRetryProbe  consumer `test.delayed-retry`, which declares delayedRetry; its handler
 *                      calls the test's dependency (`onCall`), then records one effect document
 *                      per application (`effect-<uuid>`, with the MessageId and Subject it saw)
 *   bystander          consumer `test.bystander`, the same subject without delayed retry: it must
 *                      never see a delayed copy (`bystanderSaw`)
 *
 * Load them as an entry point: `await loadFunctionApp(DELAYED_RETRY_PROBE)`.
 */
export const DELAYED_RETRY_PROBE = __filename;
export const RETRY_TOPIC = 'payments';

export const RETRY_TOPOLOGY: Topology = validateTopology({
  topics: [
    {
      name: RETRY_TOPIC,
      subscriptions: [
        {
          name: 'test.delayed-retry',
          subjects: ['PaymentReceived'],
          delayedRetry: { attempts: 2, firstDelaySeconds: 30, maxDelaySeconds: 45, afterDeliveries: 2 },
        },
        { name: 'test.bystander', subjects: ['PaymentReceived'] },
      ],
    },
  ],
});

let dependency: (delivery: Delivery) => Promise<void> = () => Promise.resolve();

/** What the probe's dependency does on the next calls (throw to fail the delivery). */
export function onCall(next: (delivery: Delivery) => Promise<void>): void {
  dependency = next;
}

/** The MessageIds the bystander received, with their Subject. */
export const bystanderSaw: { messageId: string | undefined; subject: string | undefined }[] = [];

const retrying = bindingOf('test.delayed-retry', RETRY_TOPOLOGY);

app.serviceBusTopic('delayedRetryProbe', {
  connection: 'ServiceBusConnection',
  topicName: retrying.topic,
  subscriptionName: retrying.subscription,
  handler: serviceBusHandler(
    testConsumer(
      async (_message: TestMessage, tx, delivery) => {
        await dependency(delivery);
        tx.create({
          id: `effect-${randomUUID()}`,
          type: 'effect',
          messageId: delivery.messageId,
          subject: delivery.subject ?? null,
          copy: delivery.retry?.copyMessageId ?? null,
        });
      },
      { name: 'test.delayed-retry' },
    ),
    inboxRuntime,
    { topic: retrying.topic, subscription: retrying.subscription, policy: retrying.delayedRetry! },
  ),
});

app.serviceBusTopic('bystander', {
  connection: 'ServiceBusConnection',
  topicName: RETRY_TOPIC,
  subscriptionName: 'test.bystander',
  handler: serviceBusHandler(
    testConsumer(
      (_message, _tx, delivery) => {
        bystanderSaw.push({ messageId: delivery.messageId, subject: delivery.subject });
      },
      { name: 'test.bystander' },
    ),
    inboxRuntime,
  ),
});
