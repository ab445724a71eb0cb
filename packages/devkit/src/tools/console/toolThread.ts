import { once } from 'node:events';
import { extname, join } from 'node:path';
import { Worker } from 'node:worker_threads';

import { bounded } from '../../cli/errors';
import { ConsoleError } from './errors';
import type { ToolSide } from './toolSide';

/** What the console asks of its tool side. */
type Method = 'deadLetters' | 'deadLetterBody' | 'plan' | 'act' | 'sendForm' | 'planSend' | 'send';

export type ToolCalls = Pick<ToolSide, Method> & { close(): Promise<void> };

export interface ToolCall {
  id: number;
  method: Method;
  args: unknown[];
}

export interface ToolThreadOptions {
  /** The tools' settings: SERVICEBUS_*, COSMOS_*, INBOX_RETENTION (npm start's run file, or the shell's). */
  env: Record<string, string | undefined>;
  duplicateWindowSeconds: number;
  clockSkewSeconds: number;
}

/**
 * Starts the tool side (toolSide.ts) on a thread of its own: there the app's consumers can be loaded
 * as the tools load them (their function files registered once more), which must not happen on npm
 * start's thread, where the built app runs. Calls cross as structured-clone data.
 */
export async function startToolThread(options: ToolThreadOptions): Promise<ToolCalls> {
  // toolWorker.ts under tsx, .js when compiled.
  const worker = new Worker(join(__dirname, `toolWorker${extname(__filename)}`), { workerData: options });
  const [ready] = (await once(worker, 'message')) as ['ready' | { failed: string }];
  if (ready !== 'ready') {
    await worker.terminate();
    throw new Error(`The console's tool side did not start: ${bounded(ready.failed, 300)}`);
  }
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  /** Why the thread is gone, once it is: every call from then on is refused at once. */
  let gone: string | undefined;
  const fail = (reason: string): void => {
    gone ??= reason;
    for (const waiting of pending.values()) waiting.reject(new ConsoleError(503, gone));
    pending.clear();
  };
  worker.on(
    'message',
    (reply: 'closed' | { id: number; result?: unknown; error?: { status: number; message: string } }) => {
      if (reply === 'closed') return;
      const waiting = pending.get(reply.id);
      if (waiting === undefined) return;
      pending.delete(reply.id);
      if (reply.error === undefined) waiting.resolve(reply.result);
      else waiting.reject(new ConsoleError(reply.error.status, reply.error.message));
    },
  );
  worker.on('error', (error) => fail(`The console's tool side failed: ${bounded(error.message, 300)}`));
  worker.on('exit', () => fail("The console's tool side has stopped."));
  let next = 0;
  const call =
    (method: Method) =>
    (...args: unknown[]): Promise<never> =>
      new Promise((resolve, reject) => {
        if (gone !== undefined) {
          reject(new ConsoleError(503, gone));
          return;
        }
        const id = ++next;
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
        worker.postMessage({ id, method, args } satisfies ToolCall);
      });
  return {
    deadLetters: call('deadLetters'),
    deadLetterBody: call('deadLetterBody'),
    plan: call('plan'),
    act: call('act'),
    sendForm: call('sendForm'),
    planSend: call('planSend'),
    send: call('send'),
    close: async () => {
      if (gone !== undefined) return;
      // Its clients close first; a thread that does not answer within 5 s is ended anyway.
      const closed = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 5000);
        worker.on('message', (reply) => {
          if (reply !== 'closed') return;
          clearTimeout(timer);
          resolve();
        });
      });
      worker.postMessage('close');
      await closed;
      await worker.terminate();
    },
  };
}
