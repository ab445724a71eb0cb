import type { Container, JSONObject, OperationInput, PatchOperation } from '@azure/cosmos';

import { bounded, PoisonMessageError } from './errors';
import { EVENT_KEY_TYPE } from './eventKey';
import { MARKER_TYPE } from './marker';
import { buildOutboxDocument, OUTBOX_TYPE, type OutboxSource, type OutgoingMessage } from './outbox';
import { fromStore } from './storeFailure';

/** Ids of the inbox's own documents (markerId, eventKeyId, outboxDocumentId): no handler writes them. */
// Stryker disable next-line Regex: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); outcomes.test.ts pins the prefixes
const RESERVED_ID = /^(?:inbox|outbox)-/;

/**
 * A document a handler reads or writes: any JSON object with an `id`, stored in the message's
 * logical partition of the app's container.
 *
 * @example
 * ```ts
 * interface Invoice extends BusinessDocument {
 *   totalMinor: number;
 *   paidMinor: number;
 * }
 * ```
 */
export interface BusinessDocument {
  id: string;
  /**
   * The logical partition. The transaction sets it to `tx.partitionKey` on every document it
   * stages, and refuses a document that names another partition.
   */
  partitionKey?: string;
  [property: string]: unknown;
}

/**
 * One step of `tx.patch`: Cosmos DB's patch operations (`add`, `set`, `replace`, `remove`, `incr`),
 * and `move`, which the service accepts but the SDK's type omits. At most 10 steps per patch (a
 * Cosmos DB limit).
 *
 * @example
 * ```ts
 * tx.patch(order.productId, [
 *   { op: 'incr', path: '/stock', value: -order.quantity },
 *   { op: 'incr', path: '/reserved', value: order.quantity },
 * ]);
 * ```
 */
export type PatchStep = PatchOperation | { op: 'move'; from: string; path: string };

/** A label for a staged write, so that the next attempt can ask whether it was the one that failed. */
interface Named {
  name?: string;
}

/** A patch is guarded by a predicate or by an ETag, not both: a 412 must say which one failed. */
export type PatchOptions = Named &
  ({ condition?: string; ifMatch?: never } | { ifMatch: string; condition?: never });

export type WriteKind = 'create' | 'replace' | 'upsert' | 'patch' | 'delete' | 'publish';

export interface StagedWrite {
  readonly name: string | undefined;
  readonly kind: WriteKind;
  readonly id: string;
  readonly guard: 'etag' | 'condition' | undefined;
  readonly operation: OperationInput;
}

/** The staged write that failed the previous attempt's batch, with the status Cosmos DB gave it. */
export interface FailedWrite {
  readonly name: string | undefined;
  readonly kind: WriteKind;
  readonly id: string;
  readonly status: number;
}

/** What `tx.read` returns for a document that exists: the document, and its ETag for `ifMatch`. */
export interface ReadResult<T> {
  document: T;
  etag: string;
}

/**
 * What an inbox consumer's `handle` gets: it stages the message's writes, all in the message's one
 * logical partition, and the inbox commits them with the marker as one transactional batch.
 *
 * **Staging.** `create`, `upsert`, `replace`, `patch` and `delete` only stage: nothing is written
 * while the handler runs. When it returns, the inbox sends one batch: the marker first, then the
 * staged writes in order. Cosmos DB applies all of them or none. A redelivered duplicate runs the
 * handler too, and its batch fails on the marker (409): nothing of it is written.
 *
 * **Reads.** `read` is a point read in the partition, sent at once (not part of the batch, and
 * counted in the delivery's requests). It records nothing: it returns the document with its ETag,
 * and a write that must not overwrite a change made since passes that ETag as `ifMatch`.
 *
 * **Conditions.** A staged write can fail the batch: a patch `condition` (`from c where ...`) not
 * met or an `ifMatch` ETag changed (412), a `create` of an existing id (409), a `replace`, `patch`
 * or `delete` of a missing one (404). Nothing is written, and the handler runs again with a fresh
 * transaction whose `previousFailure` names the write that failed (the `name` given when staging
 * it) and its status, so that it can stage an alternative instead (see `failed`,
 * `recordAlternative`). After a changed ETag it runs again after a short random pause (up to 1 s).
 *
 * **The failure retry.** The handler runs at most INBOX_MAX_ATTEMPTS times per delivery (default 5;
 * see Settings). When the last run's batch still fails, the delivery ends in a
 * ConcurrencyConflictError: it is given back and Service Bus redelivers it, up to
 * SERVICEBUS_MAX_DELIVERY_COUNT deliveries (default 10), then dead-letters it
 * (MaxDeliveryCountExceeded). So a handler whose condition fails every time must stage an
 * alternative on the next run, not the same write again. A staged write Cosmos DB rejects as
 * invalid (400, 413) is poison (`rejected-by-store`); a throttled or failed request (429 after the
 * SDK's retries, 5xx) is a TransientStoreError; either way nothing was written.
 *
 * **Publishing.** `publish` stages an outbox document in the same partition: it commits with the
 * marker and the writes, or not at all, and the outbox relay sends it to Service Bus after the
 * commit (README "Publishing events"). Its MessageId is derived from the consumer, the incoming
 * message and the message's name, so a re-run stages the same id.
 *
 * **The batch limits.** One transactional batch carries at most 100 operations, the marker
 * included (so 99 staged writes and publishes; 98 when the consumer declares an `eventKey`, whose
 * document is one more), and 2 MiB (2,097,152 bytes) of operations as JSON, marker included. A handler that stages more makes the message poison (`too-many-operations`,
 * `batch-too-large`): it would fail the same way on every delivery.
 *
 * @example
 * ```ts
 * handle(order, tx) {
 *   if (tx.failed('reserve', 412)) {
 *     // Not enough stock when the batch ran: record a backorder instead, still exactly once.
 *     tx.create({ id: `backorder-${order.orderId}`, type: 'backorder', quantity: order.quantity });
 *     tx.recordAlternative('backorder');
 *     return;
 *   }
 *   tx.patch(order.productId, [{ op: 'incr', path: '/stock', value: -order.quantity }], {
 *     name: 'reserve',
 *     condition: `from c where c.stock >= ${order.quantity}`,
 *   });
 * }
 * ```
 */
