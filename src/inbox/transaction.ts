import type { Container, JSONObject, OperationInput, PatchOperation } from '@azure/cosmos';

/**
 * What a handler uses to stage its writes. Every write targets the one logical partition of the
 * message; nothing is sent until the inbox commits the marker and the staged writes in one
 * transactional batch. Reads go to Cosmos DB at once (point reads within the partition).
 */
export interface BusinessDocument {
  id: string;
  /** Set by the transaction; a document naming another partition is refused. */
  partitionKey?: string;
  [property: string]: unknown;
}

/** Cosmos DB's patch operations, with `move`, which the service accepts but the SDK's type omits. */
export type PatchStep = PatchOperation | { op: 'move'; from: string; path: string };

/** A label for a staged write, so that the next attempt can ask whether it was the one that failed. */
interface Named {
  name?: string;
}

/** A patch is guarded by a predicate or by an ETag, not both: a 412 must say which one failed. */
export type PatchOptions = Named &
  ({ condition?: string; ifMatch?: never } | { ifMatch: string; condition?: never });

export type WriteKind = 'create' | 'replace' | 'upsert' | 'patch' | 'delete';

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

export interface ReadResult<T> {
  document: T;
  etag: string;
}

export class PartitionTransaction {
  private readonly writes: StagedWrite[] = [];
  private readCount = 0;
  private fallback: string | undefined;

  constructor(
    private readonly container: Container,
    readonly partitionKey: string,
    /** Set when the handler runs again because a staged write failed (see InboxOptions.maxAttempts). */
    readonly previousFailure: FailedWrite | undefined,
  ) {}

  /** True when the previous attempt failed on the write with this name (and, if given, this status). */
  failed(name: string, status?: number): boolean {
    return (
      this.previousFailure?.name === name && (status === undefined || this.previousFailure.status === status)
    );
  }

  /**
   * Says that this attempt stages the handler's fallback (for example `backorder`) rather than its
   * main effect; the outcome is then `alternative`, and the name is logged, counted and kept on the marker.
   */
  recordAlternative(name: string): void {
    this.fallback = name;
  }

  get alternative(): string | undefined {
    return this.fallback;
  }

  async read<T extends BusinessDocument>(id: string): Promise<ReadResult<T> | undefined> {
    this.readCount++;
    const response = await this.container.item(id, this.partitionKey).read<T>();
    return response.resource ? { document: response.resource, etag: response.etag } : undefined;
  }

  create(document: BusinessDocument, options: Named = {}): void {
    this.stage(options, 'create', document.id, undefined, {
      operationType: 'Create',
      resourceBody: this.own(document),
    });
  }

  upsert(document: BusinessDocument, options: Named = {}): void {
    this.stage(options, 'upsert', document.id, undefined, {
      operationType: 'Upsert',
      resourceBody: this.own(document),
    });
  }

  /** Read-modify-write: `ifMatch` is the ETag from `read`; if someone wrote since, the handler runs again. */
  replace(document: BusinessDocument, options: Named & { ifMatch: string }): void {
    this.stage(options, 'replace', document.id, 'etag', {
      operationType: 'Replace',
      id: document.id,
      ifMatch: options.ifMatch,
      resourceBody: this.own(document),
    });
  }

  /** A delta (`incr`, `set`, ...). With a `condition` (`from c where ...`), an unmet predicate fails the batch. */
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

  delete(id: string, options: Named & { ifMatch?: string } = {}): void {
    // The SDK's DeleteOperationInput type lacks ifMatch; the batch wire format carries it.
    const operation = {
      operationType: 'Delete',
      id,
      ...(options.ifMatch === undefined ? {} : { ifMatch: options.ifMatch }),
    };
    this.stage(
      options,
      'delete',
      id,
      options.ifMatch === undefined ? undefined : 'etag',
      operation as OperationInput,
    );
  }

  get staged(): readonly StagedWrite[] {
    return this.writes;
  }

  /** Point reads this attempt made, for telemetry and the benchmark's requests-per-message. */
  get reads(): number {
    return this.readCount;
  }

  private stage(
    options: Named,
    kind: WriteKind,
    id: string,
    guard: StagedWrite['guard'],
    operation: OperationInput,
  ): void {
    this.writes.push({ name: options.name, kind, id, guard, operation });
  }

  private own(document: BusinessDocument): JSONObject {
    if (document.partitionKey !== undefined && document.partitionKey !== this.partitionKey) {
      throw new Error(
        `Document '${document.id}' names partition '${document.partitionKey}', but this message's writes go to ` +
          `'${this.partitionKey}': one transactional batch covers one logical partition.`,
      );
    }
    return { ...document, partitionKey: this.partitionKey };
  }
}
