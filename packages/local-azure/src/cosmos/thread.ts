import { parentPort, workerData } from 'node:worker_threads';

import { type LocalCosmosOptions, start } from './server';

/**
 * The local Cosmos server on its own thread, so that its work does not share a CPU with the client
 * being measured (in Azure, Cosmos DB is another machine). See startInWorker in workerHost.ts.
 */
async function main(): Promise<void> {
  const server = await start(workerData as LocalCosmosOptions);
  parentPort?.on('message', (message: 'requestCounts' | 'usageByClient' | 'stop') => {
    if (message === 'requestCounts') parentPort?.postMessage({ requestCounts: server.requestCounts() });
    else if (message === 'usageByClient') parentPort?.postMessage({ usageByClient: server.usageByClient() });
    else void server.stop().then(() => process.exit(0));
  });
  parentPort?.postMessage({ endpoint: server.endpoint, key: server.key });
}

main().catch((error: unknown) => {
  // Told to the host thread (startInWorker throws it), not printed as a crash of this one.
  const { message, code } = error as NodeJS.ErrnoException;
  parentPort?.postMessage({ failed: { message, code } });
});
