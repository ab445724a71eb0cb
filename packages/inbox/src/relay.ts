import type { Container, PatchOperation } from '@azure/cosmos';
import { context } from '@opentelemetry/api';

import { type BreakerClock, systemClock } from './breaker';
import { OUTBOX_SENT_BY_PROPERTY } from './duplicateCause';
import { bounded, storeStatusOf } from './errors';
import {
  isOutboxDocument,
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutboxEntry,
  outboxEntryOf,
  type OutboxMessage,
  storedTrace,
  type UnsendableReason,
} from './outbox';
import type { Settings } from './settings';
import { carrierOf, inSpan, linkTo, messagingAttributes, SpanKind } from './tracing';

/**
 * The outbox relay and sweeper: what sends the messages handlers published (PartitionTransaction
 * `publish`) once their batch committed, and marks them dispatched.
 *
 * The relay runs on the Cosmos DB change feed of the app's container (a Cosmos DB trigger): a page
 * of changes holds every kind of document, and the pending outbox documents among them are sent,
 * then marked. Sending comes first, so a crash between the two resends rather than loses: the
 * MessageId is deterministic, and the broker's duplicate detection drops a resend within its window
 * (the downstream inbox absorbs a later one). The sweeper, a timer, resends what is still pending
 * after OUTBOX_SWEEP_AGE: the change feed delivers at least once, but a checkpoint can move past a
 * batch whose retries ran out, or past a topic that refused its messages.
 *
 * A failing topic costs only its own documents: each topic is sent on its own, a topic that
 * refuses (see isTopicRefusal) is left pending for the sweeper while the relay's page goes on, and
 * the sweeper leaves a topic that fails for its next run and goes on with the others.
 */

/** Sends outbox messages to Service Bus; throws when a message may not have been taken. */
export interface OutboxPublisher {
  /**
   * Sends the messages to the topic, in order, in as few batches as they fit. Returns the
   * MessageIds of those that can never be sent (larger than Service Bus takes), which it skipped.
   */
  send(topic: string, messages: readonly OutboxMessage[]): Promise<readonly string[]>;
  close(): Promise<void>;
}

/** What the relay and the sweeper use: the app's container, a publisher, the clock, the settings. */
export interface RelayDependencies {
  container: Container;
  publisher: OutboxPublisher;
  now: () => Date;
  settings: Pick<Settings, 'outbox'>;
  /** The app's timers, for the deadline of a mark (real timers unless given: the model's offline). */
  after?: BreakerClock['after'];
}

/** A topic whose send failed: its documents stay pending, for a retry or the sweeper. */
export interface TopicFailure {
  topic: string;
  /** Messages left pending for it by this send. */
  messages: number;
  /** The topic itself refused the send (isTopicRefusal): trying again at once cannot help. */
  refused: boolean;
  /** The error's name, code (a ServiceBusErrorCode) and message, bounded. */
  error: string;
  cause: unknown;
}

export interface DispatchReport {
  /** Messages sent to Service Bus. */
  sent: number;
  /** Documents marked dispatched by this run. */
  marked: number;
  /** Documents someone else marked (or that expired) between the send and the mark. */
  alreadyMarked: number;
  /**
   * Outbox documents that hold no message the relay can send (UnsendableReason): marked
   * `unsendable` (kept, no ttl, with the reason) so that no run tries them again, and logged.
   */
  unsendable: number;
  /** The first ten of them: id, topic and reason, bounded. */
  setAside: SetAside[];
  /** Topics whose send failed, each once, in the order they failed. */
  failedTopics: TopicFailure[];
  requestCharge: number;
  /** A dispatch mark Cosmos DB refused (the first; every mark was tried). */
  markFailure?: Error;
}

export interface SetAside {
  id: string;
  /** The topic the document names, or `unknown`. */
  topic: string;
  reason: UnsendableReason;
  detail: string;
}

/**
 * Service Bus errors (ServiceBusErrorCode) that say the topic itself refuses the send: it does not
 * exist, the app may not send to it (its Data Sender role), it is disabled, or it is full. The SDK
 * does not retry them, and neither should a page: the sweeper tries the topic again on its next run.
 * Anything else (a timeout, a busy or unreachable namespace) is taken for transient.
 */
