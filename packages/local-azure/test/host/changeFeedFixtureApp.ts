import { app, type InvocationContext } from '@azure/functions';

/**
 * Two Cosmos DB triggers for the change feed tests, independent of the sample: `fixture-relay`
 * (from the beginning, pages of 3, a fixed-delay retry policy) and `fixture-now` (from now, an
 * exponential backoff policy). Each records what the worker path hands it, then does what the
 * test asked (default: return).
 */
export interface Received {
  function: string;
  documents: unknown;
  retryCount: number | undefined;
  triggerMetadata: unknown;
}

export const received: Received[] = [];
let behaviour: (documents: Record<string, unknown>[]) => Promise<void> = () => Promise.resolve();

/** What the functions do after recording an invocation. */
export function onInvocation(next: (documents: Record<string, unknown>[]) => Promise<void>): void {
  behaviour = next;
}

async function record(documents: unknown[], context: InvocationContext): Promise<void> {
  received.push({
    function: context.functionName,
    documents,
    retryCount: context.retryContext?.retryCount,
    triggerMetadata: context.triggerMetadata,
  });
  await behaviour(documents as Record<string, unknown>[]);
}

app.cosmosDB('fixture-relay', {
  connection: 'CosmosDBConnection',
  databaseName: 'app',
  containerName: 'state',
  leaseContainerName: 'leases',
  leaseContainerPrefix: 'relay-',
  createLeaseContainerIfNotExists: false,
  maxItemsPerInvocation: 3,
  startFromBeginning: true,
  feedPollDelay: 1000,
  retry: { strategy: 'fixedDelay', maxRetryCount: 2, delayInterval: { seconds: 2 } },
  handler: record,
});

app.cosmosDB('fixture-now', {
  connection: 'CosmosDBConnection',
  databaseName: 'app',
  containerName: 'state',
  leaseContainerName: 'leases',
  retry: {
    strategy: 'exponentialBackoff',
    maxRetryCount: -1,
    minimumInterval: { seconds: 5 },
    maximumInterval: { minutes: 5 },
  },
  handler: record,
});
