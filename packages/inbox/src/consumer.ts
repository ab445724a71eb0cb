import type { Delivery } from './delivery';
import { checkEventKeyOption, type EventKeyOption } from './eventKey';
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
  /** Validates the body; a body it refuses is poison (`schema-violation`) and the handler never sees it. */
  schema: MessageSchema<M>;
  /**
   * Messages as the producer sends them, each one the schema accepts: `npm run verify` runs them
   * beside those it makes from the schema (and alone when the schema is not zod's), and a reader
   * sees what the consumer takes.
   * @default [] (none)
   */
  examples?: readonly NoInfer<M>[];
}

export interface InboxConsumerDeclaration<M> extends ConsumerDeclaration<M> {
  /** The logical partition the message's effect lives in; the marker goes there too. */
  partitionKey(message: M): string;
  /**
   * Stages the message's writes on `tx`. It may run more than once for one delivery (after an ETag
   * conflict or a failed condition, see `tx.previousFailure`), so it must only stage, never write.
   * When it stages an alternative instead of the main effect, it says so with `tx.recordAlternative`.
   */
  handle(message: M, tx: PartitionTransaction, delivery: Delivery): void | Promise<void>;
  /**
   * Opt-in: catch a producer that sends the same event again under a fresh MessageId, which the
   * broker's window and the marker cannot see. The batch also creates a document keyed on the
   * event's business key (`of`); a message whose key this consumer already applied under another
   * MessageId is absorbed or flagged (`onConflict`). Costs about 5 RU more per message
   * (packages/inbox/README.md#producers-that-re-mint-messageids).
   * @default undefined (no check)
   */
  eventKey?: EventKeyOption<M>;
}

export interface VersionedConsumerDeclaration<M> extends ConsumerDeclaration<M> {
  /**
   * The absolute state the message carries, with its version. It is written only over an older
   * version, so a repeated or out-of-order message is a no-op and needs no marker.
   */
  project(message: M, delivery: Delivery): VersionedDocument;
}

/**
 * What defineInboxConsumer returns: the declaration, with its kind. A function file registers it
 * with `consumerTrigger` (src/app.ts), which reads where it reads from (its subscription) in
 * src/topology.json.
 */
export type InboxConsumer<M> = InboxConsumerDeclaration<M> & { kind: 'inbox' };
/** What defineVersionedConsumer returns: the declaration, with its kind. */
export type VersionedConsumer<M> = VersionedConsumerDeclaration<M> & { kind: 'versioned' };
export type Consumer<M = unknown> = InboxConsumer<M> | VersionedConsumer<M>;

/**
 * Defines a consumer whose effect is applied exactly once: the handler stages its writes on a
 * PartitionTransaction, and the inbox commits them with a marker for the message in one
 * transactional batch, so a redelivery finds the marker and writes nothing. It throws a
 * SettingsError for an `eventKey` option it cannot use. Registering it (`consumerTrigger`) throws
 * when src/topology.json declares no subscription for `name`.
 *
 * @example
 * ```ts
 * export const paymentApplier = defineInboxConsumer({
 *   name: 'billing.payment-applier',
 *   schema: PaymentReceived, // a zod schema
 *   partitionKey: (payment) => `invoice-${payment.invoiceId}`,
 *   handle(payment, tx) {
 *     tx.patch(payment.invoiceId, [{ op: 'incr', path: '/paidMinor', value: payment.amountMinor }]);
 *   },
 * });
 * ```
 */
export function defineInboxConsumer<M>(declaration: InboxConsumerDeclaration<M>): InboxConsumer<M> {
  if (declaration.eventKey !== undefined) checkEventKeyOption(declaration.name, declaration.eventKey);
  return { ...declaration, kind: 'inbox' };
}

/**
 * Defines a consumer whose messages carry absolute state and a version (natural idempotency): the
 * projected document is written only over an older version, so a repeat or a late arrival is a
 * no-op, without a marker. Registering it (`consumerTrigger`) throws when src/topology.json declares
 * no subscription for `name`.
 *
 * @example
 * ```ts
 * export const invoiceStatusProjector = defineVersionedConsumer({
 *   name: 'billing.invoice-status-projector',
 *   schema: InvoiceStatusChanged, // a zod schema
 *   project: (event) => ({
 *     id: `status-${event.invoiceId}`,
 *     partitionKey: `invoice-${event.invoiceId}`,
 *     status: event.status,
 *     version: event.version,
 *   }),
 * });
 * ```
 */
export function defineVersionedConsumer<M>(
  declaration: VersionedConsumerDeclaration<M>,
): VersionedConsumer<M> {
  return { ...declaration, kind: 'versioned' };
}
