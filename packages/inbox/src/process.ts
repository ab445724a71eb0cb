import { hash } from 'node:crypto';

import type { Container, OperationInput } from '@azure/cosmos';

import type { Consumer, InboxConsumer, VersionedConsumer } from './consumer';
import type { Delivery } from './delivery';
import { type DeliveryCause, duplicateCause, SUSPECTED_PRODUCER_DUPLICATE } from './duplicateCause';
import {
  bounded,
  ConcurrencyConflictError,
  InboxError,
  PoisonMessageError,
  TransientStoreError,
} from './errors';
import {
  buildEventKeyDocument,
  type EventKeyConflict,
  type EventKeyDocument,
  eventKeyFingerprint,
  eventKeyId,
  eventKeyOf,
  eventKeyRetentionSeconds,
} from './eventKey';
import { jsonBytesBound } from './jsonBytes';
import { buildMarker, type Marker, markerId, markerKey, payloadHash } from './marker';
import type { OutboxRoutes } from './outbox';
import type { Settings } from './settings';
import { fromStore, storeFailure } from './storeFailure';
import type { Outcome } from './telemetry';
import type { TraceCarrier } from './tracing';
import { type FailedWrite, PartitionTransaction } from './transaction';
import { writeIfNewer } from './versioned';

/** Cosmos DB's limits for one transactional batch. */
export const MAX_BATCH_OPERATIONS = 100;
export const MAX_BATCH_BYTES = 2 * 1024 * 1024;

export interface ProcessDependencies {
  container: Container;
  /** serviceBus.duplicateWindowSeconds dates a resend after the window; unset, none is called one. */
  settings: Pick<Settings, 'inbox'> & Partial<Pick<Settings, 'serviceBus'>>;
  now: () => Date;
  /** Waits between handler runs after an ETag conflict. */
  sleep: (ms: number) => Promise<void>;
  random: () => number;
  /**
   * Where a consumer may publish (src/topology.json: the topics it is a publisher of, and the
   * subjects someone takes there); `tx.publish` anywhere else is poison. Unset: not checked (tests, tools).
   */
  outboxRoutes?: (consumer: string) => OutboxRoutes;
  /** Told each time an ETag conflict makes the handler run again. */
  onEtagRetry?: (consumer: string) => void;
  /**
   * Awaited once the message is known not to be poison, before its first Cosmos DB request: the
   * circuit breaker holds the delivery here while Cosmos DB is failing (packages/inbox/src/breaker.ts).
   */
  beforeStore?: () => Promise<void>;
}

export interface ProcessResult {
  outcome: Exclude<Outcome, 'poison' | 'retried'>;
  /**
   * Why a duplicate came (packages/inbox/src/duplicateCause.ts); set when the outcome is `duplicate`, and on
   * a delivery applied although its event key was applied under another MessageId (`flag`).
   */
  duplicateCause?: DeliveryCause;
  /**
   * The consumer's event key (its `eventKey` option) was applied under another MessageId: what the
   * consumer did with this message, the MessageId that applied the key, and the key as logs may
   * show it (length and hash prefix).
   */
  suspectedProducerDuplicate?: SuspectedProducerDuplicate;
  /** When the marker a duplicate or payload mismatch met was written (its processedAt). */
  markerWrittenAt?: Date;
  /** The marker was not there at this delivery's first read, and its batch met it (409). */
  markerAppeared?: boolean;
  /** The handler's alternative, when it took one (see PartitionTransaction.recordAlternative). */
  alternative?: string;
  requestCharge: number;
  /** Cosmos DB requests this delivery made: batches, point reads. */
  requests: number;
  /** Handler runs. */
  attempts: number;
  /** Messages the committed batch put in the outbox (see PartitionTransaction.publish). */
  published?: number;
  /**
   * What a committed batch (or a versioned write) changed: the partition, and each staged write's
   * kind and document id, in order (the marker aside). Business ids: logged at debug level only.
   */
  wrote?: { partitionKey: string; documents: { kind: string; id: string }[] };
}

export interface SuspectedProducerDuplicate {
  handling: 'absorbed' | 'flagged';
  /** The MessageId of the message that applied the event, as it came (message content: bound it to echo it). */
  firstMessageId: string;
  eventKey: { characters: number; sha256: string };
}

