import { app } from '@azure/functions';
import { testConsumer } from '@idempotent-consumers/inbox/testing';

import { consumerTrigger } from '../../src/app';
import { topology } from '../../src/topology';

/**
 * A consumer function for each subscription src/topology.json declares, registered as a function
 * file of functions/ registers its consumer (consumerTrigger), each a `testConsumer` that applies
 * nothing. For a test that declares its own topology in src/topology.json's place
 * (`jest.mock('../../src/topology.json', () => ({ topics: [...] }))`), so that it holds whatever
 * consumers the project has, the sample's or a user's. Load it as an entry point:
 * `await loadFunctionApp(DECLARED_CONSUMERS)`.
 */
export const DECLARED_CONSUMERS = __filename;

for (const { subscriptions } of topology.topics) {
  for (const { name } of subscriptions) {
    app.serviceBusTopic(...consumerTrigger(testConsumer(() => undefined, { name })));
  }
}
