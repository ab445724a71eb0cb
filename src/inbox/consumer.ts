import { bindingOf, type ConsumerBinding } from '../topology';
import type { Delivery } from './delivery';
import type { PartitionTransaction } from './transaction';
import type { VersionedDocument } from './versioned';

/** Any schema with zod's `safeParse` shape (zod itself, or an adapter around another validator). */
export interface MessageSchema<M> {
  safeParse(
    input: unknown,
  ): { success: true; data: M } | { success: false; error: { issues: readonly SchemaIssue[] } };
}

export interface SchemaIssue {
  path: readonly PropertyKey[];
  message: string;
}

interface ConsumerDeclaration<M> {
  /** Consumer id: the marker namespace and the telemetry dimension. Declared in src/topology.json. */
  name: string;
  schema: MessageSchema<M>;
}

export interface InboxConsumerDeclaration<M> extends ConsumerDeclaration<M> {
  /** The logical partition the message's effect lives in; the marker goes there too. */
  partitionKey(message: M): string;
  /**
   * Stages the message's writes on `tx`. It may run more than once for one delivery (after an ETag
   * conflict or a failed condition, see `tx.previousFailure`), so it must only stage, never write.
   * When it stages a fallback instead of the main effect, it says so with `tx.recordAlternative`.
   */
  handle(message: M, tx: PartitionTransaction, delivery: Delivery): void | Promise<void>;
}

export interface VersionedConsumerDeclaration<M> extends ConsumerDeclaration<M> {
  /**
   * The absolute state the message carries, with its version. It is written only over an older
   * version, so a repeated or out-of-order message is a no-op and needs no marker.
   */
  project(message: M, delivery: Delivery): VersionedDocument;
}

export type InboxConsumer<M> = InboxConsumerDeclaration<M> & ConsumerBinding & { kind: 'inbox' };
export type VersionedConsumer<M> = VersionedConsumerDeclaration<M> & ConsumerBinding & { kind: 'versioned' };
export type Consumer<M = unknown> = InboxConsumer<M> | VersionedConsumer<M>;

/** A consumer whose effect is made exactly-once by an inbox marker in the same transactional batch. */
export function defineInboxConsumer<M>(declaration: InboxConsumerDeclaration<M>): InboxConsumer<M> {
  return { ...declaration, ...bindingOf(declaration.name), kind: 'inbox' };
}

/** A consumer whose messages carry absolute state and a version: natural idempotency, no marker. */
export function defineVersionedConsumer<M>(
  declaration: VersionedConsumerDeclaration<M>,
): VersionedConsumer<M> {
  return { ...declaration, ...bindingOf(declaration.name), kind: 'versioned' };
}