interface ParsedMessage<M> {
  messageId: string;
  message: M;
  payloadHash: string;
}

/**
 * Applies one delivery's effect at most once per consumer, or throws:
 *   PoisonMessageError        the message can never succeed; nothing was written
 *   TransientStoreError       Cosmos DB failed now; a redelivery may succeed
 *   ConcurrencyConflictError  the handler kept losing races; a redelivery will try again
 */
export async function processDelivery(
  consumer: Consumer,
  delivery: Delivery,
  deps: ProcessDependencies,
  /** The delivery's trace context, which `tx.publish` stores with each outbox document (./tracing.ts). */
  trace?: TraceCarrier,
): Promise<ProcessResult> {
  // Before any read: a marker written after this instant was written by a delivery running alongside.
  const startedAt = deps.now();
  const parsed = readMessage(consumer, delivery);
  const result = await (consumer.kind === 'inbox'
    ? processWithInbox(consumer, delivery, parsed, deps, trace)
    : processVersioned(consumer, delivery, parsed, deps));
  // A suspected producer duplicate comes with its cause, decided by the batch.
  if (result.outcome !== 'duplicate' || result.duplicateCause !== undefined) return result;
  return {
    ...result,
    duplicateCause: duplicateCause({
      deliveryCount: delivery.deliveryCount,
      applicationProperties: delivery.applicationProperties,
      delayedRetryCopy: delivery.retry !== undefined,
      markerWrittenAt: result.markerWrittenAt,
      markerAppearedDuringDelivery: result.markerAppeared === true,
      deliveryStartedAt: startedAt,
      now: deps.now(),
      duplicateWindowSeconds: deps.settings.serviceBus?.duplicateWindowSeconds ?? Number.POSITIVE_INFINITY,
    }),
  };
}

/**
 * parseMessage, where anything else thrown is poison too: reading a message does no I/O, so an
 * error there (a RangeError or TypeError from an input our code or a library cannot handle, or a
 * bug) comes back on every delivery, and no outage can cause one.
 */
function readMessage<M>(consumer: Consumer<M>, delivery: Delivery): ParsedMessage<M> {
  try {
    return parseMessage(consumer, delivery);
  } catch (error) {
    if (error instanceof InboxError) throw error;
    const { name, message } = error instanceof Error ? error : { name: typeof error, message: '' };
    throw new PoisonMessageError(
      'unprocessable',
      `Reading the message failed with ${bounded(`${name}: ${message}`)}; it would fail the same way on every delivery.`,
      { cause: error },
    );
  }
}

/** JSON bodies nested deeper than this are poison: nothing recursive ever sees them. */
export const MAX_BODY_DEPTH = 64;

function parseMessage<M>(consumer: Consumer<M>, delivery: Delivery): ParsedMessage<M> {
  const lost = delivery.shadowedByBody?.filter((field) => field === 'messageId' || field === 'deliveryCount');
  if (lost !== undefined && lost.length > 0) {
    throw new PoisonMessageError(
      'metadata-shadowed-by-body',
      `The body has a top-level ${lost.join(' and ')} property, which the Functions host ` +
        `puts in place of the broker's (names compared ignoring case), so the message cannot be deduplicated. Rename it.`,
    );
  }
  if (delivery.invalidRetryCopy !== undefined) {
    throw new PoisonMessageError(
      'invalid-retry-copy',
      `A delayed-retry copy that cannot be read as one (${delivery.invalidRetryCopy}): its effect could not be told apart from the original's.`,
    );
  }
  if (delivery.retry !== undefined && delivery.retry.for !== consumer.name) {
    throw new PoisonMessageError(
      'invalid-retry-copy',
      `A delayed-retry copy scheduled for subscription '${bounded(delivery.retry.for, 60)}' reached consumer ${consumer.name}: check the subscriptions' filters.`,
    );
  }
  if (delivery.messageId === undefined) {
    throw new PoisonMessageError(
      'missing-message-id',
      'The message has no MessageId, so its effect cannot be deduplicated.',
    );
  }
  const body = jsonBody(delivery.body);
  if (deeperThan(body, MAX_BODY_DEPTH)) {
    throw new PoisonMessageError(
      'too-deep',
      `The body nests arrays or objects more than ${MAX_BODY_DEPTH} levels deep.`,
    );
  }
  const result = consumer.schema.safeParse(body);
  if (!result.success) {
    const issues = result.error.issues
      .slice(0, 5)
      .map((issue) => `${bounded(issue.path.map(String).join('.')) || '(body)'}: ${bounded(issue.message)}`)
      .join('; ');
    throw new PoisonMessageError(
      'schema-violation',
      `The body does not match the ${consumer.name} message schema: ${issues}.`,
    );
  }
  return { messageId: delivery.messageId, message: result.data, payloadHash: payloadHash(body) };
}

