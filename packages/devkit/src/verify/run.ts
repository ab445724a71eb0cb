import { AsyncLocalStorage } from 'node:async_hooks';
import diagnostics from 'node:diagnostics_channel';
import type { ClientRequest } from 'node:http';
import path from 'node:path';

import { type Container, CosmosClient, type CosmosClientOptions, type Database } from '@azure/cosmos';
import { ServiceBusClient } from '@azure/service-bus';
import {
  bindingOf,
  type Consumer,
  functionNameOf,
  type InboxRuntime,
  MARKER_TYPE,
  survivableOutageSeconds,
} from '@idempotent-consumers/inbox/internal';
import {
  Broker,
  type FaultHandle,
  freshAppContainer,
  type FunctionApp,
  FunctionsHost,
  loadFunctionApp,
  type LocalCosmos,
  type LocalServiceBus,
  seededRandom,
  Simulation,
  simulationClientOptions,
  startCosmos,
  startServiceBus,
} from '@idempotent-consumers/local-azure';

import { appFunctions, appTopology, PROJECT_ROOT, RETRY_COPIES } from '../cli/project';
import { type AppOnSimulation, appOnSimulation, settled } from './appOnSimulation';
import { type Snapshot, snapshotOf } from './compare';
import { inVersionOrder } from './versioned';

/**
 * One verify run of a consumer (issue 43): the faulty run and the reference runs it is compared
 * with, on local Azure in this process. The function is the app's own, registered by its function
 * file and invoked through the worker path; the app's runtime is moved onto the run (its container,
 * its clock, its randomness), as the scenarios do (sample/scenario/run.ts).
 *
 *   faulty     the messages published at once on the broker model, with duplicates inside and after
 *              the duplicate detection window, to the host model with `maxConcurrentCalls` at once,
 *              crashes before and after the commit, lost completions, 429 and 503 on writes, a
 *              response lost after its write committed, writes slow enough that the lock runs out and
 *              the message is delivered again while the first delivery still runs, a Cosmos DB
 *              outage, and an app restart (a new host instance while the old one drains); all on a
 *              deterministic simulation (local Azure's Simulation): a seed replays the run
 *   reference  each message applied once, one at a time, through the worker path, on a fresh
 *              container: those the faulty run committed in the order of its markers' log sequence
 *              numbers, then the others (a versioned consumer's, which keeps no markers, in the
 *              order of their versions: versioned.ts); twice, so that a value that changes from run
 *              to run shows
 */
export interface RunFaults {
  crashBeforeCommit: number;
  crashAfterCommit: number;
  completionLost: number;
  cosmosThrottle: number;
  cosmosUnavailable: number;
  cosmosDropAfterCommit: number;
  /** Chance that a write is slower than the lock and its renewals: the message comes again meanwhile. */
  slowWrite: number;
  /** Share of the messages sent again with the same MessageId inside the window (the broker drops them). */
  resendInsideWindow: number;
  /** Share sent again after the window (only the inbox can absorb them). */
  resendAfterWindow: number;
  maxConcurrentCalls: number;
  /** A Cosmos DB outage (every request 503) from a model time, for a while; or none. */
  outage: { startMs: number; durationMs: number } | null;
  /** Model time at which the app restarts (a deployment: a new instance, the old one draining); or none. */
  restartAtMs: number | null;
}

/** What one run saw: the snapshots, and the side effects outside the transaction it counted. */
export interface RunResult {
  faulty: Snapshot;
  reference: Snapshot;
  /** The reference run again: differs from `reference` when the handler writes a value of its own (a time, a random id). */
  referenceAgain: Snapshot;
  /** Messages the handler refused when applied once, without faults (after the committed ones: those the faulty run did not commit). */
  referenceFailed: string[];
  /** MessageIds in the order the faulty run committed them. */
  committed: string[];
  /** Messages the faulty run dead-lettered, with the reason. */
  deadLettered: { messageId: string; reason: string }[];
  /** What the handler did outside the library during the faulty run's deliveries, per MessageId. */
  outside: OutsideRequests;
  /** The same, in the reference run: what one run of each message does. */
  referenceOutside: OutsideRequests;
}

