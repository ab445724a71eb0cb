export {
  type InboxRuntime,
  purgeTimerHandler,
  type ServiceBusHandler,
  serviceBusHandler,
  type TimerHandler,
} from './azureFunctions';
export {
  type BreakerClock,
  type BreakerLimits,
  breakerLimits,
  type BreakerOptions,
  type BreakerState,
  type BreakerTransition,
  CircuitBreaker,
  CircuitOpenError,
  holdSeconds,
  survivableOutageSeconds,
  systemClock,
} from './breaker';
export {
  type Consumer,
  defineInboxConsumer,
  defineVersionedConsumer,
  type InboxConsumer,
  type MessageSchema,
  type VersionedConsumer,
} from './consumer';
export { createCosmosClient } from './cosmos';
export { type Delivery, toDelivery } from './delivery';
export { formatDuration, parseDurationSeconds } from './duration';
export {
  ConcurrencyConflictError,
  ConfigurationError,
  InboxError,
  POISON_REASONS,
  PoisonMessageError,
  type PoisonReason,
  TransientStoreError,
} from './errors';
export { type Marker, MARKER_TYPE, markerId, payloadHash } from './marker';
export {
  markerLocation,
  MAX_BATCH_BYTES,
  MAX_BATCH_OPERATIONS,
  processDelivery,
  type ProcessDependencies,
  type ProcessResult,
} from './process';
export { purgeExpiredMarkers, type PurgeOptions, type PurgeReport } from './purge';
export {
  HOST_JSON_DEFAULTS,
  hostJsonProblems,
  loadSettings,
  type RedeliverySettings,
  retentionBoundSeconds,
  type Settings,
} from './settings';
export { InboxTelemetry, METRIC_NAMES, type Outcome, OUTCOMES } from './telemetry';
export {
  type BusinessDocument,
  type FailedWrite,
  PartitionTransaction,
  type PatchStep,
  type ReadResult,
} from './transaction';
export { type VersionedDocument, type VersionedWrite, writeIfNewer } from './versioned';
