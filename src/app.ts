import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import {
  app,
  type CosmosDBv4FunctionOptions,
  type ServiceBusTopicFunctionOptions,
  type TimerFunctionOptions,
} from '@azure/functions';
import {
  assertNoUnsafeDrift,
  assertWriteRegions,
  bindingOf,
  bounded,
  breakerLimits,
  CircuitBreaker,
  type Consumer,
  type ConsumerBinding,
  createCosmosClient,
  type DelayedRetryPolicy,
  delayedRetryProblems,
  type Drift,
  entityDrift,
  formatDuration,
  functionNameOf,
  hostJsonProblems,
  type InboxRuntime,
  InboxTelemetry,
  loadSettings,
  longestRetryDelaySeconds,
  type OutboxPublisher,
  outboxRelayHandler,
  outboxRoutesOf,
  outboxSweepHandler,
  purgeTimerHandler,
  resolvedPolicy,
  retentionBoundSeconds,
  type RetryScheduler,
  type ServiceBusHandler,
  serviceBusHandler,
  type Settings,
  SettingsError,
  sweepSchedule,
  systemClock,
  type TimerHandler,
} from '@idempotent-consumers/inbox/internal';

import type * as AzureMonitor from './azureMonitor';
import { deployedEntitiesReader } from './serviceBusEntities';
import type * as ServiceBusPublisher from './serviceBusPublisher';
import { topology } from './topology';

/**
 * The composition root: what the function files share. Loading it validates every setting, so an
 * unsafe configuration (for example a retention shorter than the redelivery bound) stops the app at
 * start-up with a clear message instead of running.
 */
const startupSettings = loadSettings(process.env);
checkHostJson(startupSettings);
// Registration first, telemetry right after: the host indexes the functions without waiting for the
// OpenTelemetry SDK, which then starts before the first invocation is read off the wire.
setImmediate(ensureAzureMonitor);

// The host awaits appStart hooks before it runs any trigger: a refusal here processes nothing.
app.hook.appStart(async () => {
  await checkWriteRegions();
  await checkDeployedEntities();
});

let runtime: InboxRuntime | undefined;

/** How long the account read may take at start-up: the worker's initialization allows 2 minutes. */
const WRITE_REGIONS_READ_MS = 15_000;

/**
 * Refuses to start against a Cosmos DB account that accepts writes in more than one region
 * (packages/inbox/src/writeRegions.ts), unless INBOX_ALLOW_MULTIPLE_WRITE_REGIONS=true. An account that
 * cannot be read is not refused: Cosmos DB unreachable is an outage, which the breaker rides out.
 */
export async function checkWriteRegions(): Promise<void> {
  const { container, settings } = inboxRuntime();
  let account;
  try {
    account = (
      await container.database.client.getDatabaseAccount({
        abortSignal: AbortSignal.timeout(WRITE_REGIONS_READ_MS),
      })
    ).resource;
  } catch (error) {
    const name = error instanceof Error ? error.name : typeof error;
    console.warn(
      `Could not read the Cosmos DB account's write regions at start-up (${bounded(name, 60)}); ` +
        'starting without that check (INBOX_ALLOW_MULTIPLE_WRITE_REGIONS).',
    );
    return;
  }
  if (account !== undefined) assertWriteRegions(account, settings.cosmos.allowMultipleWriteRegions);
}

/**
 * Refuses to start when the deployed topics and subscriptions the consumers read from have drifted
 * from the settings in a way that breaks the guarantee (packages/inbox/src/entityDrift.ts); drift that does
 * not is counted and warned about. Entities that cannot be read (a refused or failed read) are not
 * drift: the app starts, with a warning, and the purge waits until a read succeeds. Each check is
 * counted (inbox.drift_checks: checked, unreadable, or off without SERVICEBUS_RESOURCE_ID).
 */
