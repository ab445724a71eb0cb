import { AsyncLocalStorage } from 'node:async_hooks';
import { setImmediate as yieldToEventLoop, setTimeout as sleep } from 'node:timers/promises';

import { type ConnectionPolicy, type PluginConfig, PluginOn } from '@azure/cosmos';

import { MAX_TIMEOUT_MS as MAX_REAL_TIMEOUT_MS, type VirtualClock, virtualClock } from './servicebus/clock';

/** Longer than the SDK's own sleep before it tries a failed query again (simulation.quiet). */
const RETRY_GRACE_MS = 10;

/**
 * The driver of a deterministic scenario run. The parties (the runner's publisher, the host's
 * deliveries, the app's handlers and breaker, the local Cosmos server) run one step at a time:
 *
 * - a Cosmos DB operation waits for its turn (`operation`, the client's operation plugin) and runs
 *   alone: its HTTP exchange with the local server, the SDK's own retries included, ends before
 *   anything else moves, so responses come back in one order however the loopback sockets are
 *   scheduled;
 * - model time (`clock`) stands still while anything works, and moves to the earliest timer only
 *   when every party waits: no operation running, none waiting for its turn, and the event loop
 *   quiet (two turns without a timer set or an operation started or finished);
 * - a request the server delays (latency) waits in model time without holding the turn (`parked`);
 * - a request whose caller's deadline (an abortSignal aborted on the model clock) passes while the
 *   server holds it fails then, and the server goes on and answers no one (`abortable`).
 *
 * Each step's microtasks run in one order, so a seed and the options give the same run: the same
 * deliveries, in the same order, with the same outcomes.
 */
export class Simulation {
  readonly clock: VirtualClock = virtualClock();
  private readonly turns: (() => void)[] = [];
  private readonly conditions: { met: () => boolean; resolve: () => void }[] = [];
  private readonly inOperation = new AsyncLocalStorage<true>();
  private running = 0;
  private activity = 0;
  private wakeDriver: (() => void) | undefined;
  private stopped = false;
  /** A request the SDK may try again in its own time failed since the driver last found it quiet. */
  private failedRequest = false;

  constructor() {
    this.clock.onActivity = () => this.activity++;
  }

  /**
   * Runs a Cosmos DB operation in its turn. An operation the SDK starts inside another runs at once.
   * `retriedAbove`: the SDK tries the request again outside it, after a real-time sleep (a query
   * or a change feed read, which run past the operation plugins); when it fails, the driver gives
   * that retry its moment before model time moves (`quiet`).
   */
  async operation<T>(send: () => Promise<T>, retriedAbove = false): Promise<T> {
    if (this.inOperation.getStore()) return send();
    await this.turn();
    try {
      return await this.inOperation.run(true, send);
    } catch (error) {
      if (retriedAbove) this.failedRequest = true;
      throw error;
    } finally {
      this.release();
    }
  }

  /** Waits `ms` of model time inside a running operation (the server's latency) without holding the turn. */
  async parked(ms: number): Promise<void> {
    const waited = this.clock.sleep(ms);
    this.release();
    await waited;
    this.running++;
  }

  /**
   * A request its caller may abort (`signal`): it fails with `aborted()` when the signal aborts
   * before it ends. The caller's deadline is a timer on the model clock, and model time moves only
   * while the server holds the request (`parked`), so that is when it can come: the caller goes on
   * in a turn of its own, and the request, which the server still finishes in its time (it may
   * commit: a write given up is not a write that did not happen), gives back the turn its wake
   * takes when it ends.
   */
  async abortable<T>(request: Promise<T>, signal: AbortSignal, aborted: () => Error): Promise<T> {
    let abort = (): void => undefined;
    const given = new Promise<Error>((resolve) => {
      abort = () => resolve(aborted());
      signal.addEventListener('abort', abort, { once: true });
    });
    const ended = request.then(
      () => undefined,
      () => undefined,
    );
    const up = await Promise.race([ended, given]);
    signal.removeEventListener('abort', abort);
    if (up === undefined) return request;
    void ended.then(() => this.release());
    await this.turn();
    throw up;
  }

  /** Resolves at the first quiet moment at which `met` holds (checked before model time moves). */
  until(met: () => boolean): Promise<void> {
    return new Promise<void>((resolve) => {
      this.conditions.push({ met, resolve });
      this.activity++;
    });
  }

  /** Drives the run until `work` settles (or `stop` is called); returns its result. */
  async drive<T>(work: Promise<T>): Promise<T> {
    let settled = false;
    const watched = work.finally(() => {
      settled = true;
      this.activity++;
    });
    watched.catch(() => undefined);
    while (!this.stopped) {
      await this.quiet();
      if (settled) return watched;
      const ready = this.conditions.filter((condition) => condition.met());
      if (ready.length > 0) {
        for (const condition of ready) {
          this.conditions.splice(this.conditions.indexOf(condition), 1);
          condition.resolve();
        }
        continue;
      }
      const turn = this.turns.shift();
      if (turn) {
        this.running++;
        turn();
        continue;
      }
      // Nothing is scheduled: something outside the model (a real timer) is still to come.
      if (!this.clock.fireNext()) await sleep(1);
    }
    return watched;
  }

