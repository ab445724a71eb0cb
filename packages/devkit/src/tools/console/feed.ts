import {
  type BrokerMessage,
  type OutgoingMessage,
  type TriggerDelivery,
} from '@idempotent-consumers/local-azure';

import { bounded } from '../../cli/errors';
import { bodyDigest, wroteOf } from '../start/output';
import { PAGE_BODY_BYTES } from './body';
import type { FeedEvent, FeedPage } from './types';

/** The events the feed keeps (the oldest go first), and the bodies it keeps for "show the body". */
const KEPT_EVENTS = 2_000;
export const KEPT_BODIES = 200;

/**
 * The live feed of what happens to messages under `npm start`: each delivery with its outcome, and
 * what the broker drops or dead-letters on its own. The page asks for the events after the last one
 * it has and waits (long polling) while there is none. Bodies stay in memory, a bounded number of
 * them, and leave only when the page asks for one: never in a log.
 */
export class Feed {
  private readonly events: FeedEvent[] = [];
  private readonly bodies = new Map<number, Buffer>();
  private readonly waiting = new Set<() => void>();
  private last = 0;

  constructor(
    /** The topic and subscription a function consumes, from the app's registrations. */
    private readonly subscriptionOf: (
      functionName: string,
    ) => { topic: string; subscription: string } | undefined,
    private readonly now: () => Date = () => new Date(),
  ) {}

  delivery(d: TriggerDelivery): void {
    const where = this.subscriptionOf(d.function);
    const outcome = bounded(d.outcome ?? (d.error === undefined ? 'no outcome logged' : 'failed'), 60);
    const error = d.error === undefined ? undefined : bounded(`${d.error.name}: ${d.error.message}`, 300);
    this.add(
      {
        kind: 'delivery',
        topic: where?.topic,
        subscription: where?.subscription,
        function: d.function,
        messageId: idOf(d.messageId),
        subject: d.subject === undefined ? undefined : bounded(d.subject, 100),
        sequenceNumber: d.sequenceNumber,
        deliveryCount: d.deliveryCount,
        outcome,
        detail:
          d.cause !== undefined || d.alternative !== undefined
            ? bounded(d.cause ?? d.alternative ?? '', 300)
            : error,
        settlement: d.settlement,
        handlerMs: Math.round(d.handlerMs),
        traceId: d.traceId === undefined ? undefined : bounded(d.traceId, 64),
        wrote: wroteOf(d.logs ?? []),
      },
      d.body,
    );
  }

  droppedAsDuplicate(topic: string, message: OutgoingMessage): void {
    this.add(
      {
        ...fromBroker(topic, undefined, message),
        kind: 'dropped-as-duplicate',
        outcome: 'dropped-as-duplicate',
        detail: 'duplicate detection: the same MessageId was sent within the window',
      },
      message.body,
    );
  }

  matchedNoSubscription(topic: string, message: OutgoingMessage): void {
    this.add(
      {
        ...fromBroker(topic, undefined, message),
        kind: 'no-subscription',
        outcome: 'no-subscription',
        detail: 'no subscription takes its subject: Service Bus accepted it and dropped it',
      },
      message.body,
    );
  }

  /** `path` is `<topic>/Subscriptions/<subscription>`. */
  deadLettered(path: string, message: BrokerMessage): void {
    const [topic, , subscription] = path.split('/');
    this.add(
      {
        ...fromBroker(topic ?? path, subscription, message),
        kind: 'dead-lettered',
        sequenceNumber: message.sequenceNumber,
        deliveryCount: message.deliveryCount,
        outcome: 'dead-lettered',
        detail: bounded(
          `${message.deadLetter?.reason ?? 'no reason'}: ${message.deadLetter?.description ?? ''}`,
          300,
        ),
      },
      message.body,
    );
  }

  /**
   * The events after `after` (at most `max`, the oldest first); when there is none yet, waits up to
   * `waitMs` for one. `signal` ends the wait early (the page went away).
   */
  async page(after: number, max: number, waitMs: number, signal?: AbortSignal): Promise<FeedPage> {
    if (this.last <= after && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.waiting.delete(done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, waitMs);
        this.waiting.add(done);
        signal?.addEventListener('abort', done);
      });
    }
    const events = this.events.filter((event) => event.seq > after).slice(0, max);
    return { events, last: events.at(-1)?.seq ?? Math.max(after, this.last) };
  }

  /** The body of an event, when the feed still keeps it. */
  body(seq: number): Buffer | undefined {
    return this.bodies.get(seq);
  }

  /** Ends every wait: the console is stopping. */
  close(): void {
    for (const done of [...this.waiting]) done();
  }

  private add(
    event: Omit<FeedEvent, 'seq' | 'at' | 'bodyBytes' | 'bodySha256'>,
    body: string | Buffer | undefined,
  ): void {
    const seq = ++this.last;
    const { bytes, sha256 } = bodyDigest(body ?? '');
    this.events.push({ ...event, seq, at: this.now().toISOString(), bodyBytes: bytes, bodySha256: sha256 });
    if (this.events.length > KEPT_EVENTS) this.events.splice(0, this.events.length - KEPT_EVENTS);
    if (body !== undefined && bytes <= PAGE_BODY_BYTES) {
      this.bodies.set(seq, Buffer.isBuffer(body) ? body : Buffer.from(body));
      for (const old of this.bodies.keys()) {
        if (this.bodies.size <= KEPT_BODIES) break;
        this.bodies.delete(old);
      }
    }
    for (const done of [...this.waiting]) done();
  }
}

function fromBroker(
  topic: string,
  subscription: string | undefined,
  message: OutgoingMessage,
): Omit<FeedEvent, 'seq' | 'at' | 'kind' | 'outcome' | 'detail' | 'bodyBytes' | 'bodySha256'> {
  return {
    topic: bounded(topic, 100),
    subscription: subscription === undefined ? undefined : bounded(subscription, 100),
    function: undefined,
    messageId: idOf(message.messageId),
    subject: message.subject === undefined ? undefined : bounded(message.subject, 100),
    sequenceNumber: undefined,
    deliveryCount: undefined,
    settlement: undefined,
    handlerMs: undefined,
    traceId: undefined,
    wrote: undefined,
  };
}

function idOf(messageId: string | undefined): string | undefined {
  return messageId === undefined ? undefined : bounded(messageId, 128);
}
