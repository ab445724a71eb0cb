import { once } from 'node:events';
import { extname, join } from 'node:path';
import { Worker } from 'node:worker_threads';

import { UsageError } from '../../cli/errors';
import type { EventInput, OutgoingEvent } from '../events';
import type { SendSubject } from './types';

/**
 * The send form's side of `npm run send`: the subjects its consumers read, with their schemas, and
 * the same validation (tools/events.ts parseEvent), run on a thread of its own (subjectsThread.ts).
 */
export class Subjects {
  private next = 0;
  private readonly pending = new Map<number, (reply: { event?: OutgoingEvent; refused?: string }) => void>();

  private constructor(
    private readonly worker: Worker,
    readonly subjects: SendSubject[],
  ) {
    worker.on('message', (reply: { id: number; event?: OutgoingEvent; refused?: string }) => {
      this.pending.get(reply.id)?.(reply);
      this.pending.delete(reply.id);
    });
  }

  static async load(): Promise<Subjects> {
    // subjectsThread.ts under tsx, .js when compiled.
    const worker = new Worker(join(__dirname, `subjectsThread${extname(__filename)}`));
    const [ready] = (await once(worker, 'message')) as [{ subjects?: SendSubject[]; failed?: string }];
    if (ready.subjects === undefined) {
      await worker.terminate();
      throw new Error(`Could not load the consumers' schemas: ${ready.failed ?? 'no reason given'}`);
    }
    worker.unref();
    return new Subjects(worker, ready.subjects);
  }

  /** The event as npm run send would send it, or the UsageError it would print. */
  async parse(input: EventInput & { allowInvalid: boolean }): Promise<OutgoingEvent> {
    const id = ++this.next;
    const reply = new Promise<{ event?: OutgoingEvent; refused?: string }>((resolve) =>
      this.pending.set(id, resolve),
    );
    this.worker.postMessage({ id, input });
    const { event, refused } = await reply;
    if (event === undefined) throw new UsageError(refused ?? 'The event was refused.');
    // A raw body crosses the thread as a Uint8Array.
    return { ...event, body: event.body instanceof Uint8Array ? Buffer.from(event.body) : event.body };
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