export interface OutsideRequests {
  /** Requests to the Cosmos DB endpoint from another client than the library's (writes outside `tx`). */
  cosmos: Map<string, number>;
  /** Other HTTP requests (an external API): not exactly-once, counted under redelivery. */
  http: Map<string, number>;
  /** Messages sent with a Service Bus client of the handler's own, not `tx.publish`. */
  serviceBus: Map<string, number>;
}

const noOutside = (): OutsideRequests => ({ cosmos: new Map(), http: new Map(), serviceBus: new Map() });

/** A message of a run: its body, and the Subject it goes with (one the consumer's subscription takes). */
export interface VerifyMessage {
  subject: string;
  body: unknown;
}

/** Told to the library's client, so that a request of any other client is the handler's own. */
const VERIFY_AGENT = 'inbox-verify';
/** host.json's lock renewal and the broker's lock, model ms (the template's defaults). */
const LOCK_MS = 60_000;
const MAX_LOCK_RENEWAL_MS = 300_000;
const DUPLICATE_WINDOW_MS = 3_600_000;
/** Real time a faulty run may take before verify gives up on it (a handler that hangs). */
const RUN_TIME_LIMIT_MS = 30_000;
/**
 * Deliveries before the broker dead-letters (and SERVICEBUS_MAX_DELIVERY_COUNT for the app): high
 * enough that the faults alone never exhaust them, an outage and a restart together included (at 10
 * they did), so that a message dead-lettered in a run is the handler's doing.
 */
const MAX_DELIVERY_COUNT = 50;

type AppModule = {
  inboxRuntime(): InboxRuntime;
  registeredConsumers(): ReadonlyMap<string, Consumer>;
};

/** The delivery a handler runs for, to count its requests by (set around each call of `handle`). */
const current = new AsyncLocalStorage<string>();

/**
 * What lives for the whole verification: the local Cosmos DB server, the library's client on the
 * run's turns, and the app's functions loaded once, as the host loads them.
 */
export class VerifyEnvironment {
  private simulation: Simulation | undefined;
  private outside: OutsideRequests | undefined;
  /** Why no more run can be made here (one did not settle): start another environment. */
  broken: string | undefined;
  private readonly unsubscribe: () => void;
  /** The settings start() replaced, put back by stop() (a test's own local stack, say). */
  private readonly savedEnvironment: Record<string, string | undefined>;

  private constructor(
    readonly cosmos: LocalCosmos,
    private readonly serviceBus: LocalServiceBus,
    private readonly client: CosmosClient,
    private readonly database: Database,
    readonly app: FunctionApp,
    readonly module: AppModule,
    setSimulation: (get: () => Simulation | undefined) => void,
    savedEnvironment: Record<string, string | undefined>,
  ) {
    this.savedEnvironment = savedEnvironment;
    setSimulation(() => this.simulation);
    const unwatchRequests = watchRequests(new URL(cosmos.endpoint).host, () => this.outside);
    const unwatchSends = watchSends(
      serviceBus.connectionString,
      () => this.outside,
      () => this.simulation,
    );
    this.unsubscribe = () => {
      unwatchRequests();
      unwatchSends();
    };
  }

