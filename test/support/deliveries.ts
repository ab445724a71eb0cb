import { appFunctions } from '@idempotent-consumers/devkit';
import { CircuitBreaker } from '@idempotent-consumers/inbox/internal';
import {
  type FunctionApp,
  type InvocationResult,
  loadFunctionApp,
  type LogLine,
  type ServiceBusDelivery,
  type TimerRun,
} from '@idempotent-consumers/local-azure';

import { inboxRuntime } from '../../src/app';

export type { LogLine };

/** The broker's facts about a delivery; defaults: the first delivery, enqueued now, no MessageId. */
export type DeliveryOptions = Omit<ServiceBusDelivery, 'body'>;

let loaded: Promise<FunctionApp> | undefined;
/** The app (functions/*.ts), loaded through the worker path once per test file. */
export const loadApp = (): Promise<FunctionApp> => (loaded ??= loadFunctionApp(appFunctions()));

/**
 * Delivers `body` (an object is sent as JSON text) to the registered function `functionName` the
 * way Azure runs it: the app (functions/*.ts) loaded through the worker path, the host's RPC
 * request, the library's conversion. Reports how the host would settle the message, and appends
 * the invocation's log lines to `logs`.
 */
export async function deliver(
  functionName: string,
  body: unknown,
  options: DeliveryOptions = {},
  logs: LogLine[] = [],
): Promise<{ settled: 'completed' | 'abandoned'; error?: Error }> {
  const app = await loadApp();
  // Each delivery here stands alone: a closed breaker whose backoff takes no time. The breaker's
  // own behaviour is tested in packages/inbox/test/breaker.test.ts and in the outage scenario.
  const runtime = inboxRuntime();
  runtime.breaker = new CircuitBreaker({
    ...runtime.breaker.options,
    clock: {
      now: () => Date.now(),
      after: (_ms, callback) => {
        const immediate = setImmediate(callback);
        return () => clearImmediate(immediate);
      },
    },
  });
  const result = await app.invokeServiceBus(functionName, {
    ...options,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  logs.push(...result.logs);
  return result.error ? { settled: 'abandoned', error: result.error } : { settled: 'completed' };
}

/**
 * Hands a page of changes to the registered Cosmos DB trigger function `functionName` as the host
 * does (Json.NET's rewriting of date-like strings included), with the retry context of a function
 * that has a retry policy.
 */
export async function relayChanges(
  functionName: string,
  documents: readonly unknown[],
  retry: { retryCount: number; maxRetryCount: number } = { retryCount: 0, maxRetryCount: 8 },
): Promise<InvocationResult> {
  return (await loadApp()).invokeCosmosDB(functionName, documents, retry);
}

/** Runs the registered timer function `functionName` once, as the host does on its schedule. */
export async function runTimer(functionName: string, run: TimerRun = {}): Promise<InvocationResult> {
  return (await loadApp()).invokeTimer(functionName, run);
}
