import { app } from '@azure/functions';
import {
  type InboxConsumer,
  type OutboxRoutes,
  outboxRoutesOf,
  serviceBusHandler,
  type Topology,
  validateTopology,
} from '@idempotent-consumers/inbox/internal';
import { testConsumer, type TestMessage } from '@idempotent-consumers/inbox/testing';

import { inboxRuntime } from '../../src/app';

/**
 * A consumer function whose handler the test writes (`onHandle`), registered as src/app.ts
 * registers a consumer: the library's Service Bus handler on the app's runtime (the local Cosmos DB
 * server of the test), with the outbox routes of PROBE_TOPOLOGY instead of src/topology.json's, so
 * that the tests do not change with the sample. Load it as an entry point:
 * `await loadFunctionApp(PUBLISHER_PROBE)`; its function is `publisherProbe`.
 */
export const PUBLISHER_PROBE = __filename;

export const PROBE_TOPOLOGY: Topology = validateTopology({
  topics: [
    {
      name: 'orders',
      publishers: ['test.consumer'],
      unsubscribedSubjects: ['OrderAudited'],
      subscriptions: [
        { name: 'test.consumer', subjects: ['Test'] },
        { name: 'shipping.planner', subjects: ['OrderPlaced', 'OrderCancelled'] },
      ],
    },
    { name: 'audit', subscriptions: [{ name: 'audit.recorder', subjects: ['Recorded'] }] },
  ],
});

let handle: InboxConsumer<TestMessage>['handle'] = () => undefined;

/** What the probe's handler does on the next deliveries. */
export function onHandle(next: InboxConsumer<TestMessage>['handle']): void {
  handle = next;
}

const routes: OutboxRoutes = outboxRoutesOf('test.consumer', PROBE_TOPOLOGY);

app.serviceBusTopic('publisherProbe', {
  connection: 'ServiceBusConnection',
  topicName: 'orders',
  subscriptionName: 'test.consumer',
  handler: serviceBusHandler(
    testConsumer((message, tx, delivery) => handle(message, tx, delivery)),
    () => ({ ...inboxRuntime(), outboxRoutes: () => routes }),
  ),
});
