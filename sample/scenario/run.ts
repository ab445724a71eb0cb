import { createHash } from 'node:crypto';

import { type Container, CosmosClient, type CosmosClientOptions } from '@azure/cosmos';
import {
  appFunctions,
  appOnSimulation,
  type BrokerRetryScheduler,
  RETRY_COPIES,
  settled,
} from '@idempotent-consumers/devkit';
import {
  functionNameOf,
  type InboxRuntime,
  MARKER_TYPE,
  OUTBOX_TYPE,
  survivableOutageSeconds,
} from '@idempotent-consumers/inbox/internal';
import {
  Broker,
  type ChangeFeedFaults,
  ChangeFeedTrigger,
  type Clock,
  type CosmosDBFunction,
  type DeliveryRecord,
  type FaultHandle,
  freshAppContainer,
  type FunctionApp,
  FunctionsHost,
  type HostFaults,
  loadFunctionApp,
  type LocalCosmos,
  type LogLine,
  seededRandom,
  Simulation,
  simulationClientOptions,
  startCosmos,
  type Topic,
} from '@idempotent-consumers/local-azure';

import type * as App from '../../src/app';
import { topology } from '../../src/topology';
import { brokerMessageKey, type CauseTable, duplicateCauses, type MarkerWrite } from './causes';
import { BrokerPublisher, type PublisherFaults } from './publisher';
import { type Accounting, type Invariant, retryOriginals, type SweepRecord, verify } from './verify';
import { generateWorkload, type Workload, type WorkloadOptions } from './workload';

/**
 * One run of the whole pipeline offline: the local Cosmos DB server, the Service Bus model, the
 * Functions host model invoking the registered functions through the worker path, a seeded
 * workload with faults, and the invariants checked at the end. The run is deterministic: model
 * time is virtual and every party takes its turn (see simulation.ts), every choice comes from the
 * seed, so one seed and the same options replay the same deliveries.
 */
/** Cosmos DB faults hit writes: transactional batches and point writes (the versioned consumer's). */
export interface ScenarioFaults extends HostFaults, OutboxFaults {
  /** Chance that a write gets 503 (the SDK does not retry writes on 503). */
  cosmosUnavailable?: number;
  /** Chance that a write gets 429; the SDK waits and retries up to 9 times. */
  cosmosThrottle?: number;
  /** Chance that a write commits but its response is lost. */
  cosmosDropAfterCommit?: number;
  /** Chance that a write is so slow that the message's lock runs out while the handler still runs. */
  slowHandler?: number;
  /**
   * Windows of model time, from the start of publishing, in which every data request fails: 503
   * (`unavailable`, an outage) or 429 (`throttle`, throttling beyond the SDK's retries).
   */
  cosmosOutages?: CosmosOutage[];
  /**
   * Windows of model time, from the start of publishing, in which a dependency the delayed-retry
   * consumers call (a pricing or fraud service) times out: their handlers throw before staging
   * anything, and src/topology.json's delayedRetry schedules the copies.
   */
  slowDependencies?: SlowDependency[];
}

export interface SlowDependency {
  startMs: number;
  durationMs: number;
}

/** The outbox relay's faults: its Service Bus sends, and the change feed trigger's processor. */
export interface OutboxFaults {
  /** Chance that a relay or sweeper send fails (nothing sent). */
  relaySendFailure?: number;
  /** Chance that a send is taken but reported failed (its acknowledgement lost). */
  relayAckLost?: number;
  /** Chance that the relay's instance dies after the function ran, before the checkpoint. */
  relayCrash?: number;
  /** Chance that the checkpoint write after a page is lost. */
  relayCheckpointLost?: number;
  /** Chance that the host stops while the relay runs and a new instance takes the lease over. */
  relayRestart?: number;
  /**
   * Windows of model time, from the start of publishing, in which a topic refuses every send of the
   * outbox (its Data Sender role missing, as a ServiceBusError UnauthorizedAccess).
   */
  topicOutages?: TopicOutage[];
}

export interface TopicOutage {
  topic: string;
  startMs: number;
  durationMs: number;
}

export interface CosmosOutage {
  startMs: number;
  durationMs: number;
  kind?: 'unavailable' | 'throttle';
}

export interface OutageReport extends Required<CosmosOutage> {
  /** Messages in the subscriptions when Cosmos DB came back. */
  pendingAtRecovery: number;
  /** Model ms from the recovery to the first completed delivery after it; null when nothing was pending. */
  resumedAfterMs: number | null;
}