/**
 * Where processing would put a delivery's inbox marker: its id (under the key the adapter derives,
 * lossy MessageIds included), its partition, and the payload hash it records. Throws the
 * PoisonMessageError processing would throw. For tools that ask whether a message was applied.
 */
export function markerLocation<M>(
  consumer: InboxConsumer<M>,
  delivery: Delivery,
): { id: string; partitionKey: string; payloadHash: string } {
  const parsed = readMessage(consumer, delivery);
  return {
    id: markerId(consumer.name, markerKey(delivery, parsed.messageId, parsed.payloadHash)),
    partitionKey: partitionKeyOf(consumer, parsed.message),
    payloadHash: parsed.payloadHash,
  };
}

/** Whether a value nests arrays or objects more than `limit` levels deep, walked with an explicit stack. */
function deeperThan(value: unknown, limit: number): boolean {
  const pending: [unknown, number][] = [[value, 0]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [node, depth] = next;
    if (typeof node !== 'object' || node === null) continue;
    if (depth === limit) return true;
    for (const child of Object.values(node)) pending.push([child, depth + 1]);
  }
  return false;
}

/** The host hands JSON bodies parsed; a string or bytes means it could not parse them, so we try once. */
function jsonBody(body: unknown): unknown {
  if (typeof body !== 'string' && !Buffer.isBuffer(body)) return body;
  // Stryker disable next-line ConditionalExpression,EqualityOperator,StringLiteral: equivalent: JSON.parse reads a Buffer as its UTF-8 text, and a string's toString ignores the encoding
  const text = typeof body === 'string' ? body : body.toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Its length and a hash prefix tell two bodies apart; the content (personal data?) stays out of logs.
    throw new PoisonMessageError(
      'body-not-json',
      `The body is not JSON (${text.length} characters, SHA-256 ${hash('sha256', text, 'hex').slice(0, 16)}).`,
    );
  }
}

/** One delivery to an inbox consumer, and what its requests have cost so far. */
interface InboxRun<M> {
  consumer: InboxConsumer<M>;
  delivery: Delivery;
  parsed: ParsedMessage<M>;
  deps: ProcessDependencies;
  partitionKey: string;
  /** The marker's key: the MessageId, or for a lossy one the MessageId and the payload hash. */
  key: string;
  /** The delivery's trace context, stored with each outbox document its batch commits. */
  trace: TraceCarrier | undefined;
  requestCharge: number;
  requests: number;
  /** A redelivery's first read found no marker (knownOnRedelivery). */
  noMarkerAtStart?: boolean;
  /** The consumer's event key for this message, when it declares one. */
  eventKey: EventKeyRun | undefined;
  /**
   * Set once the batch met the event key under another MessageId and the consumer only flags it:
   * the next run leaves the event key document out, so that the effect applies.
   */
  flagged?: SuspectedProducerDuplicate;
}

interface EventKeyRun {
  key: string;
  onConflict: EventKeyConflict;
  retentionSeconds: number;
}

/** The batch one run of the handler makes: the marker, the event key document if any, then the staged writes. */
interface Built {
  tx: PartitionTransaction;
  marker: Marker;
  operations: OperationInput[];
  /** The index of the first staged write in `operations`: 1, or 2 after an event key document. */
  firstStaged: number;
}

/**
 * The inbox's way: run the handler, commit the marker and its staged writes in one batch, and read
 * the batch's answer. A failed condition or ETag runs the handler again with the failure
 * (`tx.previousFailure`), at most INBOX_MAX_ATTEMPTS times.
 */