  static async start(): Promise<VerifyEnvironment> {
    let simulationOf: () => Simulation | undefined = () => undefined;
    const cosmos = await startCosmos({ seed: 1, now: () => simulationOf()?.clock.now() ?? Date.now() });
    // Where a handler's own Service Bus client sends (its sends are counted, not compared).
    const serviceBus = await startServiceBus({ topology: appTopology(), retryCopies: RETRY_COPIES });
    const settings: Record<string, string | undefined> = {
      ServiceBusConnection: serviceBus.connectionString,
      ServiceBusConnection__fullyQualifiedNamespace: undefined,
      COSMOS_ENDPOINT: cosmos.endpoint,
      COSMOS_KEY: cosmos.key,
      COSMOS_DATABASE: 'app',
      COSMOS_CONTAINER: 'state',
      SERVICEBUS_LOCK_DURATION: `PT${LOCK_MS / 1000}S`,
      SERVICEBUS_MAX_DELIVERY_COUNT: String(MAX_DELIVERY_COUNT),
    };
    const saved = Object.fromEntries(Object.keys(settings).map((name) => [name, process.env[name]]));
    setEnvironment(settings);
    const options: CosmosClientOptions = {
      endpoint: cosmos.endpoint,
      key: cosmos.key,
      userAgentSuffix: VERIFY_AGENT,
      ...simulationClientOptions(() => simulationOf()),
    };
    const client = new CosmosClient(options);
    const { database } = await client.databases.createIfNotExists({ id: 'app' });
    const app = await loadFunctionApp(appFunctions());
    // The app's module the function files loaded, read at run time (as loadConsumers does).
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the app's, loaded after it on purpose
    const module = require(path.join(PROJECT_ROOT, 'src', 'app')) as AppModule;
    return new VerifyEnvironment(
      cosmos,
      serviceBus,
      client,
      database,
      app,
      module,
      (get) => (simulationOf = get),
      saved,
    );
  }

  async stop(): Promise<void> {
    this.unsubscribe();
    this.client.dispose();
    await this.cosmos.stop();
    await this.serviceBus.stop();
    setEnvironment(this.savedEnvironment);
  }

  /** The app's consumers, by name. */
  consumers(): ReadonlyMap<string, Consumer> {
    return this.module.registeredConsumers();
  }

  /** The faulty run, then the reference run twice; each message is sent under MessageId m-<index>. */
  async run(
    consumerName: string,
    messages: readonly VerifyMessage[],
    faults: RunFaults,
    seed: number,
    volatile: readonly string[] = [],
  ): Promise<RunResult> {
    const consumer = this.consumers().get(consumerName);
    if (consumer === undefined) throw new Error(`No consumer named '${consumerName}' is registered.`);
    const restore = this.instrument(consumer);
    try {
      const faulty = await this.faultyRun(consumer, messages, faults, seed, volatile);
      const byId = new Map(messages.map((message, index) => [messageIdOf(index), message]));
      // The committed ones in their order, then those the faulty run did not commit (dead-lettered);
      // a versioned consumer's in the order of their versions (it keeps no markers).
      const rest = [...byId.keys()].filter((id) => !faulty.committed.includes(id));
      const inOrder =
        consumer.kind === 'versioned'
          ? inVersionOrder(consumer, [...byId])
          : [...faulty.committed, ...rest].map((id) => [id, byId.get(id)] as const);
      const reference = await this.referenceRun(consumer, inOrder, volatile);
      const referenceAgain = await this.referenceRun(consumer, inOrder, volatile);
      return {
        ...faulty,
        reference: reference.snapshot,
        referenceAgain: referenceAgain.snapshot,
        referenceFailed: reference.failed,
        referenceOutside: reference.outside,
      };
    } finally {
      restore();
    }
  }

  /** Wraps the consumer's handler so that what it does outside the library is counted by delivery. */
  private instrument(consumer: Consumer): () => void {
    if (consumer.kind !== 'inbox') return () => undefined;
    // Kept as it is, to be put back: it is called bound.
    // eslint-disable-next-line @typescript-eslint/unbound-method -- restored unchanged, never called unbound
    const handle = consumer.handle;
    consumer.handle = (message, tx, delivery) =>
      current.run(delivery.messageId ?? '(none)', () => handle.call(consumer, message, tx, delivery));
    return () => {
      consumer.handle = handle;
    };
  }