export interface ScenarioOptions extends WorkloadOptions {
  faults?: ScenarioFaults;
  /** Duplicate detection window, model ms; default PT1H. */
  duplicateWindowMs?: number;
  /** host.json maxConcurrentCalls per function; default 16. */
  maxConcurrentCalls?: number;
  /** Called about every quarter second (real time) while the run is going. */
  onProgress?: (progress: Progress) => void;
  /** Real ms before a run that has not settled is abandoned; default 120 s. */
  timeoutMs?: number;
}

export interface Progress {
  sent: number;
  sends: number;
  settledCopies: number;
  deliveries: number;
}

export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

type AppModule = typeof App;

export interface ScenarioReport {
  seed: number;
  /** The outbox relay (change feed pages, by outcome) and the sweeper's runs. */
  relay: {
    pages: Record<string, number>;
    /** Invocations of the relay: one per page, and one per retry. */
    invocations: number;
    sweeperRuns: number;
    sweeperResent: number;
    sendFailures: number;
    /** Sends a topic refused (topicOutages). */
    refusals: number;
  };
  ok: boolean;
  invariants: Invariant[];
  accounting: Accounting;
  deliveries: {
    total: number;
    byOutcome: Record<string, number>;
    bySettlement: Record<string, number>;
    /** SHA-256 prefix of the delivery log (see logLine): equal for a run and its replay. */
    digest: string;
  };
  /** Every delivery in the order it settled: what a replay of the seed repeats. */
  deliveryLog: DeliveryRecord[];
  /** The inbox's duplicates, the cause the run injected against the cause the inbox named (causes.ts). */
  duplicateCauses: CauseTable;
  throughput: { elapsedMs: number; eventsPerSecond: number; deliveriesPerSecond: number };
  /** Real milliseconds in the handler (its turns included); model milliseconds from enqueue to settlement. */
  latency: { handlerMs: Percentiles; endToEndMs: Percentiles };
  /** The Cosmos DB circuit breaker: state changes, and each outage's recovery. */
  breaker: {
    opened: number;
    closed: number;
    outages: OutageReport[];
    /** The longest outage the app's settings survive without dead-lettering (see packages/inbox/src/breaker.ts). */
    survivableOutageSeconds: number;
  };
  /** The delayed-retry copies (src/topology.json delayedRetry): see Accounting.delayedRetries. */
  delayedRetries: Accounting['delayedRetries'];
}

export interface EnvironmentOptions {
  /** Broker lock duration (model ms), default PT1M; also SERVICEBUS_LOCK_DURATION for the app. */
  lockDurationMs?: number;
  /** Broker max delivery count, default 10; also SERVICEBUS_MAX_DELIVERY_COUNT for the app. */
  maxDeliveryCount?: number;
  /** host.json maxAutoLockRenewalDuration, model ms; default 5 minutes; also HOST_MAX_AUTO_LOCK_RENEWAL. */
  maxAutoLockRenewalMs?: number;
  /** host.json functionTimeout, model ms; default 5 minutes; also HOST_FUNCTION_TIMEOUT. */
  functionTimeoutMs?: number;
  /** Latency the local Cosmos server adds to every data request, model ms; default 0. */
  cosmosLatencyMs?: number;
}

/**
 * The parts that live for the whole process: the local Cosmos server and the function app (the
 * Functions modules, like the host, are loaded once). Runs reuse them, each on a fresh container.
 */
export class ScenarioEnvironment {
  private constructor(
    readonly cosmos: LocalCosmos,
    private readonly client: CosmosClient,
    readonly app: FunctionApp,
    private readonly options: Required<EnvironmentOptions>,
  ) {}