// Stryker disable ArrayDeclaration,StringLiteral: static: evaluated once when the module loads (packages/devkit/src/build/README.md#mutation-testing); outbox.test.ts pins each code
const REFUSALS: ReadonlySet<string> = new Set([
  'MessagingEntityNotFound',
  'UnauthorizedAccess',
  'MessagingEntityDisabled',
  'QuotaExceeded',
]);
// Stryker restore ArrayDeclaration,StringLiteral

export function isTopicRefusal(error: unknown): boolean {
  // Stryker disable next-line ConditionalExpression: equivalent: a primitive has no name, so the last check refuses it too
  if (typeof error !== 'object' || error === null) return false;
  const { name, code } = error as { name?: unknown; code?: unknown };
  // Stryker disable next-line ConditionalExpression: equivalent: the set holds only strings
  return name === 'ServiceBusError' && typeof code === 'string' && REFUSALS.has(code);
}

export interface RelayReport extends DispatchReport {
  /**
   * Why the page must be tried again (the trigger's retry policy): a dispatch mark that failed, or
   * a send that failed for a reason other than the topic refusing it. What was sent is marked first.
   */
  retry?: Error;
}

/**
 * The relay's work on one page of changes: sends the pending outbox documents, grouped by topic in
 * the page's order, then marks each dispatched. A topic that refuses is left pending, and the page
 * goes on (the sweeper resends those documents after OUTBOX_SWEEP_AGE); anything else that fails
 * is returned as `retry`, and the trigger's retry policy runs the page again. A retry (`retrying`)
 * first reads each document again and leaves out those marked since, so one failed mark does not
 * resend the whole page; what it does resend carries the same MessageIds, which the broker drops.
 */
export async function relayOutbox(
  documents: readonly unknown[],
  deps: RelayDependencies,
  retrying = false,
): Promise<RelayReport> {
  const pending = documents.filter(
    (document): document is OutboxDocument => isOutboxDocument(document) && document.status === 'pending',
  );
  let requestCharge = 0;
  let still = pending;
  if (retrying) {
    const current = await Promise.all(
      pending.map(async (document) => {
        const read = outboxEntryOf(document);
        if (!read.ok) return document; // set aside by dispatch, unread
        const response = await deps.container
          .item(document.id, read.entry.partitionKey)
          .read<OutboxDocument>();
        requestCharge += response.requestCharge;
        return response.resource;
      }),
    );
    // In the page's order (Promise.all keeps it).
    still = current.filter((document): document is OutboxDocument => document?.status === 'pending');
  }
  const report = await dispatch(still, deps, 'relay');
  const transient = report.failedTopics.find((failure) => !failure.refused);
  const retry = report.markFailure ?? (transient ? asError(transient.cause) : undefined);
  return {
    ...report,
    alreadyMarked: report.alreadyMarked + pending.length - still.length,
    requestCharge: report.requestCharge + requestCharge,
    ...(retry === undefined ? {} : { retry }),
  };
}

export interface SweepReport extends DispatchReport {
  /** Pending outbox documents when the run started. */
  pending: number;
  /** Seconds since the oldest of them was created, when the run started; 0 when none was pending. */
  oldestPendingAgeSeconds: number;
  /** Outbox documents kept `unsendable`, waiting for an operator, when the run started. */
  unsendableKept: number;
  /** More were old enough than OUTBOX_SWEEP_MAX_ITEMS: the next run goes on. */
  capped: boolean;
  /**
   * Why the run stopped early (a query or a mark Cosmos DB refused): the measurements above still
   * stand, so that the metrics (and the alerts on them) keep reporting while nothing can be sent.
   * A failing topic is not a failure of the run: it is in `failedTopics`, and the run goes on.
   */
  failure?: Error;
}

// Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); the sweeper tests pin what it selects
const PENDING_FILTER = `c.type = '${OUTBOX_TYPE}' AND c.pendingSinceEpochSeconds <= @cutoff`;
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); the sweeper tests pin what it counts
const UNSENDABLE_FILTER = `c.type = '${OUTBOX_TYPE}' AND c.unsendableSinceEpochSeconds <= @cutoff`;
/** What leaves the documents of topics that failed in this run out of the sweeper's next query. */
function skipTopics(parameters: readonly string[]): string {
  return ` AND NOT (c.topic IN (${parameters.join(', ')}))`;
}

/**
 * One run of the sweeper: resends outbox documents pending for longer than OUTBOX_SWEEP_AGE, oldest
 * first, at most OUTBOX_SWEEP_MAX_ITEMS of them, and measures what is pending and what is kept
 * unsendable (for the metrics and the alerts). A topic whose send fails is left out of the rest of
 * the run, so that its documents, however many and however old, never stand in front of another
 * topic's. The queries filter on `type`, `pendingSinceEpochSeconds`, `unsendableSinceEpochSeconds`
 * and `topic`, the container's indexed paths.
 */
export async function sweepOutbox(deps: RelayDependencies): Promise<SweepReport> {
  const { container, settings } = deps;
  const nowSeconds = Math.floor(deps.now().getTime() / 1000);
  const measured = await measureOutbox(container, nowSeconds);
  const cutoff = nowSeconds - settings.outbox.sweepAgeSeconds;
  const limit = settings.outbox.sweepMaxItems;
  const report: DispatchReport = emptyReport();
  let requestCharge = measured.requestCharge;
  let taken = 0;
  // Stryker disable next-line BooleanLiteral: equivalent: read only after a page set it
  let leftOver = false;
  let due: ReturnType<typeof dueDocuments> | undefined;
  let failure: Error | undefined;
  // Stryker disable next-line ArrayDeclaration: equivalent: only a topic of that name would be left out
  const failing: string[] = [];
  try {
    // A query per topic that fails (there are few): the next one leaves it out and starts again
    // from the oldest, which no longer includes what this run has marked.
    for (let restart = true; restart && taken < limit;) {
      restart = false;
      due = dueDocuments(container, cutoff, failing);
      while (taken < limit && due.hasMoreResults()) {
        const page = await due.fetchNext();
        requestCharge += page.requestCharge;
        // Stryker disable next-line MethodExpression: equivalent: the query selects outbox documents only
        const found = page.resources.filter(isOutboxDocument);
        const documents = found.slice(0, limit - taken);
        leftOver = found.length > documents.length;
        taken += documents.length;
        const part = await dispatch(documents, deps, 'sweeper');
        add(report, part);
        if (part.markFailure) throw part.markFailure;
        // Stryker disable next-line MethodExpression: equivalent: the query leaves out topics that failed, so none fails twice
        const failed = part.failedTopics.map((f) => f.topic).filter((topic) => !failing.includes(topic));
        if (failed.length > 0) {
          failing.push(...failed);
          restart = true;
          break;
        }
      }
    }
  } catch (error) {
    failure = asError(error);
  }
  const capped = failure === undefined && taken === limit && (leftOver || due?.hasMoreResults() === true);
  return {
    ...report,
    ...(failure === undefined ? {} : { failure }),
    requestCharge: report.requestCharge + requestCharge,
    pending: measured.pending,
    oldestPendingAgeSeconds: measured.oldest === null ? 0 : Math.max(0, nowSeconds - measured.oldest),
    unsendableKept: measured.unsendable,
    capped,
  };
}

/** Pending documents older than `cutoff`, oldest first, a page at a time, but those of `failing` topics. */
function dueDocuments(container: Container, cutoff: number, failing: readonly string[]) {
  const skip = failing.map((topic, index) => ({ name: `@skip${index}`, value: topic }));
  const without = skip.length === 0 ? '' : skipTopics(skip.map((parameter) => parameter.name));
  // A page at a time: a run holds one page of documents in memory, not OUTBOX_SWEEP_MAX_ITEMS of them.
  return container.items.query<OutboxDocument>(
    {
      query: `SELECT * FROM c WHERE ${PENDING_FILTER}${without} ORDER BY c.pendingSinceEpochSeconds`,
      parameters: [{ name: '@cutoff', value: cutoff }, ...skip],
    },
    // Stryker disable next-line ObjectLiteral: equivalent: the page size bounds memory, not what is sent
    { maxItemCount: SWEEP_PAGE },
  );
}