export async function checkDeployedEntities(): Promise<void> {
  const { settings, telemetry, deployedEntities } = inboxRuntime();
  if (deployedEntities === undefined) {
    telemetry.driftCheck('start', 'off');
    return;
  }
  let drifts: Drift[];
  try {
    drifts = entityDrift(settings, await deployedEntities());
  } catch (error) {
    telemetry.driftCheck('start', 'unreadable');
    console.warn(
      `Could not read the deployed Service Bus entities at start-up (${bounded(error instanceof Error ? error.message : String(error), 300)}); ` +
        'starting without the drift check. The purge waits until the guard can read them (check SERVICEBUS_RESOURCE_ID and the Reader role).',
    );
    return;
  }
  telemetry.driftCheck('start', 'checked');
  telemetry.entityDrift(drifts);
  for (const { entity, property, deployed, setting, expected } of drifts.filter((drift) => !drift.unsafe)) {
    console.warn(
      `Service Bus ${bounded(entity, 120)} ${property} is ${deployed} where ${setting}=${expected}: the guarantee still holds; update the setting to match.`,
    );
  }
  assertNoUnsafeDrift(drifts);
}

/** The topics and subscriptions the registered consumers read from, with their delayed retry. */
function consumerBindings(): ConsumerBinding[] {
  return [...consumers.keys()].map((name) => bindingOf(name, topology));
}

/** Built on first use: one Cosmos DB client and one set of metric instruments per process. */
export function inboxRuntime(): InboxRuntime {
  if (runtime) return runtime;
  ensureAzureMonitor();
  const settings = loadSettings(process.env);
  const container = createCosmosClient(settings.cosmos)
    .database(settings.cosmos.database)
    .container(settings.cosmos.container);
  const telemetry = new InboxTelemetry();
  const built: InboxRuntime = {
    container,
    settings,
    telemetry,
    ...deferredPublisher(settings),
    ...deployedEntitiesOf(settings),
    now: () => new Date(),
    sleep: (ms) => sleep(ms),
    random: Math.random,
    onEtagRetry: (consumer) => telemetry.etagRetry(consumer),
    // The Bicep grants the app Data Sender on these topics (and on those of delayedRetry subscriptions) only.
    outboxRoutes: (consumer) => outboxRoutesOf(consumer, topology),
    // Looked up per call: the offline host swaps in a breaker on its model clock.
    beforeStore: () => built.breaker.hold(),
    breaker: new CircuitBreaker({
      limits: breakerLimits(settings),
      clock: systemClock,
      random: Math.random,
      // A point read of an id that never exists: about 1 RU, answered 404 while Cosmos DB serves.
      probe: () => container.item('inbox-breaker-probe', 'inbox-breaker-probe').read(),
      onTransition: ({ state }) => telemetry.breakerTransition(state),
    }),
  };
  telemetry.observeBreaker(() => built.breaker.state === 'open');
  runtime = built;
  return runtime;
}

/**
 * The breaker's limits come from HOST_MAX_AUTO_LOCK_RENEWAL and HOST_FUNCTION_TIMEOUT: refuse to
 * start when host.json (next to the deployed app.js, or at the project root) says otherwise.
 */
function checkHostJson(settings: ReturnType<typeof loadSettings>): void {
  const path = [join(__dirname, 'host.json'), join(__dirname, '..', 'host.json')].find(existsSync);
  if (path === undefined) return;
  const problems = hostJsonProblems(settings, JSON.parse(readFileSync(path, 'utf8')) as unknown);
  if (problems.length > 0) throw new SettingsError(problems);
}

const consumers = new Map<string, Consumer>();

/**
 * The function name and trigger options `app.serviceBusTopic` takes for a consumer: its function
 * reads the consumer's subscription (src/topology.json) with the `ServiceBusConnection` settings.
 * A function file is its three imports and:
 *
 *   app.serviceBusTopic(...consumerTrigger(paymentApplier));
 *
 * The file is `functions/<function name>.ts`, the function name being the consumer's name with '-'
 * for '.' (functionNameOf). The consumer is recorded, so tools and tests that load the app through
 * the worker find every consumer with `registeredConsumers()`: there is no other list.
 */
