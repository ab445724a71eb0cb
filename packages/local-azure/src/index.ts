/**
 * Local Azure: a Cosmos DB server, a Service Bus model with its AMQP peer, and a model of the
 * Functions host, for tests and `npm start` (README.md). The one entry of
 * @idempotent-consumers/local-azure: what the dev kit, the app's tests and the sample use.
 */
export {
  type ClientUsage,
  DEFAULT_KEY,
  type FaultHandle,
  type LocalCosmos,
  type LocalCosmosOptions,
  start as startCosmos,
} from './cosmos';
export { ensureAppContainer, freshAppContainer } from './cosmos/appContainer';
export { startInWorker } from './cosmos/threadHost';
export { type DeliveryRecord, FunctionsHost, type HostFaults } from './host/brokerHost';
export {
  type ChangeFeedFaults,
  type ChangeFeedInvocation,
  ChangeFeedTrigger,
  retryDelays,
} from './host/changeFeedTrigger';
export {
  ServiceBusTriggers,
  type TriggerDelivery,
  type TriggerSettings,
  triggerSettings,
} from './host/serviceBusTriggers';
export { parseSchedule, type TimerRunReport, TimerTriggers } from './host/timers';
export { jsonNetDate } from './host/toRpcCosmosDB';
export {
  type CosmosDBFunction,
  type FunctionApp,
  type FunctionAppEntry,
  installCoreModule,
  type InvocationResult,
  loadFunctionApp,
  loggedField,
  loggedOutcome,
  type LogLine,
  reloadFunctionApp,
  type ServiceBusDelivery,
  type ServiceBusFunction,
  type TimerRun,
} from './host/worker';
export { integer, pick, seededRandom } from './random';
export {
  type LocalServiceBus,
  type LocalServiceBusOptions,
  start as startServiceBus,
} from './servicebus/amqp';
export { connectionStringFor } from './servicebus/amqp/server';
export {
  Broker,
  type BrokerMessage,
  type OutgoingMessage,
  Subscription,
  type Topic,
  type TopologyChanges,
} from './servicebus/broker';
export {
  type Clock,
  type ScaledClock,
  scaledClock,
  type VirtualClock,
  virtualClock,
} from './servicebus/clock';
export { type RetryCopies, type RuleFilter, subjectsFilter } from './servicebus/rules';
export { Simulation, simulationClientOptions } from './simulation';
/**
 * For tests (jest): local Azure started around a test file, the real SDK clients connected to it, and
 * in-memory sinks for the telemetry Azure Monitor would receive.
 */
export { dependencyFailures } from './testing/dependencyFailures';
export { type LocalStack, useLocalStack } from './testing/localStack';
export { MetricsSink } from './testing/metrics';
export {
  ORDERS,
  PAYMENTS,
  peekAll,
  PEER_TOPOLOGY,
  type PeerFixture,
  type PeerHandle,
  rawExchange,
  receive,
  startPeer,
  TOPIC,
  usePeer,
} from './testing/peer';
export { onProbeDelivery, PROBE_FUNCTION, probeDeliveries, type ProbeDelivery } from './testing/probe';
export { spansNamed, useSpanExporter } from './testing/spans';
