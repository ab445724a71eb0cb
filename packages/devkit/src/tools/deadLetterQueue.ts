import type {
  ServiceBusClient,
  ServiceBusMessage,
  ServiceBusReceivedMessage,
  ServiceBusReceiver,
} from '@azure/service-bus';
import { RESUBMITTED_AT_PROPERTY } from '@idempotent-consumers/inbox/internal';
import Long from 'long';

import { bounded } from '../cli/errors';
import { idText, retryFamilyOf } from './deadLetterIdentity';
import type { InboxState, InboxStateName } from './inboxState';

/**
 * The dead-letter queue of one subscription, as an operator works it: look (peek, which locks
 * nothing and changes nothing), then resubmit chosen messages to the topic, unchanged, or discard
 * those whose effect is in place or whose consumer refuses them (planDiscard).
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

/** Every message in the dead-letter queue, oldest first, without locking any (see peekQueue). */
export function peekDeadLetters(queue: DeadLetterQueue): Promise<ServiceBusReceivedMessage[]> {
  return peekQueue(queue, { deadLetter: true, max: Number.POSITIVE_INFINITY });
}

/**
 * Up to `max` messages of the subscription (or its dead-letter queue), oldest first, from sequence
 * number `from` (default: the first), without locking or settling any. Bodies are left as the bytes
 * the producer sent. The first sequence number is given explicitly: the SDK otherwise carries on
 * from wherever the last peek of this entity on the same client stopped.
 */
export async function peekQueue(
  queue: DeadLetterQueue,
  { deadLetter, max, from = Long.ONE }: { deadLetter: boolean; max: number; from?: Long },
): Promise<ServiceBusReceivedMessage[]> {
  const receiver = queue.client.createReceiver(queue.topic, queue.subscription, {
    ...(deadLetter ? { subQueueType: 'deadLetter' as const } : {}),
    skipParsingBodyAsJson: true,
  });
  try {
    const messages: ServiceBusReceivedMessage[] = [];
    let fromSequenceNumber = from;
    while (messages.length < max) {
      const page = await receiver.peekMessages(Math.min(PAGE_SIZE, max - messages.length), {
        fromSequenceNumber,
      });
      const last = page.at(-1)?.sequenceNumber;
      if (!last) break;
      messages.push(...page);
      fromSequenceNumber = last.add(1);
    }
    return messages;
  } finally {
    await receiver.close();
  }
}

/** A message is named by its MessageId or its sequence number. */
export function isNamed(message: ServiceBusReceivedMessage, key: string): boolean {
  return String(message.messageId) === key || sequenceOf(message) === key;
}

/** Every dead letter, those with the given MessageIds (the CLI), or those with the given sequence numbers (the console). */
export type Selection =
  | { all: true; messageIds?: never; sequences?: never }
  | { all?: never; messageIds: readonly string[]; sequences?: never }
  | { all?: never; messageIds?: never; sequences: readonly string[] };

export interface ResubmitRules {
  /** The topic's duplicate detection window; PT1H as the Bicep sets it. */
  duplicateWindowMs: number;
  /** How far the operator's clock may be off the broker's; the window is waited out by this much more. */
  clockSkewMs: number;
  /** Resubmit inside the window anyway. Dangerous: see planResubmit. */
  ignoreDuplicateWindow: boolean;
  /** Resubmit payload mismatches and unknown inbox states too. */
  force: boolean;
  /** Resubmit messages the consumer cannot read or rejected as poison too (they come back, unless it changed). */
  includePoison: boolean;
  nowMs: number;
  /** The Subjects some subscription of the topic takes (its filters). */
  routedSubjects: ReadonlySet<string>;
  /**
   * The dead-letter queue's subscription, and whether its filter takes its own delayed-retry copies
   * (it declares `delayedRetry` in src/topology.json). Undefined: no copy is routed.
   */
  retryCopies?: { subscription: string; taken: boolean };
  /** The consumer's inbox state of each dead letter, by sequence number; undefined when not checked. */
  inboxStates: ReadonlyMap<string, InboxState> | undefined;
}