export function consumerTrigger(
  consumer: Consumer,
): [functionName: string, options: ServiceBusTopicFunctionOptions] {
  const { topic, subscription, delayedRetry } = bindingOf(consumer.name, topology);
  if (delayedRetry !== undefined) checkDelayedRetry(subscription, delayedRetry);
  const handler: ServiceBusHandler = serviceBusHandler(
    consumer,
    inboxRuntime,
    delayedRetry === undefined ? undefined : { topic, subscription, policy: delayedRetry },
  );
  consumers.set(consumer.name, consumer);
  return [
    functionNameOf(consumer.name),
    { connection: 'ServiceBusConnection', topicName: topic, subscriptionName: subscription, handler },
  ];
}

/**
 * Refuses a delayed-retry policy the settings cannot carry: its immediate retries must leave a
 * delivery to schedule from (afterDeliveries < SERVICEBUS_MAX_DELIVERY_COUNT), and a marker must
 * outlive the longest delay, since a copy scheduled just before its original succeeded arrives that
 * much later than the bound counts (INBOX_RETENTION > the retention bound + the longest delay).
 */
export function checkDelayedRetry(
  subscription: string,
  policy: DelayedRetryPolicy,
  { redelivery, inbox }: Pick<Settings, 'redelivery' | 'inbox'> = startupSettings,
): void {
  const problems = delayedRetryProblems(subscription, policy, redelivery.maxDeliveryCount).map(
    (problem) =>
      `src/topology.json: ${problem} (SERVICEBUS_MAX_DELIVERY_COUNT=${redelivery.maxDeliveryCount})`,
  );
  if (problems.length === 0) {
    const bound = retentionBoundSeconds(redelivery);
    const longest = longestRetryDelaySeconds(resolvedPolicy(policy));
    const needed = bound + longest;
    if (inbox.retentionSeconds <= needed)
      problems.push(
        `INBOX_RETENTION=${formatDuration(inbox.retentionSeconds)} does not outlive subscription '${subscription}''s delayed retries: ` +
          `the retention bound ${formatDuration(bound)} + its longest delay ${formatDuration(Math.ceil(longest))}. ` +
          `Raise INBOX_RETENTION above ${formatDuration(Math.ceil(needed))}, or shorten maxDelaySeconds.`,
      );
  }
  if (problems.length > 0) throw new SettingsError(problems);
}

/** The consumers the loaded function files registered with consumerTrigger, by name. */
export function registeredConsumers(): ReadonlyMap<string, Consumer> {
  return consumers;
}

export const purge: TimerHandler = purgeTimerHandler(inboxRuntime);

/**
 * The outbox relay's registration (`app.cosmosDB(...outboxRelayTrigger())`): a Cosmos DB trigger
 * on the app's container, with its leases in COSMOS_LEASE_CONTAINER, signed in through the
 * `CosmosDBConnection__*` settings (the identity). A page whose relay throws is retried with an
 * exponential backoff, 8 times (from 5 s up to 5 min apart, about 11 minutes in all); then the
 * checkpoint moves on and the sweeper resends what is still pending (README "Publishing events").
 * It starts from the beginning of the change feed the first time it runs (no lease yet), so an
 * outbox document committed before the first deployment of the relay is sent too.
 */
export function outboxRelayTrigger(): [functionName: string, options: CosmosDBv4FunctionOptions] {
  const { cosmos } = startupSettings;
  return [
    'outbox-relay',
    {
      connection: 'CosmosDBConnection',
      databaseName: cosmos.database,
      containerName: cosmos.container,
      leaseContainerName: cosmos.leaseContainer,
      createLeaseContainerIfNotExists: false,
      startFromBeginning: true,
      maxItemsPerInvocation: 100,
      retry: {
        strategy: 'exponentialBackoff',
        maxRetryCount: 8,
        minimumInterval: { seconds: 5 },
        maximumInterval: { minutes: 5 },
      },
      handler: outboxRelayHandler(inboxRuntime),
    },
  ];
}

