import path from 'node:path';

import { ServiceBusAdministrationClient } from '@azure/service-bus';
import { PROJECT_ROOT, RETRY_COPIES } from '@idempotent-consumers/devkit';
import {
  bindingOf,
  longestRetryDelaySeconds,
  METRIC_NAMES,
  resolvedPolicy,
} from '@idempotent-consumers/inbox/internal';
import {
  loadFunctionApp,
  MetricsSink,
  type PeerFixture,
  startPeer,
  useLocalStack,
} from '@idempotent-consumers/local-azure';

import { inboxRuntime, registeredConsumers } from '../../src/app';
import { deployedEntitiesReader } from '../../src/serviceBusEntities';
import { topology } from '../../src/topology';
import { DECLARED_CONSUMERS } from '../support/declaredConsumers';

/**
 * The live drift guard (issue 25), through the worker's start-up path and the purge timer: the app
 * reads the deployed topics and subscriptions from the local peer's imitation of Azure Resource
 * Manager, and a subscription edited at run time with the real ServiceBusAdministrationClient (as
 * the portal would) is what it finds. The peer declares the app's own topology with the entity
 * values the app's settings default to (what the Bicep deploys).
 *
 * The app's consumers are this test's own, declared in src/topology.json's place, so that it holds
 * whatever consumers the project has (none after npm run remove:samples): one watched, one with a
 * delayed retry, which lengthens its bound.
 */
jest.mock('../../src/topology.json', () => ({
  topics: [
    {
      name: 'drift-events',
      subscriptions: [
        { name: 'test.watched', subjects: ['Watched'] },
        {
          name: 'test.retrying',
          subjects: ['Retried'],
          delayedRetry: { attempts: 3, firstDelaySeconds: 60 },
        },
      ],
    },
  ],
}));
/** The app as deployed with these consumers: their functions and the purge timer. */
const APP = [DECLARED_CONSUMERS, path.join(PROJECT_ROOT, 'functions', 'purge-expired-markers.ts')];

useLocalStack();
let fixture: PeerFixture;
let admin: ServiceBusAdministrationClient;
let sink: MetricsSink;

beforeAll(async () => {
  sink = MetricsSink.register(); // before the runtime builds its instruments
  fixture = await startPeer({
    retryCopies: RETRY_COPIES,
    topology,
    lockDurationMs: 60_000,
    maxDeliveryCount: 10,
    duplicateWindowMs: 3_600_000,
    // As infra/modules/servicebus.bicep deploys them: the topics keep no TTL (never)...
    messageTimeToLiveMs: Infinity,
  });
  // ...and the message TTL is each subscription's.
  for (const topic of fixture.peer.broker.topics.values()) {
    for (const subscription of topic.subscriptions) subscription.messageTimeToLiveMs = 14 * 86_400_000;
  }
  admin = new ServiceBusAdministrationClient(
    fixture.peer.connectionString,
    fixture.peer.administrationClientOptions,
  );
  Object.assign(process.env, {
    SERVICEBUS_RESOURCE_ID: fixture.peer.resourceManager.namespaceResourceId,
    AZURE_RESOURCE_MANAGER_ENDPOINT: fixture.peer.resourceManager.endpoint,
  });
  await loadFunctionApp(APP, { definitionsOnly: true });
});
afterAll(async () => {
  await sink.stop();
  delete process.env.SERVICEBUS_RESOURCE_ID;
  delete process.env.AZURE_RESOURCE_MANAGER_ENDPOINT;
  await fixture.stop();
});

/** The subscription the tests edit. */
function watched(): { topic: string; subscription: string } {
  return bindingOf('test.watched', topology);
}

/** Edits the subscription as someone in the portal would. */
async function edit(change: { lockDuration?: string; defaultMessageTimeToLive?: string }): Promise<void> {
  const { topic, subscription } = watched();
  const current = await admin.getSubscription(topic, subscription);
  await admin.updateSubscription({ ...current, ...change });
}

afterEach(() => edit({ lockDuration: 'PT1M', defaultMessageTimeToLive: 'P14D' }));

it('reads the deployed entities, which match the settings: the app starts, with nothing to say', async () => {
  const { topic, subscription } = watched();

  expect(inboxRuntime().deployedEntities).toBeDefined();
  const app = await loadFunctionApp(APP);

  expect(app.warnings).toEqual([]);
  const deployed = await inboxRuntime().deployedEntities!();
  expect(
    deployed.subscriptions.find((s) => s.topic === topic && s.subscription === subscription)?.properties,
  ).toMatchObject({ lockDuration: 'PT1M', maxDeliveryCount: 10, defaultMessageTimeToLive: 'P14D' });
  expect(deployed.topics.find((t) => t.topic === topic)?.properties).toMatchObject({
    requiresDuplicateDetection: true,
    duplicateDetectionHistoryTimeWindow: 'PT1H',
  });
});