/** Counts what is pending (and its oldest) and what is kept unsendable: three aggregates on indexed paths. */
async function measureOutbox(
  container: Container,
  nowSeconds: number,
): Promise<{ pending: number; oldest: number | null; unsendable: number; requestCharge: number }> {
  const [counted, earliest, unsendable] = await Promise.all([
    queryAll<number>(container, `SELECT VALUE COUNT(1) FROM c WHERE ${PENDING_FILTER}`, nowSeconds),
    queryAll<number>(
      container,
      `SELECT VALUE MIN(c.pendingSinceEpochSeconds) FROM c WHERE ${PENDING_FILTER}`,
      nowSeconds,
    ),
    queryAll<number>(container, `SELECT VALUE COUNT(1) FROM c WHERE ${UNSENDABLE_FILTER}`, nowSeconds),
  ]);
  const minima = earliest.items.filter((value) => typeof value === 'number');
  return {
    pending: counted.items.reduce((sum, value) => sum + value, 0),
    // Stryker disable next-line ConditionalExpression,EqualityOperator,MethodExpression: equivalent: MIN returns one value or none, and no value gives an age of 0 either way
    oldest: minima.length > 0 ? Math.min(...minima) : null,
    unsendable: unsendable.items.reduce((sum, value) => sum + value, 0),
    requestCharge: counted.requestCharge + earliest.requestCharge + unsendable.requestCharge,
  };
}

/** Documents the sweeper reads and sends at a time. */
const SWEEP_PAGE = 100;

function emptyReport(): DispatchReport {
  return {
    sent: 0,
    marked: 0,
    alreadyMarked: 0,
    unsendable: 0,
    setAside: [],
    failedTopics: [],
    requestCharge: 0,
  };
}

function add(total: DispatchReport, part: DispatchReport): void {
  total.sent += part.sent;
  total.marked += part.marked;
  total.alreadyMarked += part.alreadyMarked;
  total.unsendable += part.unsendable;
  total.setAside.push(...part.setAside.slice(0, MAX_LISTED - total.setAside.length));
  total.failedTopics.push(...part.failedTopics);
  total.requestCharge += part.requestCharge;
}

async function queryAll<T>(
  container: Container,
  query: string,
  cutoff: number,
): Promise<{ items: T[]; requestCharge: number }> {
  const iterator = container.items.query<T>({ query, parameters: [{ name: '@cutoff', value: cutoff }] });
  const items: T[] = [];
  let requestCharge = 0;
  while (iterator.hasMoreResults()) {
    const page = await iterator.fetchNext();
    items.push(...page.resources);
    requestCharge += page.requestCharge;
  }
  return { items, requestCharge };
}

/** How many dispatch marks run at once. */
const MARK_CONCURRENCY = 16;
/**
 * Attempts of one mark before the page is given back. A mark that fails for a reason that passes
 * (a 503, a timeout, a lost response, a 429 past the SDK's retries) is tried again at once: giving
 * the page back costs the host's retry delay (5 s and more) for every message behind it, and at 1 %
 * of failed writes most pages of a busy relay held one such mark (issue 45).
 */
const MARK_ATTEMPTS = 3;
/**
 * How long one attempt of a mark may take before it is given up and tried again. The SDK waits 60 s
 * for an answer; a mark answers in milliseconds, and the change feed holds every page behind the
 * one being relayed until it ends, so a mark held by one slow replica would hold them for a minute.
 * A mark given up may still commit: it is conditional, and the next attempt then finds it done (412).
 */