  static async start(options: EnvironmentOptions = {}): Promise<ScenarioEnvironment> {
    const settings: Required<EnvironmentOptions> = {
      lockDurationMs: options.lockDurationMs ?? 60_000,
      maxDeliveryCount: options.maxDeliveryCount ?? 10,
      maxAutoLockRenewalMs: options.maxAutoLockRenewalMs ?? 300_000,
      functionTimeoutMs: options.functionTimeoutMs ?? 300_000,
      cosmosLatencyMs: options.cosmosLatencyMs ?? 0,
    };
    let environment: ScenarioEnvironment | undefined = undefined;
    // `_ts` (and so TTL and the change feed's times) on the run's model clock, real time outside a run.
    const cosmos = await startCosmos({
      latencyMs: settings.cosmosLatencyMs,
      seed: 1,
      now: () => environment?.simulation?.clock.now() ?? Date.now(),
    });
    Object.assign(process.env, {
      COSMOS_ENDPOINT: cosmos.endpoint,
      COSMOS_KEY: cosmos.key,
      COSMOS_DATABASE: 'app',
      COSMOS_CONTAINER: 'state',
      SERVICEBUS_LOCK_DURATION: `PT${settings.lockDurationMs / 1000}S`,
      SERVICEBUS_MAX_DELIVERY_COUNT: String(settings.maxDeliveryCount),
      HOST_MAX_AUTO_LOCK_RENEWAL: `PT${settings.maxAutoLockRenewalMs / 1000}S`,
      HOST_FUNCTION_TIMEOUT: `PT${settings.functionTimeoutMs / 1000}S`,
    });
    // Every request of a run takes its turn from the run's simulation; outside a run (setup,
    // verification) requests go straight through.
    const clientOptions: CosmosClientOptions = {
      endpoint: cosmos.endpoint,
      key: cosmos.key,
      userAgentSuffix: 'idempotent-servicebus-consumers',
      ...simulationClientOptions(() => environment?.simulation),
    };
    const client = new CosmosClient(clientOptions);
    await client.databases.createIfNotExists({ id: 'app' });
    environment = new ScenarioEnvironment(cosmos, client, await loadFunctionApp(appFunctions()), settings);
    return environment;
  }

  /** The run going on now, if any. */
  private simulation: Simulation | undefined;

  async stop(): Promise<void> {
    this.client.dispose();
    await this.cosmos.stop();
  }

  /**
   * One run: a fresh store, the parties of the pipeline on a new simulation, the app moved onto
   * the model (its clock, its randomness, the run's Cosmos DB client and publisher), the workload
   * published and drained, then the invariants checked and the report made.
   */
  async run(options: ScenarioOptions): Promise<ScenarioReport> {
    const workload = generateWorkload(options);
    const { container, leases } = await this.freshStore(workload);
    const simulation = new Simulation();
    const parties = this.partiesOf(options, simulation.clock, container, leases);
    this.cosmos.faults.reseed(options.seed ^ 0x1b873593);
    this.injectCosmosFaults(options.faults ?? {});
    const app = appOnModel(options, simulation, parties, this.cosmos);
    const sweeper = new SweeperSchedule(
      this.app,
      simulation.clock,
      app.runtime.settings.outbox.sweepIntervalSeconds,
    );
    const outages: OutageReport[] = [];
    const topicOutages: TopicOutage[] = [];
    const startedAt = performance.now();
    const progress = new ProgressReport(options, workload, parties);
    this.simulation = simulation;
    try {
      await this.drive(options, workload, simulation, parties, sweeper, progress, {
        outages,
        topicOutages,
        dependency: app.dependency,
      });
    } finally {
      progress.stop();
      // Handlers still running (given up at functionTimeout) finish on the model's turns.
      sweeper.stopped = true;
      await simulation.drive(
        Promise.all([
          parties.host.stop(),
          parties.relayStarting.then(() => parties.relay.stop()),
          sweeper.running,
        ]),
      );
      this.simulation = undefined;
      this.cosmos.faults.clear();
      app.restore();
    }
    const elapsedMs = performance.now() - startedAt;
    progress.report();
    const verification = await verify(
      workload,
      container,
      parties.broker,
      parties.host.deliveries,
      parties.publisher.sends,
      {
        scheduled: app.retryScheduler.scheduled,
        topicOutages,
        sweepAgeSeconds: app.runtime.settings.outbox.sweepAgeSeconds,
        sweeps: sweeper.sweeps,
        relayErrors: parties.relay.invocations.flatMap((invocation) =>
          invocation.error ? [invocation.error] : [],
        ),
      },
    );
    return reportOf(options, workload, parties, sweeper, verification, {
      elapsedMs,
      transitions: app.transitions,
      outages,
      survivableOutageSeconds: survivableOutageSeconds(app.runtime.settings),
      inboxFunctions: app.inboxFunctions,
      markers: await markerWrites(container),
    });
  }

  /** The run's app container, fresh, with the workload's invoices and products, and a fresh lease container. */
  private async freshStore(workload: Workload): Promise<{ container: Container; leases: Container }> {
    const database = this.client.database('app');
    const container = await freshAppContainer(database);
    await database
      .container(LEASE_CONTAINER)
      .delete()
      .catch(() => undefined);
    const { container: leases } = await database.containers.create({
      id: LEASE_CONTAINER,
      partitionKey: { paths: ['/id'] },
    });
    for (const document of [...workload.invoices, ...workload.products])
      await container.items.create(document);
    return { container, leases };
  }