async function processWithInbox<M>(
  consumer: InboxConsumer<M>,
  delivery: Delivery,
  parsed: ParsedMessage<M>,
  deps: ProcessDependencies,
  trace: TraceCarrier | undefined,
): Promise<ProcessResult> {
  const run: InboxRun<M> = {
    consumer,
    delivery,
    parsed,
    deps,
    trace,
    partitionKey: partitionKeyOf(consumer, parsed.message),
    key: markerKey(delivery, parsed.messageId, parsed.payloadHash),
    eventKey:
      consumer.eventKey === undefined
        ? undefined
        : {
            key: eventKeyOf(consumer.eventKey, parsed.message),
            onConflict: consumer.eventKey.onConflict,
            retentionSeconds: eventKeyRetentionSeconds(
              consumer.name,
              consumer.eventKey,
              deps.settings.inbox.retentionSeconds,
            ),
          },
    requestCharge: 0,
    requests: 0,
  };
  await deps.beforeStore?.();
  const known = await knownOnRedelivery(run);
  if (known) return known;
  let previousFailure: FailedWrite | undefined;
  // The run after a flagged event key is not a failed attempt: it gets one more.
  for (let attempt = 1; attempt <= deps.settings.inbox.maxAttempts + (run.flagged ? 1 : 0); attempt++) {
    const built = await handled(run, previousFailure);
    const { tx } = built;
    run.requests += tx.reads + 1;
    const response = await commit(deps.container, built.operations, run.partitionKey);
    run.requestCharge += tx.readRequestCharge + response.requestCharge;
    const next = await afterBatch(run, built, response, attempt);
    if ('outcome' in next) return next;
    // The marker or the event key was purged under us, or the key is flagged: run again.
    if (next.failure === undefined) continue;
    previousFailure = next.failure;
    // Stryker disable next-line OptionalChaining: equivalent: a failure is returned only for a staged write, which is there
    if (next.failure.status === 412 && tx.staged[response.failedAt - built.firstStaged]?.guard === 'etag') {
      // Someone changed the document between the handler's read and our commit: read again, after a
      // short random pause so that competing deliveries do not collide again in lockstep. Neither
      // the pause nor the retry when no run follows.
      if (attempt < deps.settings.inbox.maxAttempts) {
        deps.onEtagRetry?.(consumer.name);
        await deps.sleep(Math.round(deps.random() * Math.min(1000, 20 * 2 ** attempt)));
      }
    }
  }
  const last = previousFailure;
  throw new ConcurrencyConflictError(
    `Gave up after ${deps.settings.inbox.maxAttempts} handler runs: the last batch failed on the ${last?.kind ?? 'marker'} of ` +
      `'${bounded(last?.id ?? run.key)}'${last?.name ? ` (${last.name})` : ''} with ${last?.status ?? 'a conflict'}.`,
  );
}

/**
 * A redelivery is most likely a duplicate: one read settles it, the handler does not run, and the
 * payload is compared even when the first delivery failed before it could compare (a 503, a
 * timeout, a crash, a lost lock) and a different body reused the MessageId.
 */
async function knownOnRedelivery<M>(run: InboxRun<M>): Promise<ProcessResult | undefined> {
  if (run.delivery.deliveryCount <= 1) return undefined;
  const { consumer, deps, key, partitionKey, parsed } = run;
  const known = await storedMarker(deps.container, markerId(consumer.name, key), partitionKey);
  run.requests++;
  run.requestCharge += known.requestCharge;
  if (known.payloadHash === undefined) {
    run.noMarkerAtStart = true;
    return undefined;
  }
  return {
    outcome: sameOrNot(known.payloadHash, parsed),
    ...cost(run),
    attempts: 0,
    markerWrittenAt: known.processedAt,
  };
}

/**
 * One run of the handler on a fresh transaction, and the batch it makes: the marker first, then the
 * event key document (unless it is flagged), then its writes.
 */
