import type { Container } from '@azure/cosmos';
import {
  type BreakerTransition,
  CircuitBreaker,
  type InboxRuntime,
  type OutboxMessage,
  type OutboxPublisher,
  type RetryScheduler,
  serviceBusMessageOf,
} from '@idempotent-consumers/inbox/internal';
import {
  type Broker,
  type LocalCosmos,
  seededRandom,
  type Simulation,
} from '@idempotent-consumers/local-azure';

/**
 * The app on a deterministic simulation (local Azure's Simulation), written once for verify
 * (run.ts) and the sample's scenarios (sample/scenario/run.ts): the app's runtime moved onto the
 * run, and the wait until a run has settled.
 */
export interface AppOnSimulationOptions {
  /** The run's app container. */
  container: Container;
  /** Seeds the app's random choices and its breaker's. */
  seed: number;
  /** Where delayed-retry copies go; without one, scheduling a copy fails (a run that has no broker). */
  broker?: Broker;
  /** What sends the outbox's messages; the app's own when left out. */
  publisher?: OutboxPublisher;
  /** The duplicate window the run's broker keeps, as the app's setting (the inbox dates a late resend by it). */
  duplicateWindowMs?: number;
  /** Told of each breaker transition, after the app's own handler. */
  onTransition?: (transition: BreakerTransition) => void;
  /** The local Cosmos DB server: its injected latency waits in model time. */
  cosmos?: LocalCosmos;
}

export interface AppOnSimulation {
  /** Every delayed-retry copy the app scheduled on the run's broker. */
  retryScheduler: BrokerRetryScheduler;
  /** Puts back what the app had. */
  restore(): void;
}

/**
 * Moves the app's runtime onto a run: its container, the simulation's clock for its time and
 * waits, seeded randomness, a fresh circuit breaker (one per instance, as in Azure) on that clock,
 * delayed-retry copies scheduled on the run's broker, and the run's publisher and window if given.
 */
export function appOnSimulation(
  runtime: InboxRuntime,
  simulation: Simulation,
  options: AppOnSimulationOptions,
): AppOnSimulation {
  const { clock } = simulation;
  const { container, seed } = options;
  const saved = {
    container: runtime.container,
    now: runtime.now,
    sleep: runtime.sleep,
    random: runtime.random,
    breaker: runtime.breaker,
    publisher: runtime.publisher,
    retryScheduler: runtime.retryScheduler,
    settings: runtime.settings,
    requestDeadlines: runtime.requestDeadlines,
  };
  const retryScheduler = new BrokerRetryScheduler(options.broker, () => clock.now());
  const appBreaker = saved.breaker.options;
  Object.assign(runtime, {
    container,
    now: () => new Date(clock.now()),
    sleep: (ms: number) => clock.sleep(ms),
    random: seededRandom(seed ^ 0x68e31da4),
    retryScheduler,
    // Requests take model time here: their deadlines (a relay's mark) run on it too.
    requestDeadlines: clock,
    breaker: new CircuitBreaker({
      ...appBreaker,
      clock,
      random: seededRandom(seed ^ 0x27d4eb2f),
      probe: () => container.item('inbox-breaker-probe', 'inbox-breaker-probe').read(),
      onTransition: (transition) => {
        appBreaker.onTransition?.(transition);
        options.onTransition?.(transition);
      },
    }),
    ...(options.publisher === undefined ? {} : { publisher: options.publisher }),
    ...(options.duplicateWindowMs === undefined
      ? {}
      : {
          settings: {
            ...saved.settings,
            serviceBus: {
              ...saved.settings.serviceBus,
              duplicateWindowSeconds: options.duplicateWindowMs / 1000,
            },
          },
        }),
  });
  options.cosmos?.setLatencyWait((ms) => simulation.parked(ms));
  return {
    retryScheduler,
    restore: () => {
      Object.assign(runtime, saved);
      options.cosmos?.setLatencyWait(undefined);
    },
  };
}

/** A delayed copy scheduled on the broker model (BrokerRetryScheduler). */
export interface ScheduleRecord {
  topic: string;
  messageId: string;
  /** False when the topic's duplicate detection dropped it (the same copy scheduled again). */
  accepted: boolean;
  /** Model time (epoch ms) of the send, and when the copy is enqueued. */
  at: number;
  enqueueAt: number;
}

/**
 * The app's retry scheduler (the library's RetryScheduler) on the broker model: what the app's
 * Service Bus publisher's `schedule` does in Azure, a send with ScheduledEnqueueTimeUtc, the message
 * in the library's Service Bus form (serviceBusMessageOf). Without a broker, a schedule fails, and
 * the handler gives the message back as any failed delivery.
 */
export class BrokerRetryScheduler implements RetryScheduler {
  /** Every copy the broker was handed, in order. */
  readonly scheduled: ScheduleRecord[] = [];

  constructor(
    private readonly broker: Broker | undefined,
    private readonly now: () => number,
  ) {}

  schedule(topic: string, message: OutboxMessage, enqueueAt: Date): Promise<void> {
    if (this.broker === undefined)
      return Promise.reject(new Error('This run has no broker to schedule a delayed copy on.'));
    const result = this.broker
      .topic(topic)
      .send({ ...serviceBusMessageOf(message), scheduledEnqueueTime: enqueueAt.getTime() });
    this.scheduled.push({
      topic,
      messageId: message.messageId,
      accepted: result.accepted,
      at: this.now(),
      enqueueAt: enqueueAt.getTime(),
    });
    return Promise.resolve();
  }
}

export interface SettledOptions {
  /** Whether every party is idle now. */
  idle: () => boolean;
  /** A count that grows with each thing a party does (deliveries, invocations). */
  activity: () => number;
  /** Model time with no new activity after which the run counts as settled (a lock, a poll). */
  quietMs: number;
  /** The run's broker: a delayed copy scheduled for later keeps the run going (the clock moves on to it). */
  broker: Broker;
  /** Whether anything else is still pending (say, the outbox); nothing when left out. */
  pending?: () => Promise<boolean>;
}

/** Waits until the run is idle and stays so for `quietMs` of model time, with nothing scheduled or pending. */
export async function settled(simulation: Simulation, options: SettledOptions): Promise<void> {
  for (;;) {
    await simulation.until(options.idle);
    const before = options.activity();
    await simulation.clock.sleep(options.quietMs);
    await simulation.until(options.idle);
    if (
      options.activity() === before &&
      [...options.broker.topics.values()].every((topic) => topic.scheduledCount === 0) &&
      !(await options.pending?.())
    )
      return;
  }
}
