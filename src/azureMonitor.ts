import { ManagedIdentityCredential } from '@azure/identity';
import { useAzureMonitor } from 'applicationinsights';

/**
 * Custom metrics go to Application Insights through Azure Monitor OpenTelemetry, signed in with the
 * app's identity (local auth is disabled on the resource). Without a connection string nothing is
 * started, nothing is sent, and the metric instruments are no-ops.
 *
 * This module is the app's heaviest dependency (the OpenTelemetry SDK): the deployment package
 * bundles it as a file of its own, which src/app.ts loads after the functions are registered, so
 * it stays off the app's start-up path.
 */
export function startAzureMonitor(env: NodeJS.ProcessEnv): void {
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
