import { setTimeout as sleep } from 'node:timers/promises';

import { ManagedIdentityCredential } from '@azure/identity';
import { useAzureMonitor } from 'applicationinsights';

import {
  type Consumer,
  createCosmosClient,
  type InboxRuntime,
  InboxTelemetry,
  loadSettings,
  purgeTimerHandler,
  type ServiceBusHandler,
  serviceBusHandler,
  type TimerHandler,
} from './inbox';

/**
 * The composition root: what the function files share. Loading it validates every setting, so an
 * unsafe configuration (for example a retention shorter than the redelivery bound) stops the app at
 * start-up with a clear message instead of running.
 */
loadSettings(process.env);
startAzureMonitor(process.env);

let runtime: InboxRuntime | undefined;

/** Built on first use: one Cosmos DB client and one set of metric instruments per process. */
export function inboxRuntime(): InboxRuntime {
  if (runtime) return runtime;
  const settings = loadSettings(process.env);
  const container = createCosmosClient(settings.cosmos)
    .database(settings.cosmos.database)
    .container(settings.cosmos.container);
  const telemetry = new InboxTelemetry();
  runtime = {
    container,
    settings,
    telemetry,
    dependencies: {
      container,
      settings,
      now: () => new Date(),
      sleep: (ms) => sleep(ms),
      random: Math.random,
      onEtagRetry: (consumer) => telemetry.etagRetry(consumer),
    },
  };
  return runtime;
}

export const consume = (consumer: Consumer): ServiceBusHandler => serviceBusHandler(consumer, inboxRuntime);
export const purgeExpiredMarkers: TimerHandler = purgeTimerHandler(inboxRuntime);

/**
 * Custom metrics go to Application Insights through Azure Monitor OpenTelemetry, signed in with the
 * app's identity (local auth is disabled on the resource). Without a connection string nothing is
 * started, nothing is sent, and the metric instruments are no-ops.
 */
function startAzureMonitor(env: NodeJS.ProcessEnv): void {
  const connectionString = env.APPLICATIONINSIGHTS_CONNECTION_STRING?.trim();
  if (!connectionString) return;
  const authentication = env.APPLICATIONINSIGHTS_AUTHENTICATION_STRING ?? '';
  const clientId = /ClientId=([^;]+)/i.exec(authentication)?.[1];
  const credential = /Authorization=AAD/i.test(authentication)
    ? new ManagedIdentityCredential(clientId === undefined ? {} : { clientId })
    : undefined;
  useAzureMonitor({
    azureMonitorExporterOptions: { connectionString, ...(credential ? { credential } : {}) },
  });
}