  /** The broker, the host on it, the outbox's publisher and the relay's change feed trigger, with their faults. */
  private partiesOf(
    options: ScenarioOptions,
    clock: Clock,
    container: Container,
    leases: Container,
  ): Parties {
    const faults = options.faults ?? {};
    const broker = new Broker({
      topology,
      retryCopies: RETRY_COPIES,
      clock,
      duplicateWindowMs: options.duplicateWindowMs ?? 3_600_000,
      lockDurationMs: this.options.lockDurationMs,
      maxDeliveryCount: this.options.maxDeliveryCount,
    });
    const host = new FunctionsHost(broker, this.app.serviceBus, {
      clock,
      maxConcurrentCalls: options.maxConcurrentCalls ?? 16,
      maxAutoLockRenewalMs: this.options.maxAutoLockRenewalMs,
      functionTimeoutMs: this.options.functionTimeoutMs,
      faults,
      random: seededRandom(options.seed ^ 0x5bd1e995),
    });
    const publisher = new BrokerPublisher(
      broker,
      { sendFailure: faults.relaySendFailure, sendAckLost: faults.relayAckLost } satisfies PublisherFaults,
      seededRandom(options.seed ^ 0x3c6ef372),
      () => clock.now(),
    );
    const relayRegistration = this.app.cosmosDB.find((f) => f.name === 'outbox-relay');
    if (!relayRegistration) throw new Error('The app registers no outbox-relay function.');
    const relay = new ChangeFeedTrigger(relayRegistration, {
      clock,
      monitored: container,
      leases,
      faults: {
        crashAfterInvoke: faults.relayCrash,
        checkpointLost: faults.relayCheckpointLost,
        restart: faults.relayRestart,
      } satisfies ChangeFeedFaults,
      random: seededRandom(options.seed ^ 0x7f4a7c15),
    });
    return {
      container,
      broker,
      host,
      publisher,
      relay,
      relayRegistration,
      relayStarting: Promise.resolve(),
      relayStarted: false,
      sent: 0,
    };
  }

  /**
   * Starts the relay, the sweeper and the host, publishes the workload (the late resends after the
   * broker's duplicate window) with the outages on schedule, and waits until everything is drained;
   * fails when the run does not settle within `timeoutMs` of real time.
   */
  private async drive(
    options: ScenarioOptions,
    workload: Workload,
    simulation: Simulation,
    parties: Parties,
    sweeper: SweeperSchedule,
    progress: ProgressReport,
    windows: { outages: OutageReport[]; topicOutages: TopicOutage[]; dependency: SlowDependencyWindows },
  ): Promise<void> {
    const { clock } = simulation;
    const { broker, host, publisher } = parties;
    const duplicateWindowMs = options.duplicateWindowMs ?? 3_600_000;
    parties.relayStarting = startRelay(parties, clock, () => sweeper.stopped);
    sweeper.start();
    host.start();
    progress.start();
    const publish = async (when: 'now' | 'late'): Promise<void> => {
      for (const [index, { event, remintedId }] of workload.sends.filter((s) => s.when === when).entries()) {
        topicFor(broker, event.subject).send({
          messageId: remintedId ?? event.messageId,
          subject: event.subject,
          body: event.body,
          contentType: 'application/json',
        });
        parties.sent++;
        // Let the host take messages while publishing goes on, at the same model moment.
        if (index % 50 === 49) await clock.sleep(0);
      }
    };
    const settled = (async (): Promise<void> => {
      const outagesOver = this.scheduleOutages(
        options.faults?.cosmosOutages ?? [],
        clock,
        broker,
        windows.outages,
      );
      windows.topicOutages.push(
        ...scheduleTopicOutages(options.faults?.topicOutages ?? [], clock, publisher),
      );
      scheduleSlowDependencies(options.faults?.slowDependencies ?? [], clock, windows.dependency);
      await publish('now');
      await outagesOver;
      await drained(parties, simulation);
      // Resends after the broker has forgotten their MessageIds (an outbox relay an hour later):
      // jump past the duplicate detection window while nothing is locked; only the inbox can
      // absorb these.
      clock.advance(duplicateWindowMs + 1_000);
      await publish('late');
      await drained(parties, simulation);
    })();
    const timeoutMs = options.timeoutMs ?? 120_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      simulation.drive(settled).then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      simulation.stop();
      const state = broker.subscriptions
        .map((s) => `${s.name}: ${s.entity.activeCount} left (${s.entity.lockedCount} locked)`)
        .join(', ');
      throw new Error(
        `Scenario seed ${options.seed} did not settle within ${timeoutMs} ms: ${parties.sent}/${workload.sends.length} sent, ` +
          `${host.inFlightCount} handlers running; ${state}.`,
      );
    }
  }

  /**
   * Starts and ends each outage on the model clock; resolves when the last one is over. Reports
   * them with model times (epoch ms) for the report to turn back into offsets.
   */
  private scheduleOutages(
    windows: readonly CosmosOutage[],
    clock: Clock,
    broker: Broker,
    reports: OutageReport[],
  ): Promise<void> {
    const start = clock.now();
    return Promise.all(
      windows.map(
        ({ startMs, durationMs, kind = 'unavailable' }) =>
          new Promise<void>((resolve) => {
            let handle: FaultHandle | undefined;
            clock.after(startMs, () => {
              handle = this.cosmos.faults.inject(
                kind === 'throttle' ? { kind, retryAfterMs: 2 } : { kind: 'unavailable' },
              );
            });
            clock.after(startMs + durationMs, () => {
              handle?.remove();
              reports.push({
                startMs: start + startMs,
                durationMs,
                kind,
                pendingAtRecovery: broker.subscriptions.reduce((n, s) => n + s.entity.activeCount, 0),
                resumedAfterMs: null,
              });
              resolve();
            });
          }),
      ),
    ).then(() => undefined);
  }

  private injectCosmosFaults(faults: ScenarioFaults): void {
    const { faults: injector } = this.cosmos;
    const on = ['batch', 'write'] as const;
    if (faults.cosmosUnavailable) {
      injector.inject({ kind: 'unavailable', on, probability: faults.cosmosUnavailable });
    }
    if (faults.cosmosThrottle) {
      injector.inject({ kind: 'throttle', on, probability: faults.cosmosThrottle, retryAfterMs: 2 });
    }
    if (faults.cosmosDropAfterCommit) {
      injector.inject({ kind: 'dropResponseAfterCommit', on, probability: faults.cosmosDropAfterCommit });
    }
    if (faults.slowHandler) {
      // Longer than the lock can be kept by renewal: the lock runs out while the write is still on
      // its way, and the message is delivered again, concurrently.
      const ms = Math.ceil((this.options.maxAutoLockRenewalMs + this.options.lockDurationMs) * 1.5);
      injector.inject({ kind: 'latency', on, probability: faults.slowHandler, ms });
    }
  }
}