const MARK_DEADLINE_MS = 5_000;
/** Statuses a mark fails with that another attempt cannot change: the request's fault, or a missing role. */
// Stryker disable next-line ArrayDeclaration: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); the relay tests pin that a 400 is not tried again
const FINAL_STATUSES: readonly number[] = [400, 401, 403, 413];
/** How many set-aside documents a report lists. */
const MAX_LISTED = 10;

interface Sendable {
  document: OutboxDocument;
  entry: OutboxEntry;
}

interface Unsendable {
  document: OutboxDocument;
  partitionKey: unknown;
  reason: UnsendableReason;
  detail: string;
}

/**
 * Sends the documents topic by topic, then marks what was sent dispatched and sets aside what can
 * never be sent. A topic whose send fails is reported in `failedTopics`, its documents left
 * pending; a mark that fails is reported as `markFailure` once every mark has been tried (a write
 * must not be left running after the invocation that started it has returned).
 */
async function dispatch(
  documents: readonly OutboxDocument[],
  deps: RelayDependencies,
  sentBy: 'relay' | 'sweeper',
): Promise<DispatchReport> {
  const report = emptyReport();
  // Stryker disable next-line ConditionalExpression: equivalent: nothing to send or mark gives the same empty report
  if (documents.length === 0) return report;
  const { byTopic, unsendable } = readDocuments(documents, sentBy);
  const sent: Sendable[] = [];
  for (const [topic, group] of byTopic) {
    try {
      const tooLarge = new Set(await sendTraced(topic, group, deps.publisher));
      for (const item of group) {
        if (!tooLarge.has(item.entry.message.messageId)) sent.push(item);
        else
          unsendable.push({
            document: item.document,
            partitionKey: item.entry.partitionKey,
            reason: 'too-large',
            // Stryker disable next-line StringLiteral: message text only
            detail: 'Service Bus refused its size: larger than the namespace takes in one message.',
          });
      }
      report.sent += group.length - tooLarge.size;
    } catch (error) {
      report.failedTopics.push({
        topic,
        messages: group.length,
        refused: isTopicRefusal(error),
        error: describeError(error),
        cause: error,
      });
    }
  }
  await mark(sent, unsendable, deps, report);
  return report;
}

/**
 * Sends one topic's messages in a `send <topic>` producer span of the relay's own (a child of the
 * relay's invocation), linked to the trace context each document stored. Each message carries its
 * document's context, not the span's: OpenTelemetry's messaging conventions give a message its
 * creation context (here the publishing delivery's, stored when the batch committed) and make a
 * batch send link to the messages' contexts, since one send span cannot be the child of several
 * traces. So the downstream consumer joins the publisher's trace, whichever relay run, retry or
 * sweep sends it. A document without a stored context (written before issue 24) is sent with the
 * send span's context instead.
 */
async function sendTraced(
  topic: string,
  group: readonly Sendable[],
  publisher: OutboxPublisher,
): Promise<readonly string[]> {
  const stored = group.map(({ document }) => storedTrace(document));
  return inSpan(
    `send ${topic}`,
    {
      kind: SpanKind.PRODUCER,
      parent: context.active(),
      // Each link names its message, so an operator (or a test) can tell which message went where.
      links: group.flatMap(({ entry }, index) =>
        linkTo(stored[index], { 'messaging.message.id': entry.message.messageId }),
      ),
      attributes: messagingAttributes('send', topic, { 'messaging.batch.message_count': group.length }),
    },
    (_span, ctx) => {
      const own = carrierOf(ctx);
      return publisher.send(
        topic,
        group.map(({ entry }, index) => {
          const trace = stored[index] ?? own;
          // Stryker disable next-line ConditionalExpression: equivalent: a message whose trace is undefined goes out the same (traceProperties(undefined) is {})
          return trace === undefined ? entry.message : { ...entry.message, trace };
        }),
      );
    },
  );
}

/**
 * The documents' messages, grouped by topic in the documents' order, and those the relay cannot read.
 * Each message is marked with who sends it (OUTBOX_SENT_BY_PROPERTY, replacing a handler's property
 * of that name): a consumer that absorbs it as a duplicate knows the outbox sent it twice
 * (packages/inbox/src/duplicateCause.ts). Not part of the stored text, which stays as the handler staged it.
 */