it("carries each consumer's longest delayed-retry wait with its subscription, for the bound", async () => {
  const deployed = await inboxRuntime().deployedEntities!();
  expect([...registeredConsumers().keys()]).toEqual(['test.watched', 'test.retrying']);
  for (const name of registeredConsumers().keys()) {
    const { topic, subscription, delayedRetry } = bindingOf(name, topology);
    expect({
      subscription,
      wait: deployed.subscriptions.find((s) => s.topic === topic && s.subscription === subscription)
        ?.longestRetryDelaySeconds,
    }).toEqual({
      subscription,
      wait: delayedRetry === undefined ? undefined : longestRetryDelaySeconds(resolvedPolicy(delayedRetry)),
    });
  }
});

it('starts with a warning on drift that keeps the guarantee (a longer lock, still inside the retention)', async () => {
  await edit({ lockDuration: 'PT5M' });
  const { topic, subscription } = watched();
  // The warning is what this test reads (app.warnings); the terminal need not print it as well.
  const quiet = jest.spyOn(console, 'warn').mockImplementation(() => undefined);

  const app = await loadFunctionApp(APP).finally(() => quiet.mockRestore());

  expect(app.warnings).toEqual([
    `Service Bus ${topic}/${subscription} lockDuration is PT5M where SERVICEBUS_LOCK_DURATION=PT1M: the guarantee still holds; update the setting to match.`,
  ]);
});

it('refuses to start when an edited subscription lets a message come back after its marker is purged', async () => {
  // 1 min × 10 deliveries + 30 days + 7 days of resubmit margin reaches INBOX_RETENTION (30 days).
  await edit({ defaultMessageTimeToLive: 'P30D' });
  const { topic, subscription } = watched();

  await expect(loadFunctionApp(APP)).rejects.toThrow(
    `${topic}/${subscription} defaultMessageTimeToLive is P30D where SERVICEBUS_MESSAGE_TTL=P14D`,
  );
});

it('skips the purge of a running app while the drift is unsafe, and purges again once the subscription is restored', async () => {
  const running = await loadFunctionApp(APP);
  await edit({ defaultMessageTimeToLive: 'P30D' });

  const skipped = await running.invokeTimer('purge-expired-markers', {});
  await edit({ defaultMessageTimeToLive: 'P14D' });
  const ran = await running.invokeTimer('purge-expired-markers', {});

  expect(skipped.error).toBeUndefined();
  expect(skipped.logs.map((line) => line.text).join('\n')).toMatch(
    /Purge skipped: The deployed Service Bus entities/,
  );
  expect(ran.logs.map((line) => line.text).join('\n')).toMatch(/Purged \d+ expired markers/);
  expect(ran.logs.map((line) => line.text).join('\n')).not.toMatch(/Purge skipped/);
});

it('pauses the purge when SERVICEBUS_RESOURCE_ID names no namespace Resource Manager knows, saying so and counting it', async () => {
  const running = await loadFunctionApp(APP);
  const runtime = inboxRuntime();
  const read = runtime.deployedEntities;
  const wrong = `${fixture.peer.resourceManager.namespaceResourceId}-typo`;
  runtime.deployedEntities = () =>
    deployedEntitiesReader(
      { ...runtime.settings.serviceBus, resourceId: wrong },
      runtime.settings.cosmos.clientId,
    )!([...registeredConsumers().keys()].map((name) => bindingOf(name, topology)));
  const unreadable = () => sink.value(METRIC_NAMES.driftChecks, { when: 'purge', result: 'unreadable' });
  const before = await unreadable();
  try {
    const paused = await running.invokeTimer('purge-expired-markers', {});

    const error = paused.logs.find((line) =>
      line.text.includes('Purge paused: the drift guard could not read'),
    );
    expect(error?.level).toBe('error');
    expect(error?.text).toContain('404');
    expect(paused.logs.map((line) => line.text).join('\n')).not.toMatch(/Purged \d+ expired markers/);
    expect((await unreadable()) - before).toBe(1);
  } finally {
    runtime.deployedEntities = read;
  }
  const ran = await running.invokeTimer('purge-expired-markers', {});
  expect(ran.logs.map((line) => line.text).join('\n')).toMatch(/Purged \d+ expired markers/);
});
