import { once } from 'node:events';
import { extname, join } from 'node:path';
import { Worker } from 'node:worker_threads';

import type { FaultTarget } from './faults';
import type { LocalCosmosOptions } from './server';
import type { ClientUsage } from './throughput';

export interface LocalCosmosInWorker {
  endpoint: string;
  key: string;
  requestCounts(): Promise<Record<FaultTarget, number>>;
  usageByClient(): Promise<ClientUsage[]>;
  stop(): Promise<void>;
}

/** Starts the local Cosmos server on a worker thread (options must be plain data: no `now` clock). */
export async function startInWorker(
  options: Omit<LocalCosmosOptions, 'now'> = {},
): Promise<LocalCosmosInWorker> {
  // worker.ts under tsx, worker.js when compiled (npm run bench runs the compiled build).
  const worker = new Worker(join(__dirname, `thread${extname(__filename)}`), { workerData: options });
  const [ready] = (await once(worker, 'message')) as [
    { endpoint: string; key: string; failed?: { message: string; code?: string } },
  ];
  if (ready.failed) {
    await worker.terminate();
    throw Object.assign(new Error(ready.failed.message), { code: ready.failed.code });
  }
  return {
    endpoint: ready.endpoint,
    key: ready.key,
    requestCounts: async () => {
      worker.postMessage('requestCounts');
      const [reply] = (await once(worker, 'message')) as [{ requestCounts: Record<FaultTarget, number> }];
      return reply.requestCounts;
    },
    usageByClient: async () => {
      worker.postMessage('usageByClient');
      const [reply] = (await once(worker, 'message')) as [{ usageByClient: ClientUsage[] }];
      return reply.usageByClient;
    },
    stop: async () => {
      worker.postMessage('stop');
      await once(worker, 'exit');
    },
  };
}