function readDocuments(
  documents: readonly OutboxDocument[],
  sentBy: 'relay' | 'sweeper',
): {
  byTopic: Map<string, Sendable[]>;
  unsendable: Unsendable[];
} {
  const unsendable: Unsendable[] = [];
  const byTopic = new Map<string, Sendable[]>();
  for (const document of documents) {
    const read = outboxEntryOf(document);
    if (!read.ok) {
      unsendable.push({
        document,
        partitionKey: document.partitionKey,
        reason: read.reason,
        detail: read.detail,
      });
      continue;
    }
    const group = byTopic.get(read.entry.message.topic) ?? [];
    const { message } = read.entry;
    const applicationProperties = { ...message.applicationProperties, [OUTBOX_SENT_BY_PROPERTY]: sentBy };
    group.push({ document, entry: { ...read.entry, message: { ...message, applicationProperties } } });
    byTopic.set(read.entry.message.topic, group);
  }
  return { byTopic, unsendable };
}

/**
 * Marks the sent documents dispatched (a `ttl` for OUTBOX_DISPATCHED_RETENTION) and sets the
 * unsendable ones aside, each with a patch conditional on `status = 'pending'`, at most
 * MARK_CONCURRENCY at a time, into `report`.
 */
async function mark(
  sent: readonly Sendable[],
  unsendable: readonly Unsendable[],
  deps: RelayDependencies,
  report: DispatchReport,
): Promise<void> {
  const nowSeconds = Math.floor(deps.now().getTime() / 1000);
  const dispatched: PatchOperation[] = [
    { op: 'set', path: '/status', value: 'dispatched' },
    { op: 'set', path: '/dispatchedAtEpochSeconds', value: nowSeconds },
    { op: 'set', path: '/ttl', value: deps.settings.outbox.dispatchedRetentionSeconds },
    { op: 'remove', path: '/pendingSinceEpochSeconds' },
  ];
  // A document without a partition key cannot be marked: it is reported, and stays as it is.
  for (const item of unsendable.filter((item) => typeof item.partitionKey !== 'string')) {
    if (++report.unsendable <= MAX_LISTED) report.setAside.push(setAsideEntry(item));
  }
  const marks = [
    ...sent.map(({ document, entry }) => ({
      document,
      partitionKey: entry.partitionKey,
      operations: dispatched,
      aside: undefined,
    })),
    ...unsendable
      .filter((item): item is Unsendable & { partitionKey: string } => typeof item.partitionKey === 'string')
      .map((item) => ({
        document: item.document,
        partitionKey: item.partitionKey,
        operations: setAsideOperations(item, nowSeconds),
        aside: item,
      })),
  ];
  const after = deps.after ?? ((ms: number, callback: () => void) => systemClock.after(ms, callback));
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let index = next++; index < marks.length; index = next++) {
      const { document, partitionKey, operations, aside } = marks[index] as (typeof marks)[number];
      for (let attempt = 1; ; attempt++) {
        const deadline = new AbortController();
        const cancel = after(MARK_DEADLINE_MS, () => deadline.abort());
        try {
          const response = await deps.container
            .item(document.id, partitionKey)
            .patch(
              { operations, condition: "from c where c.status = 'pending'" },
              { abortSignal: deadline.signal },
            );
          report.requestCharge += response.requestCharge;
          if (aside === undefined) report.marked++;
          else if (++report.unsendable <= MAX_LISTED) report.setAside.push(setAsideEntry(aside));
          break;
        } catch (error) {
          // 412: the relay and the sweeper both sent it, and the other marked it first (or an
          // attempt whose response was lost committed it); 404: it was marked and has expired
          // since. Either way it is dispatched.
          const status = storeStatusOf(error);
          if (status === 412 || status === 404) report.alreadyMarked++;
          else if (attempt < MARK_ATTEMPTS && !FINAL_STATUSES.includes(status ?? 0)) continue;
          else report.markFailure ??= deadline.signal.aborted ? markTimedOut(error) : asError(error);
          break;
        } finally {
          cancel();
        }
      }
    }
  };
  // Stryker disable next-line MethodExpression: equivalent: a worker with no mark left ends at once
  await Promise.all(Array.from({ length: Math.min(MARK_CONCURRENCY, marks.length) }, worker));
}

