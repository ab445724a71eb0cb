import { randomUUID } from 'node:crypto';

import {
  ChangeFeedStartFrom,
  type Container,
  type FeedRange,
  type PartitionKeyRange,
  StatusCodes,
} from '@azure/cosmos';

import type { Clock } from '../servicebus/clock';
import { jsonNetDate } from './toRpcCosmosDB';
import {
  type CosmosDBFunction,
  invokeCosmosDB,
  type LogLine,
  type RetryPolicy,
  type RpcRetryContext,
} from './worker';

/**
 * A model of the Azure Functions host running a Cosmos DB trigger (extension 4.x), which is the
 * .NET SDK's change feed processor with the function as its delegate:
 *
 * - Leases (Cosmos .NET SDK v3, src/ChangeFeedProcessor/LeaseManagement): one document per
 *   partition key range in the lease container (partition key `/id`), id
 *   `<leaseContainerPrefix><account host>_<database rid>_<container rid>..<range id>`
 *   (`CosmosContainerExtensions.GetLeasePrefix`, `DocumentServiceLeaseStoreManagerOptions`), shaped
 *   as `DocumentServiceLeaseCore` (version 0: `LeaseToken`, `FeedRange`, `Owner`,
 *   `ContinuationToken` = the range's change feed etag, `timestamp`, `properties`, `Mode`), and a
 *   `<prefix>.info` marker once they exist. Not modelled: the `.lock` document of a concurrent
 *   bootstrap, lease renewal (every 17 s; one instance runs at a time here), splits.
 * - Reading (`FeedProcessorCore`): latest-version change feed of the lease's range, from its
 *   continuation, else from the beginning (`startFromBeginning`) or now; pages of at most
 *   `maxItemsPerInvocation`; an empty feed is polled again after `feedPollDelay` (default 5 s).
 *   A lease without a continuation starts "now" again at every start: changes written while no
 *   instance ran, before the first checkpoint, are never delivered.
 * - The function (`CosmosDBTriggerListener.ProcessChangesAsync`): invoked with each non-empty page
 *   through the worker path; with a retry policy the host retries it (WebJobs
 *   `FunctionExecutorExtensions.TryExecuteAsync`: fixedDelay, or exponentialBackoff as
 *   `RandomizedExponentialBackoffStrategy`, maxRetryCount -1 for ever); a failure, retried or not,
 *   is only logged, and the processor checkpoints past the page anyway (`AutoCheckpointer`). Only a
 *   stop (not drain mode) skips the checkpoint: the extension cancels its token and throws after
 *   the invocation, so the page comes again.
 * - Checkpoint: the lease replaced with the page's continuation, on its ETag.
 *
 * Faults make it misbehave as real hosts do; each is rolled once per page, after the function ran.
 */
export interface ChangeFeedFaults {
  /** The instance dies before checkpointing: its lease is taken over once expired, the page comes again. */
  crashAfterInvoke?: number;
  /** The checkpoint write fails: the processor releases the lease, re-reads it and the page comes again. */
  checkpointLost?: number;
  /** The host stops (deploy, scale-in) while the function runs, and a new instance takes the lease over. */
  restart?: number;
}

export interface ChangeFeedTriggerOptions {
  clock: Clock;
  /** The monitored container, through the host's own client. */
  monitored: Container;
  /** The lease container (partition key `/id`); it must exist. */
  leases: Container;
  faults?: ChangeFeedFaults;
  /** Seeded random source for the faults and the backoff's jitter; default Math.random. */
  random?: () => number;
  /** Told of every page done with, with the log lines of its last invocation (npm start prints them). */
  onPage?: (invocation: ChangeFeedInvocation, logs: readonly LogLine[]) => void;
  /** ChangeFeedLeaseOptions.LeaseExpirationInterval, model ms; default 60 s. */
  leaseExpirationMs?: number;
  /** ChangeFeedLeaseOptions.LeaseAcquireInterval, model ms; default 13 s. */
  leaseAcquireMs?: number;
}

export type PageOutcome =
  /** The function succeeded and the page was checkpointed. */
  | 'succeeded'
  /** The function failed on every attempt its policy allows; the page was checkpointed anyway. */
  | 'failed'
  | 'crashed'
  | 'checkpoint-lost'
  | 'restarted'
  /** stop() came while the function or its retries ran: not checkpointed. */
  | 'stopped';

