import {
  type Broker,
  type LockedMessage,
  MessageLockLostError,
  type Subscription,
} from '../servicebus/broker';
import type { Clock } from '../servicebus/clock';
import {
  invokeServiceBus,
  loggedField,
  loggedOutcome,
  type LogLine,
  type ServiceBusFunction,
} from './worker';

/**
 * A model of the Azure Functions host running Service Bus triggers: per registered function, up to
 * `maxConcurrentCalls` deliveries at once, each received in peek-lock, its lock renewed while the
 * function runs (up to `maxAutoLockRenewalDuration`), invoked through the worker path
 * (packages/local-azure/src/host/worker.ts: the host's RPC request, the library's own conversion), completed
 * when the function returns and abandoned when it throws, at once available for redelivery. An
 * invocation that outlasts `functionTimeout` is given up: the host abandons the message and frees
 * the slot (in Azure it then restarts the worker; here the handler runs on unobserved, as a dying
 * worker's last request might still reach Cosmos DB). Faults make it misbehave the ways real hosts do.
 */
export interface HostFaults {
  /** The instance dies after receiving, before the handler commits: nothing settles, the lock runs out. */
  crashBeforeCommit?: number;
  /** The instance dies after the handler returned (its batch committed), before completing. */
  crashAfterCommit?: number;
  /** The completion never reaches the broker; the lock runs out and the message comes back. */
  completionLost?: number;
}

export interface HostOptions {
  clock: Clock;
  /** host.json serviceBus.maxConcurrentCalls, per function; default 16. */
  maxConcurrentCalls?: number;
  /** host.json serviceBus.maxAutoLockRenewalDuration, model ms; default 5 minutes. */
  maxAutoLockRenewalMs?: number;
  /** host.json functionTimeout, model ms; default 5 minutes. */
  functionTimeoutMs?: number;
  faults?: HostFaults;
  /** Seeded random source for the faults; default Math.random. */
  random?: () => number;
}

export type Settlement =
  | 'completed'
  | 'abandoned'
  | 'crashed'
  | 'completion-lost'
  | 'lock-lost'
  /** The invocation outlasted functionTimeout: abandoned by the host (or its lock was already lost). */
  | 'timed-out';

export interface DeliveryRecord {
  function: string;
  subscription: string;
  messageId: string | undefined;
  sequenceNumber: number;
  deliveryCount: number;
  /** What the handler logged (`processed`, `duplicate`, ...), when it logged an outcome. */
  outcome: string | undefined;
  /** The cause a `duplicate` logged with it (packages/inbox/src/duplicateCause.ts), read like the outcome. */
  cause?: string;
  settlement: Settlement;
  error?: string;
  /** Model time of the settlement (epoch ms). */
  settledAt: number;
  /**
   * When the host took the message and when the invocation returned (model epoch ms), and the
   * host-wide order of those two events: the virtual clock stands still while handlers work, so
   * two deliveries often share a model millisecond and only the order tells which came first.
   * An invocation given up at functionTimeout ends when it finally returns (see `afterTimeout`).
   */
  startedAt: number;
  endedAt: number;
  startOrder: number;
  endOrder: number;
  /**
   * What an invocation given up at functionTimeout logged when it finally returned (a dying
   * worker's last request may still reach Cosmos DB, and its log line Application Insights).
   * Kept apart from `outcome`, which is the host's view at settlement (what a replay compares).
   */
  afterTimeout?: { outcome: string | undefined; cause: string | undefined };
  /** Model ms from enqueue to settlement, and real ms spent in the handler. */
  endToEndMs: number;
  handlerMs: number;
}

export class FunctionsHost {
  readonly deliveries: DeliveryRecord[] = [];
  private readonly controller = new AbortController();
  private readonly workers: Promise<void>[] = [];
  /** Invocations given up at functionTimeout that are still running (a dying worker's, in Azure). */
  private readonly orphans = new Set<Promise<unknown>>();
  private inFlight = 0;
  /** Starts and ends of invocations so far, host-wide: DeliveryRecord.startOrder and endOrder. */
  private events = 0;