  private async faultyRun(
    consumer: Consumer,
    messages: readonly VerifyMessage[],
    faults: RunFaults,
    seed: number,
    volatile: readonly string[],
  ): Promise<Omit<RunResult, 'reference' | 'referenceAgain' | 'referenceFailed' | 'referenceOutside'>> {
    if (this.broken !== undefined) throw new Error(this.broken);
    const container = await freshAppContainer(this.database);
    const simulation = new Simulation();
    const { clock } = simulation;
    const binding = bindingOf(consumer.name, appTopology());
    const broker = new Broker({
      topology: appTopology(),
      retryCopies: RETRY_COPIES,
      clock,
      duplicateWindowMs: DUPLICATE_WINDOW_MS,
      lockDurationMs: LOCK_MS,
      maxDeliveryCount: MAX_DELIVERY_COUNT,
    });
    const functionName = functionNameOf(consumer.name);
    const registration = this.app.serviceBus.filter((f) => f.name === functionName);
    if (registration.length === 0) throw new Error(`No function registers consumer '${consumer.name}'.`);
    // One host instance, and after a restart (a deployment) the next, the old one draining meanwhile.
    const hosts: FunctionsHost[] = [];
    const startHost = (): void => {
      const host = new FunctionsHost(broker, registration, {
        clock,
        maxConcurrentCalls: faults.maxConcurrentCalls,
        maxAutoLockRenewalMs: MAX_LOCK_RENEWAL_MS,
        faults: {
          crashBeforeCommit: faults.crashBeforeCommit,
          crashAfterCommit: faults.crashAfterCommit,
          completionLost: faults.completionLost,
        },
        random: seededRandom(seed ^ 0x5bd1e995 ^ hosts.length),
      });
      hosts.push(host);
      host.start();
    };
    const idle = (): boolean => hosts.every((host) => host.idle);
    const deliveries = (): number => hosts.reduce((sum, host) => sum + host.deliveries.length, 0);
    this.injectFaults(faults, seed);
    const app = this.onSimulation(simulation, container, seed, broker);
    const outside = noOutside();
    this.outside = outside;
    this.simulation = simulation;
    const random = seededRandom(seed ^ 0x3c6ef372);
    const send = (index: number): void => {
      broker.topic(binding.topic).send({
        messageId: messageIdOf(index),
        subject: messages[index]!.subject,
        body: JSON.stringify(messages[index]!.body),
        contentType: 'application/json',
      });
    };
    const drained = (): Promise<void> =>
      settled(simulation, { idle, activity: deliveries, quietMs: LOCK_MS + 1, broker });
    const stopping: Promise<void>[] = [];
    try {
      startHost();
      if (faults.restartAtMs !== null)
        clock.after(faults.restartAtMs, () => {
          const old = hosts.at(-1)!;
          startHost();
          stopping.push(old.stop());
        });
      this.scheduleOutage(faults.outage, clock, survivableOutageSeconds(this.module.inboxRuntime().settings));
      const work = simulation.drive(
        (async () => {
          const inside = messages.map((_, index) => index).filter(() => random() < faults.resendInsideWindow);
          const after = messages.map((_, index) => index).filter(() => random() < faults.resendAfterWindow);
          messages.forEach((_, index) => send(index));
          inside.forEach(send);
          await drained();
          clock.advance(DUPLICATE_WINDOW_MS + 1_000);
          after.forEach(send);
          await drained();
        })(),
      );
      let timer: NodeJS.Timeout | undefined;
      const settled = await Promise.race([
        work.then(() => true),
        new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), RUN_TIME_LIMIT_MS))),
      ]);
      clearTimeout(timer);
      if (!settled) {
        simulation.stop();
        // Its hosts cannot be stopped without the simulation: no later run would be sound.
        this.broken = `a run did not settle within ${RUN_TIME_LIMIT_MS / 1000} s of real time: ${consumer.name}'s handler waits on something outside local Azure, or never returns`;
        throw new Error(this.broken);
      }
      await simulation.drive(Promise.all([...hosts.map((host) => host.stop()), ...stopping]));
    } finally {
      this.simulation = undefined;
      this.outside = undefined;
      this.cosmos.faults.clear();
      app.restore();
    }
    const subscription = broker.subscription(binding.topic, binding.subscription);
    return {
      faulty: snapshotOf(await documentsOf(container), volatile),
      committed: await committedOrder(container, consumer.name),
      deadLettered: subscription.deadLetterQueue.peek().map((message) => ({
        messageId: message.messageId ?? '(none)',
        reason: message.deadLetter?.reason ?? '',
      })),
      outside,
    };
  }

  /** Each message once, one at a time, through the worker path, on a fresh container and no faults; which ones failed. */
  private async referenceRun(
    consumer: Consumer,
    messages: readonly (readonly [string, VerifyMessage | undefined])[],
    volatile: readonly string[],
  ): Promise<{ snapshot: Snapshot; failed: string[]; outside: OutsideRequests }> {
    const container = await freshAppContainer(this.database);
    const failed: string[] = [];
    const outside = noOutside();
    this.outside = outside;
    const simulation = new Simulation();
    const app = this.onSimulation(simulation, container, 1, undefined);
    const enqueuedTimeUtc = new Date(simulation.clock.now());
    try {
      for (const [messageId, message] of messages) {
        if (message === undefined) continue;
        const result = await this.app.invokeServiceBus(functionNameOf(consumer.name), {
          body: JSON.stringify(message.body),
          messageId,
          subject: message.subject,
          contentType: 'application/json',
          enqueuedTimeUtc,
        });
        if (result.error) failed.push(messageId);
      }
    } finally {
      this.outside = undefined;
      app.restore();
    }
    return { snapshot: snapshotOf(await documentsOf(container), volatile), failed, outside };
  }

  /**
   * A window in which Cosmos DB answers every request 503, from `startMs` of model time; never longer
   * than 80 % of what the app's settings survive without dead-lettering (the breaker holds deliveries
   * through it: packages/inbox/src/breaker.ts).
   */
  private scheduleOutage(
    outage: RunFaults['outage'],
    clock: Simulation['clock'],
    survivableSeconds: number,
  ): void {
    if (outage === null) return;
    let handle: FaultHandle | undefined;
    clock.after(outage.startMs, () => {
      handle = this.cosmos.faults.inject({ kind: 'unavailable', userAgent: VERIFY_AGENT });
    });
    const durationMs = Math.min(outage.durationMs, survivableSeconds * 800);
    clock.after(outage.startMs + durationMs, () => handle?.remove());
  }

  /** The run's Cosmos DB faults, on writes and batches, drawn from the server's source reseeded for the run. */
  private injectFaults(faults: RunFaults, seed: number): void {
    const { faults: injector } = this.cosmos;
    injector.reseed(seed ^ 0x1b873593);
    // The library's client only: a handler's own client is what verify watches, not what it fails.
    const on = ['batch', 'write'] as const;
    const userAgent = VERIFY_AGENT;
    if (faults.cosmosUnavailable > 0)
      injector.inject({ kind: 'unavailable', on, userAgent, probability: faults.cosmosUnavailable });
    if (faults.cosmosThrottle > 0)
      injector.inject({
        kind: 'throttle',
        on,
        userAgent,
        probability: faults.cosmosThrottle,
        retryAfterMs: 2,
      });
    if (faults.cosmosDropAfterCommit > 0)
      injector.inject({
        kind: 'dropResponseAfterCommit',
        on,
        userAgent,
        probability: faults.cosmosDropAfterCommit,
      });
    if (faults.slowWrite > 0)
      injector.inject({
        kind: 'latency',
        on,
        userAgent,
        probability: faults.slowWrite,
        ms: Math.ceil((MAX_LOCK_RENEWAL_MS + LOCK_MS) * 1.5),
      });
  }

  /** The app's runtime on the run (appOnSimulation.ts), the server's injected latency in model time. */
  private onSimulation(
    simulation: Simulation,
    container: Container,
    seed: number,
    broker: Broker | undefined,
  ): AppOnSimulation {
    return appOnSimulation(this.module.inboxRuntime(), simulation, {
      container,
      seed,
      cosmos: this.cosmos,
      ...(broker === undefined ? {} : { broker }),
    });
  }
}