/** The outbox sweeper's registration (`app.timer(...outboxSweeperTimer())`), every OUTBOX_SWEEP_INTERVAL. */
export function outboxSweeperTimer(): [functionName: string, options: TimerFunctionOptions] {
  return [
    'outbox-sweeper',
    {
      // loadSettings refuses an interval no schedule repeats evenly, so there is always one.
      schedule: sweepSchedule(startupSettings) ?? '0 * * * * *',
      runOnStartup: false,
      handler: outboxSweepHandler(inboxRuntime),
    },
  ];
}

/**
 * The outbox relay's Service Bus publisher, which also schedules the delayed retries' copies, loaded
 * at the first send: `@azure/service-bus` is a separate file in the deployment package (see
 * ./serviceBusPublisher.ts), off the start-up path.
 */
function deferredPublisher(settings: ReturnType<typeof loadSettings>): {
  publisher: OutboxPublisher;
  retryScheduler: RetryScheduler;
} {
  let publisher: ReturnType<ServiceBusPublisherModule['serviceBusPublisher']> | undefined;
  const loaded = (): NonNullable<typeof publisher> => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- deferred on purpose
    const { serviceBusPublisher } = require('./serviceBusPublisher') as ServiceBusPublisherModule;
    publisher ??= serviceBusPublisher(settings);
    return publisher;
  };
  return {
    publisher: {
      send: (topic, messages) => loaded().send(topic, messages),
      close: () => publisher?.close() ?? Promise.resolve(),
    },
    retryScheduler: { schedule: (topic, message, at) => loaded().schedule(topic, message, at) },
  };
}

/** The drift guard's reader of the deployed entities, when the app knows its namespace's resource id. */
function deployedEntitiesOf(
  settings: ReturnType<typeof loadSettings>,
): Pick<InboxRuntime, 'deployedEntities'> {
  const read = deployedEntitiesReader(settings.serviceBus, settings.cosmos.clientId);
  if (read === undefined) return {};
  return {
    deployedEntities: async () => {
      const bindings = consumerBindings();
      const deployed = await read(bindings);
      // A subscription's delayed retry lengthens its bound (packages/inbox/src/entityDrift.ts).
      const delays = new Map(
        bindings.flatMap(({ topic, subscription, delayedRetry }) =>
          delayedRetry === undefined
            ? []
            : [[`${topic}/${subscription}`, longestRetryDelaySeconds(resolvedPolicy(delayedRetry))] as const],
        ),
      );
      return {
        ...deployed,
        subscriptions: deployed.subscriptions.map((entity) => {
          const delay = delays.get(`${entity.topic}/${entity.subscription}`);
          return delay === undefined ? entity : { ...entity, longestRetryDelaySeconds: delay };
        }),
      };
    },
  };
}

type ServiceBusPublisherModule = typeof ServiceBusPublisher;
type AzureMonitorModule = typeof AzureMonitor;
let azureMonitorStarted = false;

/**
 * Starts Azure Monitor once, before any metric instrument exists: the OpenTelemetry metrics API has
 * no proxy, so an instrument created before the provider is registered would stay a no-op.
 */
function ensureAzureMonitor(): void {
  if (azureMonitorStarted) return;
  azureMonitorStarted = true;
  // Without a connection string nothing would be sent: the SDK is not even loaded.
  if (!process.env.APPLICATIONINSIGHTS_CONNECTION_STRING?.trim()) return;
  // A separate file in the deployment package (see packages/devkit/src/build/package.ts), loaded only now.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- deferred on purpose
  const { startAzureMonitor } = require('./azureMonitor') as AzureMonitorModule;
  startAzureMonitor(process.env);
}
