import type { ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage } from '@azure/service-bus';
import Long from 'long';

/**
 * The dead-letter queue of one subscription, as an operator works it: look (peek, which locks
 * nothing and changes nothing), then resubmit chosen messages to the topic, unchanged.
 *
 * A resubmit is safe because of the consumers' inbox: every consumer remembers the (consumer,
 * MessageId) pairs it applied, for INBOX_RETENTION (P30D by default). A message that had in fact
 * been applied before it was dead-lettered (its handler committed, then the settlement was lost) is
 * absorbed as a duplicate; one that was not is applied now. After the retention the memory is gone
 * and a resubmitted message is applied again, so resubmit well inside it.
 */

/** Properties Service Bus adds when it dead-letters a message; they are not the producer's. */
const DEAD_LETTER_PROPERTIES = ['DeadLetterReason', 'DeadLetterErrorDescription'] as const;

const PAGE_SIZE = 100;

export interface DeadLetterQueue {
  client: ServiceBusClient;
  topic: string;
  subscription: string;
}

export function describeQueue(queue: DeadLetterQueue): string {
  return `${queue.topic}/Subscriptions/${queue.subscription}/$DeadLetterQueue`;
}

/**
 * Every message in the dead-letter queue, oldest first, without locking any. Bodies are left as the
 * bytes the producer sent. The first sequence number is given explicitly: the SDK otherwise carries
 * on from wherever the last peek of this entity on the same client stopped.
 */
export async function peekDeadLetters(queue: DeadLetterQueue): Promise<ServiceBusReceivedMessage[]> {
  const receiver = queue.client.createReceiver(queue.topic, queue.subscription, {
    subQueueType: 'deadLetter',
    skipParsingBodyAsJson: true,
  });
  try {
    const messages: ServiceBusReceivedMessage[] = [];
    let fromSequenceNumber = Long.ONE;
    for (;;) {
      const page = await receiver.peekMessages(PAGE_SIZE, { fromSequenceNumber });
      const last = page.at(-1)?.sequenceNumber;
      if (!last) return messages;
      messages.push(...page);
      fromSequenceNumber = last.add(1);
    }
  } finally {
    await receiver.close();
  }
}

/** A message is named by its MessageId or its sequence number. */
export function isNamed(message: ServiceBusReceivedMessage, key: string): boolean {
  return String(message.messageId) === key || sequenceOf(message) === key;
}

export type Selection = { all: true; messageIds?: never } | { all?: never; messageIds: readonly string[] };

export interface ResubmitRules {
  /** The topic's duplicate detection window; PT1H as the Bicep sets it. */
  duplicateWindowMs: number;
  /** Resubmit inside the window anyway. Dangerous: see planResubmit. */
  force: boolean;
  nowMs: number;
}

export interface ResubmitPlan {
  /** Will be sent again, then completed in the dead-letter queue. */
  resubmit: ServiceBusReceivedMessage[];
  /** Still inside the duplicate window of their first send; left alone. */
  tooEarly: { message: ServiceBusReceivedMessage; resubmittableAt: Date }[];
  /** Same MessageId as a message resubmitted in this run: the broker would drop it; left alone. */
  sameMessageId: ServiceBusReceivedMessage[];
  /** Asked for by MessageId, but not in the dead-letter queue. */
  notFound: string[];
}

/**
 * Decides what a resubmit may touch. The duplicate window, as a timeline:
 *
 *   t0 original accepted ─── duplicate detection window (PT1H) ───┤ t0 + window: resubmittable
 *
 * A resubmit keeps its MessageId. Sent before t0 + window, the topic still remembers that id: the
 * broker drops the copy and reports success, the tool completes the dead-lettered original, and the
 * message is gone. So such a message is refused, unless `force`. t0 is the enqueued time the
 * dead-letter queue reports, which is never earlier than the original send, so the check errs on
 * the safe side. (A later send of the same MessageId by the producer restarts the window too; the
 * tool cannot see that one. Its copy carries the same event, so nothing is lost with it.)
 */
export function planResubmit(
  deadLetters: readonly ServiceBusReceivedMessage[],
  selection: Selection,
  rules: ResubmitRules,
): ResubmitPlan {
  const chosen = selection.all
    ? [...deadLetters]
    : deadLetters.filter((message) => selection.messageIds.includes(String(message.messageId)));
  const plan: ResubmitPlan = {
    resubmit: [],
    tooEarly: [],
    sameMessageId: [],
    notFound: selection.all
      ? []
      : selection.messageIds.filter((id) => !deadLetters.some((m) => String(m.messageId) === id)),
  };
  const planned = new Set<string>();
  for (const message of chosen) {
    const messageId = message.messageId === undefined ? undefined : String(message.messageId);
    if (messageId !== undefined && planned.has(messageId)) {
      plan.sameMessageId.push(message);
      continue;
    }
    const resubmittableAtMs = (message.enqueuedTimeUtc?.getTime() ?? rules.nowMs) + rules.duplicateWindowMs;
    // Without a MessageId duplicate detection has nothing to match, so there is no window to wait for.
    if (messageId !== undefined && resubmittableAtMs > rules.nowMs && !rules.force) {
      plan.tooEarly.push({ message, resubmittableAt: new Date(resubmittableAtMs) });
      continue;
    }
    if (messageId !== undefined) planned.add(messageId);
    plan.resubmit.push(message);
  }
  return plan;
}