export interface ResubmitPlan {
  /** Will be sent again, then completed in the dead-letter queue. */
  resubmit: ServiceBusReceivedMessage[];
  /** The consumer applied them already (its marker, same payload): completed without a resubmit. */
  applied: ServiceBusReceivedMessage[];
  /** No subscription of the topic takes their Subject: the broker would discard the copy; left alone. */
  unroutable: ServiceBusReceivedMessage[];
  /**
   * Delayed-retry copies without valid family properties, or scheduled for another subscription:
   * their consumer refuses them as poison (invalid-retry-copy), whatever it is changed to; left alone.
   */
  invalidCopies: { message: ServiceBusReceivedMessage; problem: string }[];
  /** Payload mismatch or unknown in the inbox, without force; left alone. */
  inboxRefused: { message: ServiceBusReceivedMessage; state: InboxState }[];
  /** Poison or rejected in the inbox, without includePoison: a copy would fail the same way; left alone. */
  poison: { message: ServiceBusReceivedMessage; state: InboxState }[];
  /** Still inside the duplicate window of their first send (plus the clock-skew margin); left alone. */
  tooEarly: { message: ServiceBusReceivedMessage; resubmittableAt: Date }[];
  /** Same MessageId as a message resubmitted in this run: the broker would drop it; left alone. */
  sameMessageId: ServiceBusReceivedMessage[];
  /** Asked for by MessageId, but not in the dead-letter queue. */
  notFound: string[];
}

/**
 * When the broker stops dropping a copy with this message's MessageId, by the operator's clock:
 *
 *   t0 original accepted ─── duplicate detection window (PT1H) ───┤ t0 + window ── skew ──┤ resubmittable
 *
 * t0 is the enqueued time the dead-letter queue reports, never earlier than the original send. The
 * broker measures the window on its own clock; an operator clock that runs fast by up to the skew
 * margin still waits the window out.
 */
export function resubmittableAt(
  message: ServiceBusReceivedMessage,
  rules: Pick<ResubmitRules, 'duplicateWindowMs' | 'clockSkewMs' | 'nowMs'>,
): Date {
  const enqueuedMs = message.enqueuedTimeUtc?.getTime() ?? rules.nowMs;
  return new Date(enqueuedMs + rules.duplicateWindowMs + rules.clockSkewMs);
}

/**
 * Whether a resubmitted copy of the message reaches a subscription. An ordinary message does when
 * some subscription of the topic takes its Subject; a delayed-retry copy (Subject inbox.retry) is
 * resubmitted as it is, under its own MessageId with its family's properties, and only its own
 * subscription's filter takes it, when that subscription declares `delayedRetry`.
 */
export function routeOf(
  message: ServiceBusReceivedMessage,
  rules: Pick<ResubmitRules, 'routedSubjects' | 'retryCopies'>,
):
  | { routed: true }
  | { routed: false; why: 'subject' | 'no-delayed-retry' }
  | { routed: false; why: 'invalid-copy'; problem: string } {
  const family = retryFamilyOf(message, rules.retryCopies?.subscription);
  if (family?.kind === 'invalid') return { routed: false, why: 'invalid-copy', problem: family.problem };
  if (family?.kind === 'copy')
    return rules.retryCopies?.taken === true ? { routed: true } : { routed: false, why: 'no-delayed-retry' };
  return message.subject !== undefined && rules.routedSubjects.has(message.subject)
    ? { routed: true }
    : { routed: false, why: 'subject' };
}

/**
 * Decides what a resubmit may touch, in this order:
 *
 * 1. Applied (the consumer's marker, same payload): the effect happened, so the dead letter is
 *    completed and nothing is sent. A delayed-retry copy is looked up by its original MessageId
 *    (its inbox key), so a copy whose original was applied meanwhile is completed too.
 * 2. Unroutable: no subscription's filter takes the Subject (see routeOf). The broker accepts the
 *    send, copies it nowhere and reports success; completing the original would lose the message.
 *    A delayed-retry copy without valid family properties, or scheduled for another subscription,
 *    is refused: its consumer could never take it (invalid-retry-copy).
 * 3. Payload mismatch or unknown (marker possibly purged), unless `force`: the copy would be
 *    ignored, or could be applied a second time.
 * 4. Poison (the consumer cannot read it) or rejected (its handler or the store refused it on its
 *    last delivery, as its failure note says), unless `includePoison`: the copy would fail every
 *    delivery again and come back, unless the consumer was changed to take it.
 * 5. A MessageId already resubmitted in this run: the broker would drop the second copy.
 * 6. Inside the duplicate window (see resubmittableAt), unless `ignoreDuplicateWindow`: the broker
 *    drops the copy and reports success while the tool completes the original, and the message is
 *    gone. (A later send of the same MessageId by the producer restarts the window too; the tool
 *    cannot see that one. Its copy carries the same event, so nothing is lost with it.)
 *
 * Rules 5 and 6 go by the message's own MessageId, which for a delayed-retry copy is its own
 * (`<original>:retry:<subscription>:<n>`): the broker detects duplicates by it, whatever the inbox key.
 */
