/**
 * The inbox's public entry: what a consumer author uses. Define a consumer
 * (defineInboxConsumer, defineVersionedConsumer), stage its writes on a PartitionTransaction,
 * throw or catch the InboxError family, and know the Settings the app reads. Everything else (the
 * Azure Functions adapters, processing, the purge, telemetry, the breaker) is behind ./internal.ts.
 *
 * The list is pinned by packages/inbox/test/publicApi.test.ts: adding or removing a name is a decision,
 * made with the docs.
 *
 * @packageDocumentation
 */
// Defining a consumer: the two ways to make an effect idempotent, and the types they return (what a
// function file passes to registration).
export {
  defineInboxConsumer,
  defineVersionedConsumer,
  type InboxConsumer,
  type VersionedConsumer,
} from './consumer';
// The third argument of `handle` and the second of `project`: MessageId, DeliveryCount, subject, ...
export type { Delivery } from './delivery';
// The one error family: handlers throw PoisonMessageError('rejected-by-handler'); the others are what
// a delivery ends in (logs, the dead-letter queue) and what the app throws on a bad setting.
export {
  ConcurrencyConflictError,
  InboxError,
  PoisonMessageError,
  SettingsError,
  TransientStoreError,
} from './errors';
// What `tx.publish` takes: a message sent after the batch commits (the outbox).
export type { OutgoingMessage } from './outbox';
// The app settings (environment variables) a consumer author may tune, with their defaults.
export type { Settings } from './settings';
// What `handle` stages its writes on, and the types its methods take and return.
export { type BusinessDocument, PartitionTransaction, type PatchStep, type ReadResult } from './transaction';
// What `project` returns.
export type { VersionedDocument } from './versioned';