/** The message as its producer sent it: body bytes and properties, minus what dead-lettering added. */
export function resubmittedCopy(message: ServiceBusReceivedMessage): ServiceBusMessage {
  const properties = Object.fromEntries(
    Object.entries(message.applicationProperties ?? {}).filter(
      ([key]) => !(DEAD_LETTER_PROPERTIES as readonly string[]).includes(key),
    ),
  );
  return {
    body: message.body as unknown,
    ...(message.messageId === undefined ? {} : { messageId: message.messageId }),
    ...(message.subject === undefined ? {} : { subject: message.subject }),
    ...(message.correlationId === undefined ? {} : { correlationId: message.correlationId }),
    ...(message.contentType === undefined ? {} : { contentType: message.contentType }),
    ...(Object.keys(properties).length === 0 ? {} : { applicationProperties: properties }),
    ...(message.sessionId === undefined ? {} : { sessionId: message.sessionId }),
    ...(message.partitionKey === undefined ? {} : { partitionKey: message.partitionKey }),
    ...(message.replyTo === undefined ? {} : { replyTo: message.replyTo }),
    ...(message.to === undefined ? {} : { to: message.to }),
    ...(message.timeToLive === undefined ? {} : { timeToLive: message.timeToLive }),
  };
}

export interface ResubmitOutcome {
  /** Sent to the topic, and the dead-lettered copy completed. */
  resubmitted: ServiceBusReceivedMessage[];
  /** Sent, but completing the dead-lettered copy failed: it is still there (a later resubmit is refused until the window passes, and the inbox absorbs it anyway). */
  sentButNotCompleted: { message: ServiceBusReceivedMessage; error: Error }[];
  /** The send failed; the dead-lettered copy is left in place. */
  failed: { message: ServiceBusReceivedMessage; error: Error }[];
  /** Planned, but not received (another receiver holds it, or it left the queue meanwhile). */
  notReceived: ServiceBusReceivedMessage[];
  /** Received on the way to a planned message and given back unchanged (their delivery count rises by one). */
  leftInPlace: number;
}

/**
 * Receives the dead-letter queue in peek-lock and, for each planned message, sends the copy to the
 * topic and only then completes the dead-lettered message. Anything else it had to lock on the
 * way is held until the end (so it is not received again and again) and then abandoned, unchanged.
 */
export async function resubmit(
  queue: DeadLetterQueue,
  plan: ResubmitPlan,
  report: (line: string) => void,
): Promise<ResubmitOutcome> {
  const outcome: ResubmitOutcome = {
    resubmitted: [],
    sentButNotCompleted: [],
    failed: [],
    notReceived: [],
    leftInPlace: 0,
  };
  const pending = new Map(plan.resubmit.map((message) => [sequenceOf(message), message]));
  if (pending.size === 0) return outcome;

  const receiver = queue.client.createReceiver(queue.topic, queue.subscription, {
    subQueueType: 'deadLetter',
    skipParsingBodyAsJson: true,
  });
  const sender = queue.client.createSender(queue.topic);
  const held: ServiceBusReceivedMessage[] = [];
  const seen = new Set<string>();
  try {
    while (pending.size > 0) {
      const batch = await receiver.receiveMessages(50, { maxWaitTimeInMs: 5_000 });
      const fresh = batch.filter((message) => !seen.has(sequenceOf(message)));
      held.push(...batch.filter((message) => seen.has(sequenceOf(message))));
      if (fresh.length === 0) break;
      for (const message of fresh) {
        const key = sequenceOf(message);
        seen.add(key);
        if (!pending.has(key)) {
          held.push(message);
          continue;
        }
        pending.delete(key);
        try {
          await sender.sendMessages(resubmittedCopy(message));
        } catch (error) {
          outcome.failed.push({ message, error: error as Error });
          held.push(message);
          report(
            `failed   ${label(message)}: the send failed (${(error as Error).message}); left in the dead-letter queue`,
          );
          continue;
        }
        try {
          await receiver.completeMessage(message);
          outcome.resubmitted.push(message);
          report(`resubmitted ${label(message)}; dead-lettered copy completed`);
        } catch (error) {
          outcome.sentButNotCompleted.push({ message, error: error as Error });
          report(
            `sent     ${label(message)}, but completing the dead-lettered copy failed (${(error as Error).message}); it is still there`,
          );
        }
      }
    }
  } finally {
    for (const message of held) {
      try {
        await receiver.abandonMessage(message);
        outcome.leftInPlace++;
      } catch {
        // The lock ran out: the message is available again anyway, unchanged.
        outcome.leftInPlace++;
      }
    }
    outcome.notReceived.push(...pending.values());
    await sender.close();
    await receiver.close();
  }
  return outcome;
}

export function sequenceOf(message: ServiceBusReceivedMessage): string {
  return message.sequenceNumber?.toString() ?? '';
}

export function label(message: ServiceBusReceivedMessage): string {
  return `#${sequenceOf(message)} messageId=${String(message.messageId)} subject=${message.subject ?? '(none)'}`;
}