export function planResubmit(
  deadLetters: readonly ServiceBusReceivedMessage[],
  selection: Selection,
  rules: ResubmitRules,
): ResubmitPlan {
  const plan: ResubmitPlan = {
    resubmit: [],
    applied: [],
    unroutable: [],
    invalidCopies: [],
    inboxRefused: [],
    poison: [],
    tooEarly: [],
    sameMessageId: [],
    notFound: notFound(deadLetters, selection),
  };
  const planned = new Set<string>();
  for (const message of chosen(deadLetters, selection)) {
    const state = rules.inboxStates?.get(sequenceOf(message));
    if (state?.state === 'applied') {
      plan.applied.push(message);
      continue;
    }
    const route = routeOf(message, rules);
    if (!route.routed) {
      if (route.why === 'invalid-copy') plan.invalidCopies.push({ message, problem: route.problem });
      else plan.unroutable.push(message);
      continue;
    }
    if ((state?.state === 'payload-mismatch' || state?.state === 'unknown') && !rules.force) {
      plan.inboxRefused.push({ message, state });
      continue;
    }
    if ((state?.state === 'poison' || state?.state === 'rejected') && !rules.includePoison) {
      plan.poison.push({ message, state });
      continue;
    }
    const messageId = message.messageId === undefined ? undefined : String(message.messageId);
    if (messageId !== undefined && planned.has(messageId)) {
      plan.sameMessageId.push(message);
      continue;
    }
    const at = resubmittableAt(message, rules);
    // Without a MessageId duplicate detection has nothing to match, so there is no window to wait for.
    if (messageId !== undefined && at.getTime() > rules.nowMs && !rules.ignoreDuplicateWindow) {
      plan.tooEarly.push({ message, resubmittableAt: at });
      continue;
    }
    if (messageId !== undefined) planned.add(messageId);
    plan.resubmit.push(message);
  }
  return plan;
}

/** The dead letters the selection names. */
function chosen(
  deadLetters: readonly ServiceBusReceivedMessage[],
  selection: Selection,
): ServiceBusReceivedMessage[] {
  if (selection.all) return [...deadLetters];
  if (selection.sequences !== undefined)
    return deadLetters.filter((message) => selection.sequences.includes(sequenceOf(message)));
  return deadLetters.filter((message) => selection.messageIds.includes(String(message.messageId)));
}

/** The MessageIds (or `#` and the sequence numbers) the selection names that no dead letter has. */
function notFound(deadLetters: readonly ServiceBusReceivedMessage[], selection: Selection): string[] {
  if (selection.all) return [];
  if (selection.sequences !== undefined) {
    return selection.sequences
      .filter((sequence) => !deadLetters.some((m) => sequenceOf(m) === sequence))
      .map((sequence) => `#${sequence}`);
  }
  return selection.messageIds.filter((id) => !deadLetters.some((m) => String(m.messageId) === id));
}

/**
 * The message as its producer sent it: body bytes and properties, minus what dead-lettering added.
 * With `resubmittedAt`, marked with it (RESUBMITTED_AT_PROPERTY, ISO-8601: one short value we write,
 * replacing an earlier resubmit's), so that a consumer that absorbs the copy as a duplicate names
 * the cause (packages/inbox/src/duplicateCause.ts).
 */