export interface ChangeFeedInvocation {
  function: string;
  /** The lease's range id. */
  lease: string;
  /** The instance (the processor's instance name, a GUID per start) that handled the page. */
  instance: string;
  /** The ids of the page's documents, in feed order. */
  ids: string[];
  /** Invocations of the function for this page: 1 + retries. */
  attempts: number;
  outcome: PageOutcome;
  /** The last attempt's error, when it failed. */
  error?: string;
  /** Model time when the page was done with (epoch ms). */
  at: number;
}

/** The lease document as the .NET SDK writes it (`DocumentServiceLeaseCore`). */
export interface LeaseDocument {
  id: string;
  version: 0;
  LeaseToken: string;
  FeedRange: { Range: { min: string; max: string } };
  Owner: string | null;
  ContinuationToken: string | null;
  timestamp: string | null;
  properties: Record<string, string>;
  Mode: string;
  _etag?: string;
}

type InstanceEnd = 'stopped' | 'crashed' | 'released';

const DEFAULT_POLL_DELAY_MS = 5000;

export class ChangeFeedTrigger {
  readonly invocations: ChangeFeedInvocation[] = [];
  /** Failed change feed reads and lease writes (status and message), which the processor rides out. */
  readonly errors: string[] = [];
  private controller = new AbortController();
  private loops: Promise<void>[] = [];
  private running = 0;
  /** Per lease: an instance holds it and its last read found nothing new. */
  private readonly caughtUp = new Map<string, boolean>();
  /** Per lease: where its last read that found nothing new left off (a lease's "now" before any checkpoint). */
  private readonly positions = new Map<string, string>();
  private prefix = '';
  private containerRid = '';
  private ranges: { range: PartitionKeyRange; feedRange: FeedRange }[] = [];
  private readonly random: () => number;

  constructor(
    private readonly registration: CosmosDBFunction,
    private readonly options: ChangeFeedTriggerOptions,
  ) {
    this.random = options.random ?? Math.random;
  }

  /** The lease documents' ids prefix: `<leaseContainerPrefix><host>_<db rid>_<container rid>`. */
  get leasePrefix(): string {
    return this.prefix;
  }

  /** The listener's StartAsync: checks the lease container, creates the leases, starts one processor per range. */
  async start(): Promise<void> {
    const { monitored, leases } = this.options;
    const { name, databaseName, containerName, leaseContainerName } = this.registration;
    const leaseContainer = await leases.read().catch((error: { code?: number }) => {
      if (error.code !== StatusCodes.NotFound) throw error;
      return undefined;
    });
    if (!leaseContainer?.resource) {
      throw new Error(
        `The listener for function '${name}' was unable to start: either the source container '${containerName}' (in database '${databaseName}') or the lease container '${leaseContainerName}' does not exist. Both containers must exist before the listener starts.`,
      );
    }
    const paths = leaseContainer.resource.partitionKey?.paths ?? [];
    if (paths.length !== 1 || paths[0] !== '/id') {
      throw new Error('The lease collection, if partitioned, must have partition key equal to id.');
    }
    const [{ resource: container }, { resource: database }, endpoint] = await Promise.all([
      monitored.read(),
      monitored.database.read(),
      monitored.database.client.getReadEndpoint(),
    ]);
    this.containerRid = container?._rid ?? '';
    this.prefix = `${this.registration.leaseContainerPrefix}${new URL(endpoint).hostname}_${database?._rid ?? ''}_${this.containerRid}`;
    const { resources: ranges } = await monitored.readPartitionKeyRanges().fetchAll();
    const feedRanges = await monitored.getFeedRanges();
    this.ranges = ranges.map((range) => ({
      range,
      feedRange:
        feedRanges.find(
          (f) => f.minInclusive === range.minInclusive && f.maxExclusive === range.maxExclusive,
        ) ?? feedRanges[0]!,
    }));
    await this.bootstrap();
    this.controller = new AbortController();
    this.loops = this.ranges.map(({ range, feedRange }) => this.runLease(range, feedRange));
  }

  /** Stops reading and waits for a running invocation; what it was given is not checkpointed. */
  async stop(): Promise<void> {
    this.controller.abort();
    await Promise.all(this.loops);
    this.loops = [];
  }

  /** True when no invocation runs and every lease's last read found nothing new. */
  get idle(): boolean {
    return (
      this.running === 0 &&
      this.loops.length > 0 &&
      this.ranges.every(({ range }) => this.caughtUp.get(range.id) === true)
    );
  }

