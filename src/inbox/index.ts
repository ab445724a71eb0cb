/**
 * The inbox's public entry: what a consumer author uses. Define a consumer
 * (defineInboxConsumer, defineVersionedConsumer), stage its writes on a PartitionTransaction,
 * throw or catch the InboxError family, and know the Settings the app reads. Everything else (the
 * Azure Functions adapters, processing, the purge, telemetry, the breaker) is behind ./internal.ts.
 *
 * The list is pinned by test/inbox/publicApi.test.ts: adding or removing a name is a decision,
 * made with the docs.
 */
export {
  defineInboxConsumer,
  defineVersionedConsumer,
  type InboxConsumer,
  type VersionedConsumer,
} from './consumer';
export type { Delivery } from './delivery';
export {
  ConcurrencyConflictError,
  InboxError,
  PoisonMessageError,
  SettingsError,
  TransientStoreError,
} from './errors';
export type { Settings } from './settings';
export { type BusinessDocument, PartitionTransaction, type PatchStep, type ReadResult } from './transaction';
export type { VersionedDocument } from './versioned';