/**
 * A sweeper run as its log line reports it: what it sent, the topics that failed, and whether it
 * ran to its end (no Cosmos DB failure, not capped).
 */
function sweepRecordOf(logs: readonly LogLine[], startedAt: number, endedAt: number): SweepRecord {
  const line = logs.find((log) => log.text.includes('"capped":'))?.text ?? '';
  const fields = JSON.parse(/(\{.*\})$/.exec(line)?.[1] ?? '{}') as {
    sent?: number;
    failedTopics?: string[];
    capped?: boolean;
  };
  const stoppedEarly = logs.some((log) => log.text.startsWith('Outbox sweeper could not finish'));
  return {
    startedAt,
    endedAt,
    sent: fields.sent ?? 0,
    failedTopics: fields.failedTopics ?? [],
    complete: line !== '' && !stoppedEarly && fields.capped !== true,
  };
}

/**
 * Makes each topic refuse the outbox's sends in its window of model time, from now; returns the
 * windows in model time (epoch ms).
 */
function scheduleTopicOutages(
  windows: readonly TopicOutage[],
  clock: Clock,
  publisher: BrokerPublisher,
): TopicOutage[] {
  const start = clock.now();
  // Windows of one topic may overlap: it refuses while any of them lasts.
  const open = new Map<string, number>();
  for (const { topic, startMs, durationMs } of windows) {
    clock.after(startMs, () => {
      open.set(topic, (open.get(topic) ?? 0) + 1);
      publisher.refusing.add(topic);
    });
    clock.after(startMs + durationMs, () => {
      const left = (open.get(topic) ?? 1) - 1;
      open.set(topic, left);
      if (left === 0) publisher.refusing.delete(topic);
    });
  }
  return windows.map((window) => ({ ...window, startMs: start + window.startMs }));
}

/**
 * Makes the delayed-retry consumers' dependency slow in its windows of model time, from now: their
 * handlers throw while the model clock is in one (appOnModel). Judged by the clock's time, not by
 * timers: the jump past the duplicate window (drive) moves time without firing them first.
 */