export function resubmittedCopy(message: ServiceBusReceivedMessage, resubmittedAt?: Date): ServiceBusMessage {
  const properties: Record<string, unknown> = Object.fromEntries(
    Object.entries(message.applicationProperties ?? {}).filter(
      ([key]) => !(DEAD_LETTER_PROPERTIES as readonly string[]).includes(key),
    ),
  );
  if (resubmittedAt !== undefined) properties[RESUBMITTED_AT_PROPERTY] = resubmittedAt.toISOString();
  return {
    body: message.body as unknown,
    ...(message.messageId === undefined ? {} : { messageId: message.messageId }),
    ...(message.subject === undefined ? {} : { subject: message.subject }),
    ...(message.correlationId === undefined ? {} : { correlationId: message.correlationId }),
    ...(message.contentType === undefined ? {} : { contentType: message.contentType }),
    ...(Object.keys(properties).length === 0
      ? {}
      : { applicationProperties: properties as ServiceBusMessage['applicationProperties'] }),
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
  /** Already applied by the consumer: completed, nothing sent. */
  completedAsApplied: ServiceBusReceivedMessage[];
  /** Sent, but completing the dead-lettered copy failed: it is still there (a later resubmit is refused until the window passes, and the inbox absorbs it anyway). */
  sentButNotCompleted: { message: ServiceBusReceivedMessage; error: Error }[];
  /** The send (or, for an applied one, the completion) failed; the dead-lettered copy is left in place. */
  failed: { message: ServiceBusReceivedMessage; error: Error }[];
  /** Planned, but not received (another receiver holds it, or it left the queue meanwhile). */
  notReceived: ServiceBusReceivedMessage[];
  /** Received on the way to a planned message and given back unchanged (their delivery count rises by one). */
  leftInPlace: number;
}

/**
 * Receives the dead-letter queue in peek-lock. For each planned message it sends the copy to the
 * topic and only then completes the dead-lettered message; an applied one is completed without a
 * send. Anything else it had to lock on the way is given back unchanged (receivePlanned).
 */
export async function resubmit(
  queue: DeadLetterQueue,
  plan: ResubmitPlan,
  report: (line: string) => void,
  /** Epoch ms, for the mark on each copy (resubmittedCopy). */
  now: () => number,
): Promise<ResubmitOutcome> {
  const outcome: ResubmitOutcome = {
    resubmitted: [],
    completedAsApplied: [],
    sentButNotCompleted: [],
    failed: [],
    notReceived: [],
    leftInPlace: 0,
  };
  const planned = new Map<string, { message: ServiceBusReceivedMessage; send: boolean }>();
  for (const message of plan.applied) planned.set(sequenceOf(message), { message, send: false });
  for (const message of plan.resubmit) planned.set(sequenceOf(message), { message, send: true });
  if (planned.size === 0) return outcome;

  const sender = queue.client.createSender(queue.topic);
  try {
    const received = await receivePlanned(queue, planned, async (message, { send }, receiver) => {
      if (!send) {
        try {
          await receiver.completeMessage(message);
          outcome.completedAsApplied.push(message);
          report(
            `already applied ${label(message)}: its consumer's marker has the same payload; completed, not resubmitted`,
          );
        } catch (error) {
          outcome.failed.push({ message, error: error as Error });
          report(`failed   ${label(message)}: completing it failed (${errorText(error)}); it is still there`);
        }
        return 'settled';
      }
      try {
        await sender.sendMessages(resubmittedCopy(message, new Date(now())));
      } catch (error) {
        outcome.failed.push({ message, error: error as Error });
        report(
          `failed   ${label(message)}: the send failed (${errorText(error)}); left in the dead-letter queue`,
        );
        return 'hold';
      }
      try {
        await receiver.completeMessage(message);
        outcome.resubmitted.push(message);
        report(`resubmitted ${label(message)}; dead-lettered copy completed`);
      } catch (error) {
        outcome.sentButNotCompleted.push({ message, error: error as Error });
        report(
          `sent     ${label(message)}, but completing the dead-lettered copy failed (${errorText(error)}); it is still there`,
        );
      }
      return 'settled';
    });
    outcome.notReceived.push(...received.notReceived.map(({ message }) => message));
    outcome.leftInPlace = received.leftInPlace;
  } finally {
    await sender.close();
  }
  return outcome;
}

/**
 * The one receive loop of resubmit and discard: receives the dead-letter queue in peek-lock until
 * every planned message (by sequence number) has been handed to `settle`, or nothing new comes.
 * Whatever it locks on the way, and what `settle` holds, is kept locked until the end (so it is
 * not received again and again) and then abandoned, unchanged.
 */
async function receivePlanned<T>(
  queue: DeadLetterQueue,
  planned: ReadonlyMap<string, T>,
  settle: (
    message: ServiceBusReceivedMessage,
    plan: T,
    receiver: ServiceBusReceiver,
  ) => Promise<'settled' | 'hold'>,
): Promise<{
  /** Planned, but not received (another receiver holds it, or it left the queue meanwhile). */
  notReceived: T[];
  /** Received and given back unchanged (their delivery count rises by one). */
  leftInPlace: number;
}> {
  const pending = new Map(planned);
  const receiver = queue.client.createReceiver(queue.topic, queue.subscription, {
    subQueueType: 'deadLetter',
    skipParsingBodyAsJson: true,
  });
  const held: ServiceBusReceivedMessage[] = [];
  const seen = new Set<string>();
  let leftInPlace = 0;
  try {
    while (pending.size > 0) {
      const batch = await receiver.receiveMessages(50, { maxWaitTimeInMs: 5_000 });
      const fresh = batch.filter((message) => !seen.has(sequenceOf(message)));
      held.push(...batch.filter((message) => seen.has(sequenceOf(message))));
      if (fresh.length === 0) break;
      for (const message of fresh) {
        const key = sequenceOf(message);
        seen.add(key);
        const plan = pending.get(key);
        if (plan === undefined) {
          held.push(message);
          continue;
        }
        pending.delete(key);
        if ((await settle(message, plan, receiver)) === 'hold') held.push(message);
      }
    }
  } finally {
    for (const message of held) {
      try {
        await receiver.abandonMessage(message);
      } catch {
        // The lock ran out: the message is available again anyway, unchanged.
      }
      leftInPlace++;
    }
    await receiver.close();
  }
  return { notReceived: [...pending.values()], leftInPlace };
}

/** Inbox states whose message may be discarded: its effect is in place, or its consumer refuses it anyway. */
const DISCARDABLE: readonly InboxStateName[] = ['applied', 'versioned', 'poison', 'rejected'];

export interface DiscardPlan {
  /**
   * Will be completed in the dead-letter queue: gone for good. `effectLost` when only force lets it
   * go: its business effect never happens (not applied, failed, unknown, payload mismatch, unchecked).
   */
  discard: { message: ServiceBusReceivedMessage; state: InboxState | undefined; effectLost: boolean }[];
  /** Its business effect would never happen, without force; left alone. */
  refused: { message: ServiceBusReceivedMessage; state: InboxState | undefined }[];
  /** Asked for by MessageId, but not in the dead-letter queue. */
  notFound: string[];
}

/**
 * Decides what a discard may remove. A dead letter may go when its consumer's inbox says its effect
 * is in place (applied, versioned) or its consumer refuses it whatever is done (poison, rejected).
 * Any other, and one whose state was not checked, is a business effect that then never happens:
 * refused, unless `force`.
 */
export function planDiscard(
  deadLetters: readonly ServiceBusReceivedMessage[],
  selection: Selection,
  rules: { inboxStates: ReadonlyMap<string, InboxState> | undefined; force: boolean },
): DiscardPlan {
  const plan: DiscardPlan = { discard: [], refused: [], notFound: notFound(deadLetters, selection) };
  for (const message of chosen(deadLetters, selection)) {
    const state = rules.inboxStates?.get(sequenceOf(message));
    const effectLost = state === undefined || !DISCARDABLE.includes(state.state);
    if (effectLost && !rules.force) plan.refused.push({ message, state });
    else plan.discard.push({ message, state, effectLost });
  }
  return plan;
}

export interface DiscardOutcome {
  /** Completed in the dead-letter queue: gone. */
  discarded: ServiceBusReceivedMessage[];
  /** Completing it failed: it is still there. */
  failed: { message: ServiceBusReceivedMessage; error: Error }[];
  /** Planned, but not received (another receiver holds it, or it left the queue meanwhile). */
  notReceived: ServiceBusReceivedMessage[];
  /** Received on the way to a planned message and given back unchanged (their delivery count rises by one). */
  leftInPlace: number;
}

/** Receives the dead-letter queue in peek-lock and completes each planned message: it is gone for good. */
export async function discard(
  queue: DeadLetterQueue,
  plan: DiscardPlan,
  report: (line: string) => void,
): Promise<DiscardOutcome> {
  const outcome: DiscardOutcome = { discarded: [], failed: [], notReceived: [], leftInPlace: 0 };
  const planned = new Map(plan.discard.map(({ message }) => [sequenceOf(message), message]));
  if (planned.size === 0) return outcome;
  const received = await receivePlanned(queue, planned, async (message, _, receiver) => {
    try {
      await receiver.completeMessage(message);
      outcome.discarded.push(message);
      report(`discarded ${label(message)}: completed in the dead-letter queue`);
    } catch (error) {
      outcome.failed.push({ message, error: error as Error });
      report(`failed   ${label(message)}: completing it failed (${errorText(error)}); it is still there`);
    }
    return 'settled';
  });
  outcome.notReceived.push(...received.notReceived);
  outcome.leftInPlace = received.leftInPlace;
  return outcome;
}

export function sequenceOf(message: ServiceBusReceivedMessage): string {
  return message.sequenceNumber?.toString() ?? '';
}

export function label(message: ServiceBusReceivedMessage): string {
  return `#${sequenceOf(message)} messageId=${bounded(idText(message.messageId) ?? '(none)')} subject=${bounded(message.subject ?? '(none)')}`;
}

function errorText(error: unknown): string {
  return bounded(error instanceof Error ? error.message : String(error), 200);
}
