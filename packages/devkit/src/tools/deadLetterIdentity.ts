import { InvocationContext } from '@azure/functions';
import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import {
  asOriginal,
  type Delivery,
  longestRetryDelaySeconds,
  MAX_RETRY_DELAY_SECONDS,
  resolvedPolicy,
  toDelivery,
} from '@idempotent-consumers/inbox/internal';

// The library's bounded, one line and compact: a value echoed in a terminal table.
import { bounded } from '../cli/errors';

/**
 * Who a dead letter is to its consumer: the delivery the app would process (its inbox key), and,
 * for a delayed-retry copy (packages/inbox/src/delayedRetry.ts), the family it belongs to. The library's own
 * code decides both (toDelivery, asOriginal), so the tool keys a copy exactly as the app does: by
 * the original MessageId and Subject.
 */

/** AMQP ids may be numbers or uuid bytes; Service Bus producers send strings. */
export function idText(id: string | number | Buffer | undefined): string | undefined {
  if (id === undefined) return undefined;
  return Buffer.isBuffer(id) ? id.toString('hex') : String(id);
}

/**
 * The delivery the adapter would process (packages/inbox/src/azureFunctions.ts: asOriginal(toDelivery(...))).
 * The Functions host sends the body, the MessageId and the Subject as text, and the application
 * properties as JSON; the Node.js worker JSON-parses every string it can (`fromRpcTypedData`): an
 * all-digit MessageId reaches the adapter as a number, which toDelivery turns back into text. A
 * delayed-retry copy is then seen as its original: the original MessageId and Subject, with
 * `retry` saying which copy it is.
 */
export function deliveryOf(message: ServiceBusReceivedMessage): Delivery {
  const body: unknown = Buffer.isBuffer(message.body) ? message.body.toString('utf8') : message.body;
  const messageId = idText(message.messageId);
  const subject = message.subject === undefined ? undefined : asTheWorkerReadsIt(message.subject);
  const properties = JSON.stringify(message.applicationProperties ?? {});
  // Under each name the host uses: a JSON body's top-level property shadows one (toDelivery knows which).
  const triggerMetadata = {
    messageId: messageId === undefined ? undefined : asTheWorkerReadsIt(messageId),
    subject,
    label: subject,
    applicationProperties: properties,
    userProperties: properties,
  };
  return asOriginal(
    toDelivery(
      typeof body === 'string' ? asTheWorkerReadsIt(body) : body,
      new InvocationContext({ triggerMetadata }),
    ),
  );
}

function asTheWorkerReadsIt(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** A delayed-retry copy, as its consumer sees it. */
export type RetryFamily =
  | {
      kind: 'copy';
      /** The original MessageId: the copy's inbox key. */
      original: string;
      /** 1 for the first copy. */
      attempt: number;
      /** The subscription the copy was scheduled for. */
      for: string;
      /** The original Subject, undefined when it had none. */
      subject: string | undefined;
    }
  /** Claims to be a copy but cannot be read as one (Delivery.invalidRetryCopy): poison (invalid-retry-copy) for any consumer. */
  | { kind: 'invalid'; problem: string };

/**
 * The family of a dead letter: undefined for a message that is not a delayed-retry copy. A copy
 * dead-lettered in another subscription than the one it was scheduled for (given `subscription`) is
 * invalid there: its consumer refuses it as poison (invalid-retry-copy).
 */
export function retryFamilyOf(
  message: ServiceBusReceivedMessage,
  subscription?: string,
): RetryFamily | undefined {
  const delivery = deliveryOf(message);
  if (delivery.retry !== undefined) {
    if (subscription !== undefined && delivery.retry.for !== subscription)
      return {
        kind: 'invalid',
        problem: `scheduled for subscription '${bounded(delivery.retry.for, 60)}', not this one`,
      };
    return {
      kind: 'copy',
      original: delivery.messageId!,
      attempt: delivery.retry.attempt,
      for: delivery.retry.for,
      subject: delivery.subject,
    };
  }
  if (delivery.invalidRetryCopy !== undefined) return { kind: 'invalid', problem: delivery.invalidRetryCopy };
  return undefined;
}

/**
 * The dead letters with each delayed-retry family together: where its first member (by sequence
 * number) is, the original first (a message whose MessageId a copy names), then its copies by
 * attempt. Every other message keeps its place, so a queue without copies keeps its order.
 */
export function byFamily(
  deadLetters: readonly ServiceBusReceivedMessage[],
  subscription?: string,
): ServiceBusReceivedMessage[] {
  const families = deadLetters.map((message) => retryFamilyOf(message, subscription));
  const originals = new Set(families.flatMap((family) => (family?.kind === 'copy' ? [family.original] : [])));
  const keyed = deadLetters.map((message, index) => {
    const family = families[index];
    const id = idText(message.messageId);
    const key =
      family?.kind === 'copy'
        ? family.original
        : family === undefined && id !== undefined && originals.has(id)
          ? id
          : undefined;
    return { message, index, key, attempt: family?.kind === 'copy' ? family.attempt : 0 };
  });
  const firstOf = new Map<string, number>();
  for (const { key, index } of keyed) if (key !== undefined && !firstOf.has(key)) firstOf.set(key, index);
  return keyed
    .map((entry) => ({ ...entry, at: entry.key === undefined ? entry.index : firstOf.get(entry.key)! }))
    .sort((a, b) => a.at - b.at || a.attempt - b.attempt || a.index - b.index)
    .map(({ message }) => message);
}

/** For list: which copy of which original, or what is wrong with it; '' for other messages. */
export function familyText(family: RetryFamily | undefined): string {
  if (family === undefined) return '';
  if (family.kind === 'invalid') return `invalid-retry-copy: ${family.problem}`;
  return `attempt ${family.attempt} of ${bounded(family.original)} (${bounded(family.subject ?? 'no subject', 40)})`;
}

/**
 * The longest a delayed copy can wait before it is enqueued, seconds: its family's marker (written
 * by whichever delivery of the family is applied) is never written before the copy was scheduled,
 * which is at most this long before the copy's enqueued time.
 */
export const LONGEST_RETRY_DELAY_SECONDS = longestRetryDelaySeconds(
  resolvedPolicy({ attempts: 1, firstDelaySeconds: MAX_RETRY_DELAY_SECONDS }),
);