  /** Ends `drive` at its next step (a run that timed out). */
  stop(): void {
    this.stopped = true;
  }

  /** Waits for a turn (the driver counts it as running when it gives it). */
  private turn(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.turns.push(resolve);
      this.activity++;
      this.wakeDriver?.();
    });
  }

  private release(): void {
    this.running--;
    this.activity++;
    this.wakeDriver?.();
  }

  /**
   * Returns once no operation runs and two event-loop turns pass without activity. After a failed
   * query or change feed read, the SDK's retry sleeps in real time (0 ms for a 503, the server's
   * retry-after for a 429) before it asks for a turn: a real-time wait of up to RETRY_GRACE_MS, set
   * after that sleep was (the SDK sets it in the microtasks that follow the failure), ends after it,
   * so that the retry comes next, not a timer the driver fires meanwhile, in every run of a seed.
   * The wait ends as soon as the retry asks for its turn: a run under a long throttling outage has
   * thousands of them.
   */
  private async quiet(): Promise<void> {
    for (;;) {
      const before = this.activity;
      await yieldToEventLoop();
      if (this.running > 0) {
        await new Promise<void>((resolve) => (this.wakeDriver = resolve));
        this.wakeDriver = undefined;
        continue;
      }
      await yieldToEventLoop();
      if (this.activity !== before || this.running !== 0) continue;
      if (!this.failedRequest) return;
      this.failedRequest = false;
      // Ends as soon as the retry asks for its turn (`turn`); RETRY_GRACE_MS when none comes.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, RETRY_GRACE_MS);
        this.wakeDriver = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeDriver = undefined;
    }
  }
}

/** The error the SDK passes on when its caller's abortSignal aborts a request (the HTTP client's). */
function requestAborted(): Error {
  return Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
}

/**
 * The Cosmos DB client options that put a client's requests on the running simulation (none when
 * `running` gives none: setup and checks go straight through), to spread into its options:
 *
 * - both levels of plugins take turns: the SDK runs point operations and batches through its
 *   operation plugins, but queries and the change feed (`queryFeed`) through its request plugins
 *   only; a request outside every turn is real I/O the driver cannot see, and it moved model time
 *   to the next timer while a change feed read was in flight (the relay then read one page per
 *   model minute, and the sweeper sent most of the outbox: issue 45). A request inside an
 *   operation runs at once (`operation`). The SDK tries a failed query again past the request
 *   plugins, after a real-time sleep: the driver waits for that retry before model time moves;
 * - a request ends when its caller's abortSignal aborts (a deadline on the model clock), even while
 *   the server holds it in model time (`abortable`);
 * - the SDK's request timeout, a real-time timer, is set out of reach: model time is not the host
 *   machine's, and a request the server holds in model time (the slow-write fault) ends when the
 *   model says, never when a loaded machine has taken 60 s of real time over the run (the SDK's
 *   TimeoutError would then end an operation while the server still held its request, and the
 *   turns would no longer add up). The SDK would give such a request up after 60 s in Azure: the
 *   model does not, so that a slow write can outlast the message lock (scenario faults);
 * - no background refresh of the account, which would be a request outside the model's turns.
 *
 * `plugins` is an SDK option its published types leave out (marked hidden).
 */
export function simulationClientOptions(running: () => Simulation | undefined): {
  plugins: PluginConfig[];
  connectionPolicy: Partial<ConnectionPolicy>;
} {
  const operation: PluginConfig['plugin'] = (context, _diagnostics, next) => {
    const simulation = running();
    return simulation ? simulation.operation(() => next(context)) : next(context);
  };
  // The caller's abortSignal is the simulation's to apply in model time (`abortable`): the HTTP
  // request itself runs to its end, as the server answers it in Azure whether anyone waits or not.
  // The SDK reads the signal as the request starts, from its own context (a plugin's `next` passes
  // on that context, not the one it is given), so the signal is taken off it for that moment.
  const request: PluginConfig['plugin'] = (context, _diagnostics, next) => {
    const simulation = running();
    if (!simulation) return next(context);
    const { options } = context;
    const signal = options.abortSignal;
    if (signal === undefined) return simulation.operation(() => next(context), true);
    if (signal.aborted) return Promise.reject(requestAborted());
    return simulation.operation(() => {
      context.options = { ...options, abortSignal: undefined };
      let sent: ReturnType<typeof next>;
      try {
        sent = next(context);
      } finally {
        context.options = options;
      }
      return simulation.abortable(sent, signal, requestAborted);
    }, true);
  };
  return {
    plugins: [
      { on: PluginOn.operation, plugin: operation },
      { on: PluginOn.request, plugin: request },
    ],
    connectionPolicy: { enableBackgroundEndpointRefreshing: false, requestTimeout: MAX_REAL_TIMEOUT_MS },
  };
}