async function handled<M>(run: InboxRun<M>, previousFailure: FailedWrite | undefined): Promise<Built> {
  const { consumer, delivery, parsed, deps, partitionKey, key } = run;
  const tx = new PartitionTransaction(deps.container, partitionKey, previousFailure, {
    source: {
      consumer: consumer.name,
      key,
      messageId: parsed.messageId,
      correlationId: delivery.correlationId,
      routes: deps.outboxRoutes?.(consumer.name),
      trace: run.trace,
    },
    now: deps.now(),
  });
  // What the handler throws is its own (its code, its dependencies), passed through as it is:
  // only a request `tx` sends to Cosmos DB is the store's (see storeFailure.ts).
  await consumer.handle(parsed.message, tx, delivery);
  const marker = buildMarker({
    consumer: consumer.name,
    messageId: parsed.messageId,
    key,
    partitionKey,
    payloadHash: parsed.payloadHash,
    delivery,
    now: deps.now(),
    retentionSeconds: deps.settings.inbox.retentionSeconds,
    ttlBackstopSeconds: deps.settings.inbox.ttlBackstopSeconds,
    alternative: tx.alternative,
  });
  const operations: OperationInput[] = [{ operationType: 'Create', resourceBody: marker }];
  if (run.eventKey !== undefined && run.flagged === undefined) {
    const document = buildEventKeyDocument({
      consumer: consumer.name,
      key: run.eventKey.key,
      partitionKey,
      messageId: parsed.messageId,
      markerId: marker.id,
      now: deps.now(),
      retentionSeconds: run.eventKey.retentionSeconds,
      ttlBackstopSeconds: deps.settings.inbox.ttlBackstopSeconds,
    });
    operations.push({ operationType: 'Create', resourceBody: document });
  }
  const firstStaged = operations.length;
  for (const write of tx.staged) operations.push(write.operation);
  assertFitsOneBatch(operations, firstStaged);
  return { tx, marker, operations, firstStaged };
}

/**
 * What a batch's answer means: the outcome (committed, or a duplicate), or the staged write that
 * failed it, for the handler's next run (none: the marker was purged between the batch and the read).
 * Anything else throws: poison for what Cosmos DB will never take, transient for the rest.
 */
async function afterBatch<M>(
  run: InboxRun<M>,
  { tx, marker, operations, firstStaged }: Built,
  { failedAt, status }: { failedAt: number; status: number },
  attempt: number,
): Promise<ProcessResult | { failure: FailedWrite | undefined }> {
  const { deps, partitionKey, parsed } = run;
  if (failedAt === -1) {
    const { alternative } = tx;
    return {
      outcome: alternative === undefined ? 'processed' : 'alternative',
      alternative,
      ...(run.flagged === undefined
        ? {}
        : { duplicateCause: SUSPECTED_PRODUCER_DUPLICATE, suspectedProducerDuplicate: run.flagged }),
      published: tx.published.length,
      ...cost(run),
      attempts: attempt,
      wrote: { partitionKey, documents: tx.staged.map(({ kind, id }) => ({ kind, id })) },
    };
  }
  if (failedAt === 0) {
    if (status !== 409)
      throw new TransientStoreError(`Cosmos DB refused the inbox marker with ${status}.`, status);
    // Timeline of a duplicate: delivery 1 commits marker + effect → its completion is lost or its
    // lock expires → delivery 2 (maybe running concurrently) gets 409 on the marker, writes nothing.
    // The batch's response does not carry the marker, so one read tells a duplicate from a
    // different message reusing the MessageId.
    const stored = await storedMarker(deps.container, marker.id, partitionKey);
    run.requests++;
    run.requestCharge += stored.requestCharge;
    // None: purged between our batch and our read, the marker had expired.
    // Stryker disable next-line ObjectLiteral: equivalent: a missing failure is undefined either way
    if (stored.payloadHash === undefined) return { failure: undefined };
    return {
      outcome: sameOrNot(stored.payloadHash, parsed),
      ...cost(run),
      attempts: attempt,
      markerWrittenAt: stored.processedAt,
      // Not there when this delivery began, there now: written by a delivery running alongside.
      markerAppeared: run.noMarkerAtStart === true,
    };
  }
  if (failedAt < firstStaged) return afterEventKeyConflict(run, marker.id, status, attempt);
  const write = tx.staged[failedAt - firstStaged];
  if (!write)
    throw new TransientStoreError(
      // Stryker disable next-line StringLiteral: message text only
      `Cosmos DB reported a failure at operation ${failedAt} of ${operations.length}.`,
      status,
    );
  // An outbox document of this message is there although its marker is not (purged, or never
  // read back): the batch that staged it committed long ago. A duplicate, like a 409 on the marker.
  if (write.kind === 'publish' && status === 409) {
    return { outcome: 'duplicate', ...cost(run), attempts: attempt };
  }
  if (status === 400 || status === 413) {
    throw new PoisonMessageError(
      'rejected-by-store',
      `Cosmos DB rejected the ${write.kind} of '${bounded(write.id)}'${write.name ? ` (${write.name})` : ''} with ${status}; ` +
        `retrying cannot change that.`,
    );
  }
  if (![404, 409, 412].includes(status)) {
    throw new TransientStoreError(
      `Cosmos DB failed the ${write.kind} of '${bounded(write.id)}' with ${status}.`,
      status,
    );
  }
  return { failure: { name: write.name, kind: write.kind, id: write.id, status } };
}