  /**
   * Resolves once the trigger is idle and nothing was written after any lease's checkpoint,
   * polling in real time (for a run on a scaled clock).
   */
  async drained(pollMs = 5): Promise<void> {
    for (;;) {
      if (this.idle && (await this.nothingAfterCheckpoints()) && this.idle) return;
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  /** The stored lease of a range ('0' with one range), as the next instance will read it. */
  async lease(rangeId = this.ranges[0]?.range.id ?? '0'): Promise<LeaseDocument | undefined> {
    const id = this.leaseId(rangeId);
    const { resource } = await this.options.leases.item(id, id).read<LeaseDocument>();
    return resource;
  }

  private leaseId(rangeId: string): string {
    return `${this.prefix}..${rangeId}`;
  }

  /** `BootstrapperCore`: the leases of every range, then the `.info` marker. */
  private async bootstrap(): Promise<void> {
    const { leases } = this.options;
    const marker = `${this.prefix}.info`;
    if ((await leases.item(marker, marker).read()).resource) return;
    for (const { range } of this.ranges) {
      const lease: LeaseDocument = {
        id: this.leaseId(range.id),
        version: 0,
        LeaseToken: range.id,
        FeedRange: { Range: { min: range.minInclusive, max: range.maxExclusive } },
        Owner: null,
        ContinuationToken: null,
        timestamp: null,
        properties: {},
        Mode: 'Incremental Feed',
      };
      await leases.items.create(lease).catch((error: { code?: number }) => {
        if (error.code !== StatusCodes.Conflict) throw error;
      });
    }
    await leases.items.create({ id: marker }).catch((error: { code?: number }) => {
      if (error.code !== StatusCodes.Conflict) throw error;
    });
  }

  /** One lease: instance after instance (a crash, a restart, a lost checkpoint) until stop(). */
  private async runLease(range: PartitionKeyRange, feedRange: FeedRange): Promise<void> {
    for (;;) {
      // Any other failure (acquiring or releasing the lease) ends the instance; a new one takes over.
      const end = await this.runInstance(range, feedRange, randomUUID()).catch((error: unknown) => {
        this.failed(error);
        return this.pause(this.options.leaseAcquireMs ?? 13_000).then(() => 'released' as const);
      });
      this.caughtUp.set(range.id, false);
      if (end === 'stopped' || this.controller.signal.aborted) return;
    }
  }

  private async runInstance(
    range: PartitionKeyRange,
    feedRange: FeedRange,
    instance: string,
  ): Promise<InstanceEnd> {
    const acquired = await this.acquire(range.id, instance);
    if (!acquired) return 'stopped';
    let lease: LeaseDocument = acquired;
    const { registration } = this;
    const iterator = this.options.monitored.items.getChangeFeedIterator<Record<string, unknown>>({
      changeFeedStartFrom: this.startFrom(lease, feedRange),
      ...(registration.maxItemsPerInvocation === undefined
        ? {}
        : { maxItemCount: registration.maxItemsPerInvocation }),
    });
    for (;;) {
      if (this.controller.signal.aborted) return this.release(lease, 'stopped');
      // A failed read (`FeedProcessorCore.HandleFailedRequest`): tried again after the poll delay.
      const response = await iterator.readNext().catch((error: unknown) => this.failed(error));
      if (response === undefined) {
        await this.pause(registration.feedPollDelay ?? DEFAULT_POLL_DELAY_MS);
        continue;
      }
      if (response.statusCode === StatusCodes.NotModified) {
        const position = this.rangeContinuation(response.continuationToken, range);
        if (position !== undefined) this.positions.set(range.id, position);
        this.caughtUp.set(range.id, true);
        await this.pause(registration.feedPollDelay ?? DEFAULT_POLL_DELAY_MS);
        continue;
      }
      this.caughtUp.set(range.id, false);
      const documents = response.result;
      const continuation = this.rangeContinuation(response.continuationToken, range);
      this.running++;
      try {
        const page =
          documents.length === 0 ? { attempts: 0, error: undefined, logs: [] } : await this.invoke(documents);
        const record = (outcome: PageOutcome): void => {
          if (documents.length === 0) return;
          const invocation: ChangeFeedInvocation = {
            function: registration.name,
            lease: range.id,
            instance,
            ids: documents.map((document) => String(document.id)),
            attempts: page.attempts,
            outcome,
            ...(page.error === undefined ? {} : { error: page.error }),
            at: this.options.clock.now(),
          };
          this.invocations.push(invocation);
          this.options.onPage?.(invocation, page.logs);
        };
        // The extension's ThrowIfCancellationRequested: a stopping host does not checkpoint.
        if (this.controller.signal.aborted) {
          record('stopped');
          return await this.release(lease, 'stopped');
        }
        const faults = this.options.faults ?? {};
        if (this.roll(faults.crashAfterInvoke)) {
          record('crashed');
          return 'crashed';
        }
        if (this.roll(faults.restart)) {
          record('restarted');
          return await this.release(lease, 'released');
        }
        if (this.roll(faults.checkpointLost)) {
          record('checkpoint-lost');
          return await this.release(lease, 'released');
        }
        // A failed checkpoint write closes the processor, which releases the lease if it can;
        // undefined also when another instance took the lease meanwhile (LeaseLostException).
        const held = lease;
        const checkpointed = await this.checkpoint(held, continuation).catch(async (error: unknown) => {
          this.failed(error);
          await this.release(held, 'released').catch((failure: unknown) => this.failed(failure));
          return undefined;
        });
        if (checkpointed === undefined) {
          record('checkpoint-lost');
          return 'released';
        }
        lease = checkpointed;
        record(page.error === undefined ? 'succeeded' : 'failed');
      } finally {
        this.running--;
      }
    }
  }

  /** The host's retry loop around one page; stop() ends the waiting between attempts. */
  private async invoke(
    documents: readonly unknown[],
  ): Promise<{ attempts: number; error: string | undefined; logs: readonly LogLine[] }> {
    const policy = this.registration.retry;
    const nextDelay = policy ? retryDelays(policy, this.random) : undefined;
    const retryContext: RpcRetryContext | undefined = policy
      ? { retryCount: 0, maxRetryCount: policy.maxRetryCount }
      : undefined;
    for (let attempt = 0; ;) {
      const { error, logs } = await invokeCosmosDB(
        this.registration.name,
        documents,
        retryContext && { ...retryContext },
      );
      if (error === undefined) return { attempts: attempt + 1, error: undefined, logs };
      const failure = `${error.name}: ${error.message}`.slice(0, 500);
      const exhausted = policy && policy.maxRetryCount !== -1 && attempt === policy.maxRetryCount;
      if (!policy || !nextDelay || !retryContext || exhausted)
        return { attempts: attempt + 1, error: failure, logs };
      attempt++;
      retryContext.retryCount = attempt;
      retryContext.exception = { message: failure, stackTrace: error.stack ?? '', source: '' };
      if (!(await this.pause(nextDelay()))) return { attempts: attempt, error: failure, logs };
    }
  }

  /** Takes the lease over once it is free or its owner's timestamp is older than the expiration interval. */
  private async acquire(rangeId: string, instance: string): Promise<LeaseDocument | undefined> {
    const { leases, clock } = this.options;
    const id = this.leaseId(rangeId);
    for (;;) {
      if (this.controller.signal.aborted) return undefined;
      const { resource: stored } = await leases.item(id, id).read<LeaseDocument>();
      if (!stored) throw new Error(`The lease '${id.slice(0, 200)}' is gone.`);
      const since = stored.timestamp === null ? 0 : Date.parse(stored.timestamp);
      const expired = since + (this.options.leaseExpirationMs ?? 60_000) < clock.now();
      if (stored.Owner === null || stored.Owner === instance || expired) {
        const taken = await this.replace(stored, { Owner: instance });
        if (taken) return taken;
        continue;
      }
      await this.pause(this.options.leaseAcquireMs ?? 13_000);
    }
  }

  /** `ReleaseAsync`: the owner set to null, when this instance still holds the lease. */
  private async release(lease: LeaseDocument, end: InstanceEnd): Promise<InstanceEnd> {
    const id = lease.id;
    const { resource: stored } = await this.options.leases.item(id, id).read<LeaseDocument>();
    if (stored?.Owner === lease.Owner) await this.replace(stored, { Owner: null });
    return end;
  }

  /** The checkpoint: the page's continuation on the lease, if this instance still owns it. */
  private async checkpoint(
    lease: LeaseDocument,
    continuation: string | undefined,
  ): Promise<LeaseDocument | undefined> {
    if (continuation === undefined) return lease;
    return this.replace(lease, { ContinuationToken: continuation });
  }

  /** A conditional replace on the ETag, with a fresh timestamp; undefined when someone else wrote it first. */
  private async replace(
    lease: LeaseDocument,
    change: Partial<LeaseDocument>,
  ): Promise<LeaseDocument | undefined> {
    const { leases, clock } = this.options;
    const { _etag, ...body } = { ...lease, ...change };
    const next = { ...body, timestamp: jsonNetDate(new Date(clock.now()).toISOString()) };
    try {
      const { resource } = await leases
        .item(lease.id, lease.id)
        .replace<LeaseDocument>(next, { accessCondition: { type: 'IfMatch', condition: _etag ?? '' } });
      return resource;
    } catch (error) {
      if ((error as { code?: number }).code === StatusCodes.PreconditionFailed) return undefined;
      throw error;
    }
  }

  private startFrom(lease: LeaseDocument, feedRange: FeedRange): ChangeFeedStartFrom {
    if (lease.ContinuationToken !== null) return this.after(lease.ContinuationToken, feedRange);
    return this.registration.startFromBeginning
      ? ChangeFeedStartFrom.Beginning(feedRange)
      : ChangeFeedStartFrom.Now(feedRange);
  }

  /** After a range's etag: @azure/cosmos's composite continuation for the one range. */
  private after(etag: string, feedRange: FeedRange): ChangeFeedStartFrom {
    return ChangeFeedStartFrom.Continuation(
      JSON.stringify({
        rid: this.containerRid,
        Continuation: [
          {
            minInclusive: feedRange.minInclusive,
            maxExclusive: feedRange.maxExclusive,
            continuationToken: etag,
          },
        ],
      }),
    );
  }

  /** The range's etag in @azure/cosmos's continuation (what the .NET lease stores). */
  private rangeContinuation(token: string | undefined, range: PartitionKeyRange): string | undefined {
    if (token === undefined) return undefined;
    const parsed = JSON.parse(token) as {
      Continuation?: { minInclusive: string; maxExclusive: string; continuationToken?: string }[];
    };
    return parsed.Continuation?.find(
      (c) => c.minInclusive === range.minInclusive && c.maxExclusive === range.maxExclusive,
    )?.continuationToken;
  }

  /** Whether a read from each lease's checkpoint finds nothing (a lease without one: from its last empty read). */
  private async nothingAfterCheckpoints(): Promise<boolean> {
    for (const { range, feedRange } of this.ranges) {
      const lease = await this.lease(range.id).catch((error: unknown) => this.failed(error));
      if (!lease) return false;
      const from = lease.ContinuationToken ?? this.positions.get(range.id);
      if (from === undefined) return false;
      const peek = this.options.monitored.items.getChangeFeedIterator({
        changeFeedStartFrom: this.after(from, feedRange),
      });
      const response = await peek.readNext().catch((error: unknown) => this.failed(error));
      if (response?.statusCode !== StatusCodes.NotModified) return false;
    }
    return true;
  }

  private failed(error: unknown): undefined {
    const { code, message } = error as { code?: unknown; message?: unknown };
    this.errors.push(`${String(code)}: ${String(message).slice(0, 200)}`);
    return undefined;
  }

  /** Waits `ms` of model time; false, at once, when stop() comes first. */
  private pause(ms: number): Promise<boolean> {
    const { signal } = this.controller;
    if (signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      let cancel = (): void => undefined;
      const done = (waited: boolean): void => {
        cancel();
        signal.removeEventListener('abort', aborted);
        resolve(waited);
      };
      const aborted = (): void => done(false);
      signal.addEventListener('abort', aborted, { once: true });
      cancel = this.options.clock.after(ms, () => done(true));
    });
  }

  private roll(rate: number | undefined): boolean {
    return (rate ?? 0) > 0 && this.random() < (rate ?? 0);
  }
}

/**
 * The delays between attempts, per WebJobs: `FixedDelayRetryAttribute` (the same each time) and
 * `ExponentialBackoffRetryAttribute` → `RandomizedExponentialBackoffStrategy`: first the minimum,
 * then minimum + minimum × 2^(n-1) × a random factor in [0.8, 1.2), capped at the maximum.
 */
export function retryDelays(policy: RetryPolicy, random: () => number): () => number {
  if (policy.strategy === 'fixedDelay') return () => policy.delayIntervalMs;
  const { minimumIntervalMs: minimum, maximumIntervalMs: maximum } = policy;
  let current = 0;
  let exponent = 0;
  return () => {
    if (current !== maximum) {
      let interval = minimum;
      if (exponent > 0) interval += (0.8 + random() * 0.4) * 2 ** (exponent - 1) * minimum;
      if (interval < maximum) {
        current = interval;
        exponent++;
      } else {
        current = maximum;
      }
    }
    return current;
  };
}