export const messageIdOf = (index: number): string => `m-${index}`;

/** Sets each setting, or removes it where its value is undefined. */
function setEnvironment(settings: Readonly<Record<string, string | undefined>>): void {
  for (const [name, value] of Object.entries(settings)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
}

async function documentsOf(container: Container): Promise<Record<string, unknown>[]> {
  const { resources } = await container.items.query<Record<string, unknown>>('SELECT * FROM c').fetchAll();
  return resources;
}

/** The consumer's markers in the order their batches committed: the change feed's, from the beginning. */
async function committedOrder(container: Container, consumer: string): Promise<string[]> {
  const { resources } = await container.items
    .query<{ messageId: string; _lsn: number }>({
      query: `SELECT c.messageId, c._lsn FROM c WHERE c.type = @type AND c.consumer = @consumer`,
      parameters: [
        { name: '@type', value: MARKER_TYPE },
        { name: '@consumer', value: consumer },
      ],
    })
    .fetchAll();
  return resources.sort((a, b) => a._lsn - b._lsn).map((marker) => marker.messageId);
}

/**
 * Counts the HTTP requests a handler makes outside the library during a delivery, from Node's
 * diagnostics channel: to the Cosmos DB endpoint from a client that is not the library's (a read or
 * write outside `tx`), or to any other host (an external call). Returns the unsubscribe.
 */
function watchRequests(cosmosHost: string, outside: () => OutsideRequests | undefined): () => void {
  const count = (map: Map<string, number>): void => {
    const messageId = current.getStore();
    if (messageId !== undefined) map.set(messageId, (map.get(messageId) ?? 0) + 1);
  };
  const onRequest = (message: unknown): void => {
    const seen = outside();
    const request = (message as { request?: ClientRequest }).request;
    if (seen === undefined || request === undefined) return;
    const agent = String(request.getHeader('user-agent') ?? '');
    const host = String(request.getHeader('host') ?? request.host);
    if (agent.includes(VERIFY_AGENT)) return;
    count(host === cosmosHost ? seen.cosmos : seen.http);
  };
  diagnostics.subscribe('http.client.request.start', onRequest);
  return () => {
    diagnostics.unsubscribe('http.client.request.start', onRequest);
  };
}

/**
 * Counts the messages a handler sends during a delivery with a Service Bus client of its own: the
 * sender's sendMessages and scheduleMessages, wrapped on the prototype of @azure/service-bus's
 * sender as this process loads it (the app's handlers load the same), each send taking its turn in
 * the run's simulation. Returns the unwrap.
 */
function watchSends(
  connectionString: string,
  outside: () => OutsideRequests | undefined,
  running: () => Simulation | undefined,
): () => void {
  const client = new ServiceBusClient(connectionString);
  const prototype = Object.getPrototypeOf(client.createSender('verify')) as Record<string, unknown>;
  void client.close();
  const wrapped = ['sendMessages', 'scheduleMessages'].map((method) => {
    const original = prototype[method] as (this: unknown, messages: unknown, ...rest: unknown[]) => unknown;
    prototype[method] = function (this: unknown, messages: unknown, ...rest: unknown[]): unknown {
      const messageId = current.getStore();
      const seen = outside();
      if (messageId !== undefined && seen !== undefined) {
        const count = Array.isArray(messages) ? messages.length : 1;
        seen.serviceBus.set(messageId, (seen.serviceBus.get(messageId) ?? 0) + count);
      }
      // In its turn, model time standing still: a send takes milliseconds, not a lock's minute.
      const simulation = running();
      const send = (): Promise<unknown> => original.call(this, messages, ...rest) as Promise<unknown>;
      return simulation !== undefined && messageId !== undefined ? simulation.operation(send) : send();
    };
    return [method, original] as const;
  });
  return () => {
    for (const [method, original] of wrapped) prototype[method] = original;
  };
}