export class PartitionTransaction {
  private readonly writes: StagedWrite[] = [];
  private readonly publishedIds: string[] = [];
  private readonly publishedNames = new Set<string>();
  private readCount = 0;
  private readCharge = 0;
  private recordedAlternative: string | undefined;

  /** Built by the inbox for each run of the handler; a handler never builds one. */
  constructor(
    private readonly container: Container,
    /** The message's logical partition (the consumer's `partitionKey`): every read and write goes there. */
    readonly partitionKey: string,
    /**
     * The staged write that failed the previous run's batch, with its status; undefined on the first
     * run of a delivery.
     */
    readonly previousFailure: FailedWrite | undefined,
    /** Where `publish` takes its MessageIds and timestamps from; without it, `publish` throws. */
    private readonly outbox?: { source: OutboxSource; now: Date },
  ) {}

  /**
   * True when the previous run's batch failed on the write staged with this `name` (and, if given,
   * with this status: 412 condition or ETag, 409 exists, 404 missing).
   */
  failed(name: string, status?: number): boolean {
    return (
      this.previousFailure?.name === name && (status === undefined || this.previousFailure.status === status)
    );
  }

  /**
   * Says that this run stages the handler's alternative (for example `backorder`) rather than its
   * main effect. The delivery's outcome is then `alternative` (counted in `inbox.messages`), and the
   * name is logged and kept on the marker.
   */
  recordAlternative(name: string): void {
    this.recordedAlternative = name;
  }

  /** The name given to recordAlternative in this run, if any. */
  get alternative(): string | undefined {
    return this.recordedAlternative;
  }

  /**
   * Reads a document of the partition now: the document and its ETag, or undefined when there is
   * none. A failed read (throttled, unavailable) ends the delivery as a TransientStoreError.
   */
  async read<T extends BusinessDocument>(id: string): Promise<ReadResult<T> | undefined> {
    this.readCount++;
    const response = await fromStore(() => this.container.item(id, this.partitionKey).read<T>());
    this.readCharge += response.requestCharge;
    return response.resource ? { document: response.resource, etag: response.etag } : undefined;
  }

  /** Stages the creation of a document; a document with this id already there fails the batch (409). */
  create(document: BusinessDocument, options: Named = {}): void {
    this.stage(options, 'create', document.id, undefined, {
      operationType: 'Create',
      resourceBody: this.own(document),
    });
  }

  /** Stages a create-or-replace, unconditional: last writer wins. */
  upsert(document: BusinessDocument, options: Named = {}): void {
    this.stage(options, 'upsert', document.id, undefined, {
      operationType: 'Upsert',
      resourceBody: this.own(document),
    });
  }

  /**
   * Stages a read-modify-write: `ifMatch` is the ETag from `read`; if someone wrote the document
   * since, the batch fails (412) and the handler runs again with a fresh read.
   */
  replace(document: BusinessDocument, options: Named & { ifMatch: string }): void {
    this.stage(options, 'replace', document.id, 'etag', {
      operationType: 'Replace',
      id: document.id,
      ifMatch: options.ifMatch,
      resourceBody: this.own(document),
    });
  }