  constructor(
    private readonly broker: Broker,
    private readonly functions: readonly ServiceBusFunction[],
    private readonly options: HostOptions,
  ) {}

  /** Handlers running now. */
  get inFlightCount(): number {
    return this.inFlight;
  }

  start(): void {
    const concurrency = this.options.maxConcurrentCalls ?? 16;
    for (const registration of this.functions) {
      const subscription = this.subscriptionOf(registration);
      for (let slot = 0; slot < concurrency; slot++) this.workers.push(this.pump(registration, subscription));
    }
  }

  /**
   * Stops receiving, and waits for every handler still running, those given up at functionTimeout
   * included: a run's writes must not land in whatever the process does next (the next scenario).
   */
  async stop(): Promise<void> {
    this.controller.abort();
    await Promise.all(this.workers);
    await Promise.allSettled([...this.orphans]);
  }

  /** True when no subscription the host listens to holds a message and no handler is running. */
  get idle(): boolean {
    return (
      this.inFlight === 0 &&
      this.functions.every((registration) => this.subscriptionOf(registration).entity.activeCount === 0)
    );
  }

  /** Resolves once the host is idle, polling in real time (for a run on a scaled clock). */
  async drained(pollMs = 5): Promise<void> {
    while (!this.idle) await new Promise((resolve) => setTimeout(resolve, pollMs));
  }

  private subscriptionOf({ name, topicName, subscriptionName }: ServiceBusFunction): Subscription {
    if (topicName === undefined || subscriptionName === undefined) {
      throw new Error(
        `Function "${name}" does not listen to a topic subscription; the broker model has topics only.`,
      );
    }
    return this.broker.subscription(topicName, subscriptionName);
  }

  private async pump(registration: ServiceBusFunction, subscription: Subscription): Promise<void> {
    for (;;) {
      const locked = await subscription.entity.nextMessage(this.controller.signal);
      if (!locked) return;
      this.inFlight++;
      try {
        await this.deliver(registration, subscription, locked);
      } finally {
        this.inFlight--;
      }
    }
  }