/**
 * The batch failed on the event key document. Timeline of a re-minted id: message A (MessageId 1,
 * key K) commits marker 1 + key K + effect → the producer sends the same event as message B
 * (MessageId 2): the broker and marker 2 see a new message, key K fails its batch (409). One read
 * of the key document tells B apart from A itself (its marker purged before its key).
 */
async function afterEventKeyConflict<M>(
  run: InboxRun<M>,
  markerIdentity: string,
  status: number,
  attempt: number,
): Promise<ProcessResult | { failure: undefined }> {
  const { consumer, deps, partitionKey } = run;
  // The document is in the batch only when the consumer declares an event key.
  const eventKey = run.eventKey as EventKeyRun;
  if (status !== 409)
    throw new TransientStoreError(`Cosmos DB refused the event key document with ${status}.`, status);
  const { resource: stored, requestCharge } = await fromStore(() =>
    deps.container.item(eventKeyId(consumer.name, eventKey.key), partitionKey).read<EventKeyDocument>(),
  );
  run.requests++;
  run.requestCharge += requestCharge;
  // None: purged between our batch and our read, the key had expired. Run again as new.
  // Stryker disable next-line ObjectLiteral: equivalent: a missing failure is undefined either way
  if (stored === undefined) return { failure: undefined };
  // This very message, whose marker expired before its key: an ordinary duplicate.
  if (stored.markerId === markerIdentity)
    return {
      outcome: 'duplicate',
      ...cost(run),
      attempts: attempt,
      markerWrittenAt: writtenAt(stored.processedAt),
    };
  const suspected = {
    firstMessageId: String(stored.messageId),
    eventKey: eventKeyFingerprint(eventKey.key),
  };
  if (eventKey.onConflict === 'absorb') {
    return {
      outcome: 'duplicate',
      duplicateCause: SUSPECTED_PRODUCER_DUPLICATE,
      suspectedProducerDuplicate: { handling: 'absorbed', ...suspected },
      ...cost(run),
      attempts: attempt,
      markerWrittenAt: writtenAt(stored.processedAt),
    };
  }
  run.flagged = { handling: 'flagged', ...suspected };
  // Stryker disable next-line ObjectLiteral: equivalent: a missing failure is undefined either way
  return { failure: undefined };
}

/** What a delivery's requests have cost so far. */
function cost({ requestCharge, requests }: InboxRun<unknown>): { requestCharge: number; requests: number } {
  return { requestCharge, requests };
}

async function processVersioned<M>(
  consumer: VersionedConsumer<M>,
  delivery: Delivery,
  parsed: ParsedMessage<M>,
  deps: ProcessDependencies,
): Promise<ProcessResult> {
  const document = consumer.project(parsed.message, delivery);
  usablePartitionKey(document.partitionKey);
  if (!Number.isFinite(document.version)) {
    throw new PoisonMessageError(
      'schema-violation',
      `The projected document '${bounded(String(document.id))}' has no numeric version.`,
    );
  }
  await deps.beforeStore?.();
  const write = await fromStore(() =>
    writeIfNewer(deps.container, document, deps.settings.inbox.maxAttempts),
  );
  const written = write.result === 'written';
  return {
    outcome: written ? 'processed' : 'duplicate',
    requestCharge: write.requestCharge,
    requests: write.requests,
    attempts: 1,
    ...(written
      ? {
          wrote: {
            partitionKey: document.partitionKey,
            documents: [
              { kind: write.previousVersion === undefined ? 'create' : 'replace', id: document.id },
            ],
          },
        }
      : {}),
  };
}