  /**
   * Stages a delta (`incr`, `set`, ...) of an existing document (404 when missing). With a
   * `condition` (`from c where ...`), checked by Cosmos DB when the batch runs, an unmet predicate
   * fails the batch (412); with `ifMatch`, a changed ETag does.
   */
  patch(id: string, operations: readonly PatchStep[], options: PatchOptions = {}): void {
    const guard =
      options.condition !== undefined ? 'condition' : options.ifMatch !== undefined ? 'etag' : undefined;
    // An option not given is `undefined`, which the request's JSON leaves out.
    this.stage(options, 'patch', id, guard, {
      operationType: 'Patch',
      id,
      ifMatch: options.ifMatch,
      resourceBody: { operations: operations as PatchOperation[], condition: options.condition },
    });
  }

  /** Stages the deletion of an existing document (404 when missing), with `ifMatch` if given. */
  delete(id: string, options: Named & { ifMatch?: string } = {}): void {
    // The SDK's DeleteOperationInput type lacks ifMatch; the batch wire format carries it.
    const operation = {
      operationType: 'Delete',
      id,
      // Stryker disable next-line ConditionalExpression: equivalent: an undefined ifMatch is left out of the request's JSON
      ...(options.ifMatch === undefined ? {} : { ifMatch: options.ifMatch }),
    };
    this.stage(
      options,
      'delete',
      id,
      // Stryker disable next-line ConditionalExpression: equivalent: a delete without ifMatch cannot fail with 412, the only status its guard is read for
      options.ifMatch === undefined ? undefined : 'etag',
      operation as OperationInput,
    );
  }

  /**
   * Stages a message to publish after the batch commits (see OutgoingMessage): an outbox document,
   * created in the batch after the writes staged before it. Returns its MessageId. A message Service
   * Bus would refuse (a bad topic name, a body over 192 KiB, ...) or a name used twice in one run
   * makes the incoming message poison (`invalid-outgoing-message`).
   */
  publish(message: OutgoingMessage): string {
    if (!this.outbox)
      throw new Error('This transaction cannot publish: it was built without an outbox source.');
    const document = buildOutboxDocument(
      message,
      this.publishedIds.length,
      this.outbox.source,
      this.partitionKey,
      this.outbox.now,
    );
    const name = message.name ?? `#${this.publishedIds.length}`;
    if (this.publishedNames.has(name)) {
      throw new PoisonMessageError(
        'invalid-outgoing-message',
        `tx.publish: the name ${JSON.stringify(bounded(name))} is used twice in one run; each published message needs its own.`,
      );
    }
    this.publishedNames.add(name);
    this.publishedIds.push(document.messageId);
    this.stage({ name: `publish:${name}` }, 'publish', document.id, undefined, {
      operationType: 'Create',
      resourceBody: document as unknown as JSONObject,
    });
    return document.messageId;
  }

  /** The MessageIds of the messages this run published, in order. */
  get published(): readonly string[] {
    return this.publishedIds;
  }

  /** The writes staged so far, in order: what the inbox puts in the batch after the marker. */
  get staged(): readonly StagedWrite[] {
    return this.writes;
  }

  /** Point reads this attempt made, for telemetry and the benchmark's requests-per-message. */
  get reads(): number {
    return this.readCount;
  }

  /** Request units this attempt's point reads cost: part of what a delivery reports it spent. */
  get readRequestCharge(): number {
    return this.readCharge;
  }

  private stage(
    options: Named,
    kind: WriteKind,
    id: string,
    guard: StagedWrite['guard'],
    operation: OperationInput,
  ): void {
    // Stryker disable next-line ConditionalExpression: equivalent: only a non-string id whose text starts inbox- or outbox- would differ, and Cosmos DB refuses a non-string id
    if (kind !== 'publish' && typeof id === 'string' && RESERVED_ID.test(id)) {
      throw new PoisonMessageError(
        'reserved-document',
        // Stryker disable next-line StringLiteral: message text only
        `The handler staged a ${kind} of ${JSON.stringify(bounded(id))}: ids starting inbox- or outbox- are the inbox's markers and outbox documents.`,
      );
    }
    this.writes.push({ name: options.name, kind, id, guard, operation });
  }

  private own(document: BusinessDocument): JSONObject {
    if (document.type === MARKER_TYPE || document.type === EVENT_KEY_TYPE || document.type === OUTBOX_TYPE) {
      throw new PoisonMessageError(
        'reserved-document',
        // Stryker disable next-line StringLiteral: message text only
        `The handler staged a document of type '${String(document.type)}', which only the inbox writes (its markers, event keys and outbox documents).`,
      );
    }
    if (document.partitionKey !== undefined && document.partitionKey !== this.partitionKey) {
      throw new Error(
        `Document ${JSON.stringify(bounded(String(document.id)))} names partition ${JSON.stringify(bounded(String(document.partitionKey)))}, ` +
          // Stryker disable next-line StringLiteral: message text only
          `but this message's writes go to ${JSON.stringify(bounded(this.partitionKey))}: one transactional batch covers one logical partition.`,
      );
    }
    return { ...document, partitionKey: this.partitionKey };
  }
}