  private async deliver(
    registration: ServiceBusFunction,
    subscription: Subscription,
    locked: LockedMessage,
  ): Promise<void> {
    const { message, lockToken, deliveryNumber: deliveryCount } = locked;
    const { clock } = this.options;
    const roll = (rate: number | undefined): boolean =>
      (rate ?? 0) > 0 && (this.options.random ?? Math.random)() < (rate ?? 0);
    const startedAt = clock.now();
    const startOrder = this.events++;
    // When the invocation returned; unset, the record is made as it ends (the host crashed first).
    let ended: { endedAt: number; endOrder: number } | undefined;
    const record = (
      settlement: Settlement,
      logs: readonly LogLine[],
      handlerMs: number,
      error?: Error,
    ): DeliveryRecord => {
      const cause = loggedField(logs, 'cause');
      const delivery: DeliveryRecord = {
        function: registration.name,
        subscription: subscription.name,
        messageId: message.messageId,
        sequenceNumber: message.sequenceNumber,
        deliveryCount,
        outcome: loggedOutcome(logs),
        ...(cause === undefined ? {} : { cause }),
        settlement,
        ...(error === undefined ? {} : { error: `${error.name}: ${error.message}` }),
        settledAt: clock.now(),
        endToEndMs: clock.now() - message.enqueuedAt,
        handlerMs,
        startedAt,
        ...(ended ?? { endedAt: clock.now(), endOrder: this.events++ }),
        startOrder,
      };
      this.deliveries.push(delivery);
      return delivery;
    };

    if (roll(this.options.faults?.crashBeforeCommit)) {
      record('crashed', [], 0);
      return;
    }

    const stopRenewing = this.renewWhileRunning(subscription, lockToken);
    const started = performance.now();
    const invocation = invokeServiceBus(registration.name, {
      body: message.body,
      messageId: message.messageId,
      deliveryCount,
      subject: message.subject,
      correlationId: message.correlationId,
      contentType: message.contentType,
      applicationProperties: message.applicationProperties,
      enqueuedTimeUtc: new Date(message.enqueuedAt),
      expiresAtUtc: new Date(message.expiresAt),
      sequenceNumber: message.sequenceNumber,
      lockToken,
    });
    const result = await this.withinFunctionTimeout(invocation).finally(stopRenewing);
    const handlerMs = performance.now() - started;
    if (result === 'timed-out') {
      // Ends when the invocation returns; the settlement is the host's, now.
      ended = { endedAt: Number.POSITIVE_INFINITY, endOrder: Number.POSITIVE_INFINITY };
      let given: DeliveryRecord | undefined;
      this.settle(
        () => subscription.entity.abandon(lockToken, 'The invocation exceeded functionTimeout.'),
        () => (given = record('timed-out', [], handlerMs)),
      );
      const orphan = invocation.then(({ logs }) => {
        if (given === undefined) return;
        Object.assign(given, {
          endedAt: clock.now(),
          endOrder: this.events++,
          afterTimeout: { outcome: loggedOutcome(logs), cause: loggedField(logs, 'cause') },
        });
      });
      this.orphans.add(orphan);
      void orphan.finally(() => this.orphans.delete(orphan));
      return;
    }
    const { error: failure, logs } = result;
    ended = { endedAt: clock.now(), endOrder: this.events++ };

    if (failure !== undefined) {
      this.settle(
        () => subscription.entity.abandon(lockToken, `${failure.name}: ${failure.message}`),
        (lost) => record(lost ? 'lock-lost' : 'abandoned', logs, handlerMs, failure),
      );
      return;
    }
    if (roll(this.options.faults?.crashAfterCommit)) {
      record('crashed', logs, handlerMs);
      return;
    }
    if (roll(this.options.faults?.completionLost)) {
      record('completion-lost', logs, handlerMs);
      return;
    }
    this.settle(
      () => subscription.entity.complete(lockToken),
      (lost) => record(lost ? 'lock-lost' : 'completed', logs, handlerMs),
    );
  }

  /** The invocation's result, or 'timed-out' once functionTimeout (model time) has passed. */
  private withinFunctionTimeout<T>(invocation: Promise<T>): Promise<T | 'timed-out'> {
    let cancel = (): void => undefined;
    const timedOut = new Promise<'timed-out'>((resolve) => {
      cancel = this.options.clock.after(this.options.functionTimeoutMs ?? 300_000, () =>
        resolve('timed-out'),
      );
    });
    return Promise.race([invocation, timedOut]).finally(() => cancel());
  }

  /** Settles, noting a lock that ran out meanwhile (the broker then owns the message again). */
  private settle(action: () => unknown, done: (lockLost: boolean) => void): void {
    try {
      action();
      done(false);
    } catch (error) {
      if (!(error instanceof MessageLockLostError)) throw error;
      done(true);
    }
  }

  /** Renews the lock at half its duration until the handler ends or the renewal window closes. */
  private renewWhileRunning(subscription: Subscription, lockToken: string): () => void {
    const { clock } = this.options;
    const deadline = clock.now() + (this.options.maxAutoLockRenewalMs ?? 300_000);
    let cancel = (): void => undefined;
    const schedule = (): void => {
      cancel = clock.after(this.broker.lockDurationMs / 2, () => {
        if (clock.now() >= deadline) return;
        try {
          subscription.entity.renewLock(lockToken);
          schedule();
        } catch {
          // The message was settled or its lock lost: nothing left to renew.
        }
      });
    };
    schedule();
    return () => cancel();
  }
}