function scheduleSlowDependencies(
  windows: readonly SlowDependency[],
  clock: Clock,
  dependency: SlowDependencyWindows,
): void {
  const start = clock.now();
  for (const { startMs, durationMs } of windows)
    dependency.windows.push({ fromMs: start + startMs, untilMs: start + startMs + durationMs });
}

/** The slow-dependency windows in model time (epoch ms), and whether one holds `at`. */
interface SlowDependencyWindows {
  windows: { fromMs: number; untilMs: number }[];
  slowAt: (at: number) => boolean;
}

/** The pipeline's parties in one run. */
interface Parties {
  /** The run's app container. */
  container: Container;
  broker: Broker;
  host: FunctionsHost;
  publisher: BrokerPublisher;
  relay: ChangeFeedTrigger;
  relayRegistration: CosmosDBFunction;
  /** The relay's listener starting (the host retries it while it cannot). */
  relayStarting: Promise<void>;
  relayStarted: boolean;
  /** Workload messages published so far. */
  sent: number;
}

/**
 * The app's runtime on the model for one run (the dev kit's appOnSimulation: its container, clock,
 * randomness, breaker and delayed-retry copies; here also the run's publisher and duplicate window,
 * and the server's latency in model time), and the sample's slow-dependency fault on top: the
 * handlers of the consumers that declare delayedRetry throw while the model clock is in a window of
 * `dependency`, without a change to the consumers' code (their registered `handle` is wrapped).
 * `restore` puts back what the app had.
 */
function appOnModel(
  { seed, duplicateWindowMs = 3_600_000 }: ScenarioOptions,
  simulation: Simulation,
  { container, broker, publisher }: Pick<Parties, 'container' | 'broker' | 'publisher'>,
  cosmos: LocalCosmos,
): {
  runtime: InboxRuntime;
  transitions: { opened: number; closed: number };
  /** The delayed copies the app scheduled on the broker. */
  retryScheduler: BrokerRetryScheduler;
  /** When the delayed-retry consumers' dependency is slow. */
  dependency: SlowDependencyWindows;
  /** The functions of the app's inbox consumers (the others are versioned). */
  inboxFunctions: ReadonlySet<string>;
  restore: () => void;
} {
  const { clock } = simulation;
  // Required here, not imported: loading src/app.ts validates the settings start() has just set.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- deferred on purpose
  const { inboxRuntime, registeredConsumers } = require('../../src/app') as AppModule;
  const runtime = inboxRuntime();
  const transitions = { opened: 0, closed: 0 };
  const onSimulation = appOnSimulation(runtime, simulation, {
    container,
    seed,
    broker,
    publisher,
    duplicateWindowMs,
    cosmos,
    onTransition: (transition) => transitions[transition.state === 'open' ? 'opened' : 'closed']++,
  });
  const inboxFunctions = new Set(
    [...registeredConsumers().values()].filter((c) => c.kind === 'inbox').map((c) => functionNameOf(c.name)),
  );
  const dependency: SlowDependencyWindows = {
    windows: [],
    slowAt: (at) => dependency.windows.some((w) => at >= w.fromMs && at < w.untilMs),
  };
  const withDelayedRetry = topology.topics.flatMap((t) =>
    t.subscriptions.filter((s) => s.delayedRetry !== undefined).map((s) => s.name),
  );
  const wrapped = withDelayedRetry.flatMap((name) => {
    const consumer = registeredConsumers().get(name);
    if (consumer?.kind !== 'inbox') return [];
    // Kept as it is, to be put back: it is called bound.
    // eslint-disable-next-line @typescript-eslint/unbound-method -- restored unchanged, never called unbound
    const handle = consumer.handle;
    consumer.handle = (message, tx, delivery) => {
      // A timeout of the dependency the handler calls first: nothing staged yet.
      if (dependency.slowAt(clock.now()))
        throw new Error(`${name}: the pricing service did not answer within 30 s (slow dependency)`);
      return handle.call(consumer, message, tx, delivery);
    };
    return [{ consumer, handle }];
  });
  return {
    runtime,
    transitions,
    retryScheduler: onSimulation.retryScheduler,
    dependency,
    inboxFunctions,
    restore: () => {
      onSimulation.restore();
      for (const { consumer, handle } of wrapped) consumer.handle = handle;
    },
  };
}

/** The outbox sweeper on its schedule in model time; a run in progress finishes before the next is set. */
class SweeperSchedule {
  runs = 0;
  resent = 0;
  stopped = false;
  running: Promise<void> = Promise.resolve();
  readonly sweeps: SweepRecord[] = [];

  constructor(
    private readonly app: FunctionApp,
    private readonly clock: Clock,
    private readonly intervalSeconds: number,
  ) {}

