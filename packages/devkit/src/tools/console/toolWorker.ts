import { parentPort, workerData } from 'node:worker_threads';

import { ToolError } from '../../cli/errors';
import { loadSubjectRules } from '../events';
import { connectInbox } from '../inboxState';
import { connectServiceBus } from '../serviceBus';
import { ConsoleError } from './errors';
import { ToolSide } from './toolSide';
import type { ToolCall, ToolThreadOptions } from './toolThread';

/**
 * The console's tool side on its own thread (toolThread.ts starts it): connected with the settings
 * the tools use, the app's consumers loaded as the tools load them. Answers one call at a time per
 * message, each with its id.
 */
async function main(): Promise<void> {
  const options = workerData as ToolThreadOptions;
  const serviceBus = connectServiceBus(options.env).client;
  const inbox = connectInbox(options.env);
  // The thread's stderr is npm start's: a function file that does not load is said there.
  const rules = await loadSubjectRules({ warn: (text) => console.warn(`Console: ${text}`) });
  const side = new ToolSide({
    serviceBus,
    inbox,
    rules,
    duplicateWindowSeconds: options.duplicateWindowSeconds,
    clockSkewSeconds: options.clockSkewSeconds,
    now: () => Date.now(),
  });
  parentPort?.on('message', (call: ToolCall | 'close') => {
    if (call === 'close') {
      void serviceBus.close().finally(() => {
        if (typeof inbox === 'object') inbox.close();
        parentPort?.postMessage('closed');
      });
      return;
    }
    // Through a promise: a method that throws at once is an answer too, not the thread's end.
    Promise.resolve()
      .then(() => (side[call.method] as (...args: unknown[]) => Promise<unknown>).apply(side, call.args))
      .then((result) => parentPort?.postMessage({ id: call.id, result }))
      .catch((error: unknown) => parentPort?.postMessage({ id: call.id, error: refusal(error) }));
  });
  parentPort?.postMessage('ready');
}

/** An error as the page is told it: its status, and its message (a bug's first line only). */
function refusal(error: unknown): { status: number; message: string } {
  if (error instanceof ConsoleError) return { status: error.status, message: error.message };
  if (error instanceof ToolError) return { status: 400, message: error.message };
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return { status: 500, message: `The console failed: ${text.split('\n')[0]!.slice(0, 300)}` };
}

main().catch((error: unknown) => {
  parentPort?.postMessage({ failed: error instanceof Error ? error.message : String(error) });
});