/** The payload hash of a stored marker and when it was written, undefined when there is none. */
async function storedMarker(
  container: Container,
  id: string,
  partitionKey: string,
): Promise<{ payloadHash: string | undefined; processedAt: Date | undefined; requestCharge: number }> {
  const { resource, requestCharge } = await fromStore(() => container.item(id, partitionKey).read<Marker>());
  return {
    payloadHash: resource?.payloadHash,
    processedAt: writtenAt(resource?.processedAt),
    requestCharge,
  };
}

/** A stored document's processedAt as a date, undefined when it has none that parses. */
function writtenAt(processedAt: string | undefined): Date | undefined {
  // Stryker disable next-line ConditionalExpression: equivalent: Date.parse(undefined) is NaN too
  const written = processedAt === undefined ? Number.NaN : Date.parse(processedAt);
  return Number.isNaN(written) ? undefined : new Date(written);
}

/** A stored marker's payload hash against this delivery's: the same message again, or another one reusing the id. */
function sameOrNot(stored: string, parsed: ParsedMessage<unknown>): 'duplicate' | 'payload_mismatch' {
  return stored === parsed.payloadHash ? 'duplicate' : 'payload_mismatch';
}

function partitionKeyOf<M>(consumer: InboxConsumer<M>, message: M): string {
  let value: unknown;
  try {
    value = consumer.partitionKey(message);
  } catch (error) {
    throw new PoisonMessageError(
      'no-partition-key',
      `The partition key could not be derived: ${bounded(String((error as Error).message))}`,
      {
        cause: error,
      },
    );
  }
  return usablePartitionKey(value);
}

function usablePartitionKey(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || Buffer.byteLength(value) > 2048) {
    throw new PoisonMessageError(
      'no-partition-key',
      `The message yields no usable partition key (got ${echo(value)}); it must be a non-empty string of at most 2 KB.`,
    );
  }
  return value;
}

function assertFitsOneBatch(operations: OperationInput[], firstStaged: number): void {
  if (operations.length > MAX_BATCH_OPERATIONS) {
    throw new PoisonMessageError(
      'too-many-operations',
      `The handler staged ${operations.length - firstStaged} writes and publishes; with the marker${firstStaged > 1 ? ' and the event key' : ''} that exceeds the ${MAX_BATCH_OPERATIONS} operations of one transactional batch.`,
    );
  }
  // The SDK serialises the batch anyway; count the bytes exactly only when a cheap bound cannot rule out the limit.
  // Stryker disable next-line EqualityOperator,ConditionalExpression: equivalent: at a bound of exactly the limit the exact count (≤ the bound) passes too, and without the bound the exact count decides the same, only slower
  if (jsonBytesBound(operations) <= MAX_BATCH_BYTES) return;
  const bytes = Buffer.byteLength(JSON.stringify(operations));
  if (bytes > MAX_BATCH_BYTES) {
    throw new PoisonMessageError(
      'batch-too-large',
      `The staged writes take ${bytes} bytes; one transactional batch carries at most ${MAX_BATCH_BYTES}.`,
    );
  }
}

async function commit(
  container: Container,
  operations: OperationInput[],
  partitionKey: string,
): Promise<{ failedAt: number; status: number; requestCharge: number }> {
  let results;
  try {
    // batch() throws only when the whole request fails; a 207 (one operation failed) is returned.
    results = (await container.items.batch(operations, partitionKey)).result ?? [];
  } catch (error) {
    throw storeFailure(error);
  }
  // The operation that failed the batch (-1: none) and its status; the others report 424 (failed dependency).
  let failedAt = -1;
  let status = 0;
  let requestCharge = 0;
  for (let index = 0; index < results.length; index++) {
    const result = results[index] as (typeof results)[number];
    requestCharge += result.requestCharge ?? 0;
    // Stryker disable next-line ConditionalExpression: equivalent: Cosmos DB fails one operation of a batch and answers 424 for the others
    if (failedAt === -1 && result.statusCode >= 400 && result.statusCode !== 424) {
      failedAt = index;
      status = result.statusCode;
    }
  }
  return { failedAt, status, requestCharge };
}

/** A value for an error message: bounded text, or its type. */
function echo(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(bounded(value));
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}