  start(): void {
    if (this.stopped) return;
    this.clock.after(this.intervalSeconds * 1000, () => {
      if (this.stopped) return;
      const startedAt = this.clock.now();
      this.running = this.app.invokeTimer('outbox-sweeper', { firedAt: new Date(startedAt) }).then((run) => {
        this.runs++;
        const sweep = sweepRecordOf(run.logs, startedAt, this.clock.now());
        this.resent += sweep.sent;
        this.sweeps.push(sweep);
        this.start();
      });
    });
  }
}

/** The run's progress, about every quarter second of real time (ScenarioOptions.onProgress). */
class ProgressReport {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: ScenarioOptions,
    private readonly workload: Workload,
    private readonly parties: Parties,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.report(), 250);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  report(): void {
    const { broker, host, sent } = this.parties;
    this.options.onProgress?.({
      sent,
      sends: this.workload.sends.length,
      settledCopies: broker.subscriptions.reduce(
        (n, s) => n + s.entity.completed.length + s.deadLetterQueue.enqueued,
        0,
      ),
      deliveries: host.deliveries.length,
    });
  }
}

/**
 * The relay's listener, started as the host starts it: retried while it cannot start (the lease
 * container unreachable, a lease write whose response was lost) while the other functions run.
 */
async function startRelay(parties: Parties, clock: Clock, stopped: () => boolean): Promise<void> {
  while (!stopped()) {
    const started = await parties.relay.start().then(
      () => true,
      () => false,
    );
    if (started) {
      parties.relayStarted = true;
      return;
    }
    await clock.sleep(parties.relayRegistration.feedPollDelay ?? 5_000);
  }
}

/**
 * Waits until the run is idle: no delivery running or waiting, no delayed copy scheduled, the
 * relay caught up after a read that came after every write so far (one more poll), and nothing left
 * pending in the outbox (the sweeper's, once the relay's retries are spent). A relay whose listener could not start yet reads
 * nothing: only what is pending keeps the run going then.
 */
async function drained(parties: Parties, simulation: Simulation): Promise<void> {
  const { host, relay, relayRegistration } = parties;
  const relayIdle = (): boolean => !parties.relayStarted || relay.idle;
  await settled(simulation, {
    idle: () => host.idle && relayIdle(),
    activity: () => host.deliveries.length + relay.invocations.length,
    quietMs: (relayRegistration.feedPollDelay ?? 5_000) + 1,
    broker: parties.broker,
    pending: async () => (await pendingOutbox(parties.container)) > 0,
  });
}

/** Which delivery wrote each inbox marker of the run, and when (model time): causes.ts. */
async function markerWrites(container: Container): Promise<MarkerWrite[]> {
  const { resources } = await container.items
    .query<{ consumer: string; messageId: string; deliveryCount: number; processedAt: string }>(
      `SELECT c.consumer, c.messageId, c.deliveryCount, c.processedAt FROM c WHERE c.type = '${MARKER_TYPE}'`,
    )
    .fetchAll();
  return resources.map((marker) => ({
    function: functionNameOf(marker.consumer),
    messageId: marker.messageId,
    deliveryCount: marker.deliveryCount,
    processedAt: Date.parse(marker.processedAt),
  }));
}

/** Outbox documents still pending in the monitored container. */
async function pendingOutbox(container: Container): Promise<number> {
  return (
    await container.items
      .query<number>(`SELECT VALUE COUNT(1) FROM c WHERE c.type = '${OUTBOX_TYPE}' AND c.status = 'pending'`)
      .fetchAll()
  ).resources.reduce((sum, count) => sum + count, 0);
}

/** The topic a workload event is sent to: the one whose subscriptions take its subject. */
function topicFor(broker: Broker, subject: string): Topic {
  const declared = topology.topics.find((t) => t.subscriptions.some((s) => s.subjects.includes(subject)));
  return broker.topic(declared?.name ?? topology.topics[0]?.name ?? '');
}