/** A mark whose every attempt ran past MARK_DEADLINE_MS: says so, where the SDK says "aborted". */
function markTimedOut(error: unknown): Error {
  return new Error(
    `Cosmos DB did not answer a dispatch mark within ${MARK_DEADLINE_MS / 1000} s (the last of its ${MARK_ATTEMPTS} attempts)`,
    { cause: error },
  );
}

/** Sets a document aside as unsendable, with why: kept, no ttl, out of the pending index. */
function setAsideOperations({ document, reason, detail }: Unsendable, nowSeconds: number): PatchOperation[] {
  return [
    { op: 'set', path: '/status', value: 'unsendable' },
    { op: 'set', path: '/unsendableSinceEpochSeconds', value: nowSeconds },
    { op: 'set', path: '/unsendableReason', value: reason },
    { op: 'set', path: '/unsendableDetail', value: bounded(detail, 500) },
    // A patch's remove needs the property: a foreign document may not have it.
    ...(document.pendingSinceEpochSeconds === undefined
      ? []
      : [{ op: 'remove', path: '/pendingSinceEpochSeconds' } as const]),
  ];
}

function setAsideEntry({ document, reason, detail }: Unsendable): SetAside {
  return {
    id: bounded(String(document.id)),
    // Stryker disable next-line StringLiteral: message text only
    topic: typeof document.topic === 'string' ? bounded(document.topic) : 'unknown',
    reason,
    detail: bounded(detail, 300),
  };
}

function describeError(error: unknown): string {
  const { name, message } = asError(error);
  const code = (error as { code?: unknown }).code;
  // Stryker disable next-line StringLiteral: message text only
  return bounded(`${name}${typeof code === 'string' ? ` (${bounded(code, 40)})` : ''}: ${message}`, 1000);
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * An operator's resend of an outbox document set aside as unsendable (npm run outbox -- resend),
 * after fixing what made it so: back to pending, as if just published. The relay reads the change
 * within seconds and sends it, or sets it aside again with its reason; the sweeper resends it after
 * OUTBOX_SWEEP_AGE otherwise. False when the document is not unsendable (any more).
 */
export async function resendUnsendable(
  container: Container,
  document: OutboxDocument,
  now: Date,
): Promise<boolean> {
  const reasonFields = ['unsendableSinceEpochSeconds', 'unsendableReason', 'unsendableDetail'] as const;
  const operations: PatchOperation[] = [
    { op: 'set', path: '/status', value: 'pending' },
    { op: 'set', path: '/pendingSinceEpochSeconds', value: Math.floor(now.getTime() / 1000) },
    // A patch's remove needs the property: a document set aside by an older version lacks them.
    ...reasonFields
      .filter((field) => document[field] !== undefined)
      .map((field) => ({ op: 'remove', path: `/${field}` }) as const),
  ];
  try {
    await container
      .item(document.id, document.partitionKey)
      .patch({ operations, condition: "from c where c.status = 'unsendable'" });
    return true;
  } catch (error) {
    const status = storeStatusOf(error);
    if (status === 412 || status === 404) return false;
    throw error;
  }
}

/**
 * An operator's discard of an outbox document set aside as unsendable (npm run outbox -- discard):
 * deleted, only as it was read (its ETag). False when it changed or went since.
 */
export async function discardUnsendable(
  container: Container,
  document: OutboxDocument & { _etag: string },
): Promise<boolean> {
  if (document.status !== 'unsendable') return false;
  try {
    await container
      .item(document.id, document.partitionKey)
      .delete({ accessCondition: { type: 'IfMatch', condition: document._etag } });
    return true;
  } catch (error) {
    const status = storeStatusOf(error);
    if (status === 412 || status === 404) return false;
    throw error;
  }
}
