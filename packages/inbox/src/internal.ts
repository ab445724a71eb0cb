/**
 * Everything behind the public entry (./index.ts): what the composition root (src/app.ts), the
 * offline stack, the tools and the tests use to run, observe and test the inbox. Not for consumer
 * authors, and free to change between versions of the template.
 *
 * @packageDocumentation
 */
export {
  type CosmosDBHandler,
  type InboxRuntime,
  outboxRelayHandler,
  outboxSweepHandler,
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
export { type Consumer, type MessageSchema } from './consumer';
export { createCosmosClient } from './cosmos';
export {
  asOriginal,
  type DelayedRetryBinding,
  type DelayedRetryPolicy,
  delayedRetryProblems,
  longestRetryDelaySeconds,
  MAX_RETRY_ATTEMPTS,
  MAX_RETRY_DELAY_SECONDS,
  resolvedPolicy,
  RETRY_PROPERTIES,
  RETRY_SUBJECT,
  retryCopy,
  retryDecision,
  retryMessageId,
  type RetryScheduler,
} from './delayedRetry';
export { type Delivery, toDelivery } from './delivery';
export {
  type DeliveryCause,
  DUPLICATE_CAUSES,
  type DuplicateCause,
  duplicateCause,
  type DuplicateFacts,
  OUTBOX_SENT_BY_PROPERTY,
  RESUBMITTED_AT_PROPERTY,
  SUSPECTED_PRODUCER_DUPLICATE,
} from './duplicateCause';
export { formatDuration, parseDurationSeconds } from './duration';
export {
  assertNoUnsafeDrift,
  type DeployedEntities,
  type DeployedSubscription,
  type DeployedTopic,
  type Drift,
  entityDrift,
  unsafeDriftProblem,
} from './entityDrift';
export { bounded, POISON_REASONS, type PoisonReason } from './errors';
export {
  EVENT_KEY_TYPE,
  type EventKeyConflict,
  type EventKeyDocument,
  eventKeyId,
  type EventKeyOption,
  MAX_EVENT_KEY_BYTES,
} from './eventKey';
export { FAILURE_NOTE_TYPE, type FailureNote, failureNote, failureNoteId } from './failureNote';
export * from './index';
export { jsonBytesBound } from './jsonBytes';
export { type Marker, MARKER_TYPE, markerId, payloadHash } from './marker';
export {
  buildOutboxDocument,
  isOutboxDocument,
  losslessJson,
  MAX_OUTGOING_MESSAGE_BYTES,
  OUTBOX_TYPE,
  type OutboxDocument,
  outboxDocumentId,
  type OutboxEntry,
  outboxEntryOf,
  type OutboxMessage,
  type OutboxRead,
  type OutboxRoutes,
  type OutboxServiceBusMessage,
  outgoingMessageId,
  serviceBusMessageOf,
  storedTrace,
  UNSENDABLE_REASONS,
  type UnsendableReason,
} from './outbox';
export {
  markerLocation,
  MAX_BATCH_BYTES,
  MAX_BATCH_OPERATIONS,
  processDelivery,
  type ProcessDependencies,
  type ProcessResult,
  type SuspectedProducerDuplicate,
} from './process';
export { type PurgeOptions, type PurgeReport, runPurge } from './purge';
export {
  discardUnsendable,
  type DispatchReport,
  isTopicRefusal,
  type OutboxPublisher,
  type RelayDependencies,
  relayOutbox,
  type RelayReport,
  resendUnsendable,
  type SetAside,
  sweepOutbox,
  type SweepReport,
  type TopicFailure,
} from './relay';
export {
  EMULATOR_FLAG,
  HOST_JSON_DEFAULTS,
  hostJsonProblems,
  loadSettings,
  type RedeliverySettings,
  retentionBoundSeconds,
  sweepSchedule,
  timeSpanSeconds,
} from './settings';
export { InboxTelemetry, METRIC_NAMES, type Outcome, OUTCOMES } from './telemetry';
export {
  bindingOf,
  CONSUMER_NAME,
  type ConsumerBinding,
  ENTITY_NAME,
  functionNameOf,
  outboxRoutesOf,
  publishersOf,
  SUBJECT_NAME,
  type SubscriptionDeclaration,
  type TopicDeclaration,
  topicsPublishedBy,
  type Topology,
  validateTopology,
} from './topology';
export {
  carrierOf,
  contextOf,
  deliveryParent,
  DIAGNOSTIC_ID,
  messageTrace,
  type TraceCarrier,
  traceProperties,
} from './tracing';
export { type FailedWrite } from './transaction';
export { type VersionedWrite, writeIfNewer } from './versioned';
export { assertWriteRegions, type WriteRegionFacts, writeRegionsProblem } from './writeRegions';