/** The report of a run: what the relay and the sweeper did, the invariants, the deliveries, speed and the breaker. */
function reportOf(
  options: ScenarioOptions,
  workload: Workload,
  { host, relay, publisher, broker }: Parties,
  sweeper: SweeperSchedule,
  { invariants, accounting }: Awaited<ReturnType<typeof verify>>,
  run: {
    elapsedMs: number;
    transitions: { opened: number; closed: number };
    outages: OutageReport[];
    survivableOutageSeconds: number;
    inboxFunctions: ReadonlySet<string>;
    markers: readonly MarkerWrite[];
  },
): ScenarioReport {
  const count = (values: (string | undefined)[]): Record<string, number> =>
    values.reduce<Record<string, number>>(
      (counts, value) => ({ ...counts, [value ?? 'none']: (counts[value ?? 'none'] ?? 0) + 1 }),
      {},
    );
  const { elapsedMs } = run;
  // A delivery of a delayed copy counts as one of its original (the marker's key) for the causes.
  const originals = retryOriginals(broker);
  const asOriginals = host.deliveries.map((d) => {
    const original = originals.get(d.messageId ?? '');
    return original === undefined ? d : { ...d, messageId: original };
  });
  return {
    seed: options.seed,
    relay: {
      pages: count(relay.invocations.map((i) => i.outcome)),
      invocations: relay.invocations.reduce((sum, i) => sum + i.attempts, 0),
      sweeperRuns: sweeper.runs,
      sweeperResent: sweeper.resent,
      sendFailures: publisher.failures,
      refusals: publisher.refusals,
    },
    ok: invariants.every((i) => i.ok),
    invariants,
    accounting,
    deliveries: {
      total: host.deliveries.length,
      // A delivery the host crashed on before running the handler has no outcome of its own.
      byOutcome: count(
        host.deliveries.map((d) => d.outcome ?? (d.settlement === 'crashed' ? 'not-run' : 'unknown')),
      ),
      bySettlement: count(host.deliveries.map((d) => d.settlement)),
      digest: createHash('sha256').update(host.deliveries.map(logLine).join('\n')).digest('hex').slice(0, 16),
    },
    deliveryLog: host.deliveries,
    duplicateCauses: duplicateCauses({
      deliveries: asOriginals,
      inboxFunctions: run.inboxFunctions,
      markers: run.markers,
      relayed: new Set(publisher.sends.map((send) => send.messageId)),
      lateResends: new Set(workload.sends.filter((s) => s.when === 'late').map((s) => s.event.messageId)),
      otherIdsOfEvent: otherIdsOfEvent(workload),
      retryCopies: new Set(
        host.deliveries.filter((d) => originals.has(d.messageId ?? '')).map(brokerMessageKey),
      ),
    }),
    throughput: {
      elapsedMs: Math.round(elapsedMs),
      eventsPerSecond: Math.round((workload.events.length / elapsedMs) * 1000),
      deliveriesPerSecond: Math.round((host.deliveries.length / elapsedMs) * 1000),
    },
    latency: {
      handlerMs: percentiles(host.deliveries.map((d) => d.handlerMs)),
      endToEndMs: percentiles(
        host.deliveries.filter((d) => d.settlement === 'completed').map((d) => d.endToEndMs),
      ),
    },
    breaker: {
      ...run.transitions,
      outages: run.outages.map((outage) => {
        const end = outage.startMs + outage.durationMs;
        const resumed = host.deliveries
          .filter((d) => d.settlement === 'completed' && d.settledAt >= end)
          .reduce((first, d) => Math.min(first, d.settledAt), Infinity);
        return {
          ...outage,
          resumedAfterMs:
            outage.pendingAtRecovery > 0 && Number.isFinite(resumed) ? Math.round(resumed - end) : null,
        };
      }),
      survivableOutageSeconds: run.survivableOutageSeconds,
    },
    delayedRetries: accounting.delayedRetries,
  };
}

/** For each MessageId of an event the producer re-minted, the event's other MessageIds (causes.ts). */
function otherIdsOfEvent(workload: Workload): Map<string, string[]> {
  const idsOf = new Map<string, string[]>();
  for (const [remintedId, eventId] of workload.reminted)
    idsOf.set(eventId, [...(idsOf.get(eventId) ?? [eventId]), remintedId]);
  const others = new Map<string, string[]>();
  for (const ids of idsOf.values())
    for (const id of ids)
      others.set(
        id,
        ids.filter((other) => other !== id),
      );
  return others;
}

/** The outbox relay's lease container, as the Bicep creates it (COSMOS_LEASE_CONTAINER's default). */
const LEASE_CONTAINER = 'leases';

/** A delivery as a replay must repeat it: function, MessageId, DeliveryCount, outcome, settlement. */
export const logLine = (d: DeliveryRecord): string =>
  [d.function, d.messageId, d.deliveryCount, d.outcome ?? '-', d.settlement].join(' ');

function percentiles(values: number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number =>
    round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0);
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99), max: round(sorted.at(-1) ?? 0) };
}

const round = (value: number): number => Math.round(value * 100) / 100;
