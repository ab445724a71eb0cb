import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import { formatDuration, RETRY_SUBJECT } from '@idempotent-consumers/inbox/internal';

import { bounded } from '../cli/errors';
import { byFamily, familyText, idText, type RetryFamily, retryFamilyOf } from './deadLetterIdentity';
import {
  type DeadLetterQueue,
  describeQueue,
  type DiscardOutcome,
  type DiscardPlan,
  label,
  peekDeadLetters,
  type ResubmitOutcome,
  type ResubmitPlan,
  type ResubmitRules,
  resubmittableAt,
  resubmittedCopy,
  routeOf,
  sequenceOf,
} from './deadLetterQueue';
import {
  consumerOf,
  type Inbox,
  INBOX_STATES,
  type InboxState,
  type InboxStateName,
  inboxStateOf,
} from './inboxState';
import { bodyDigest } from './start/output';

/**
 * What the dead-letter tool tells an operator, as data: `npm run dead-letters` prints it, and a web
 * page can render the same verdicts without a second implementation of them. Every untrusted value
 * (MessageId, Subject, reasons) is bounded here, once; bodies appear only in showFields' sibling
 * bodyText, which only `show` asks for.
 */

/** The rules list judges by: those of a resubmit, without the choices only a resubmit makes. */
export type ListRules = Omit<ResubmitRules, 'force' | 'includePoison' | 'ignoreDuplicateWindow'>;

/** One dead-lettered message as list shows it: plain data, JSON-serialisable. */
export interface DeadLetterRow {
  sequence: string;
  messageId: string | undefined;
  subject: string | undefined;
  /** The delayed retry column: 'original' for a message a copy names, or which copy this is. */
  family: string | undefined;
  reason: string | undefined;
  description: string | undefined;
  deliveries: number | undefined;
  /** ISO-8601. */
  enqueuedAt: string | undefined;
  /** Undefined when the inbox was not checked (or the message was not among those checked). */
  inbox: { state: InboxStateName; detail?: string; text: string; meaning: string } | undefined;
  /** ISO-8601: when the broker stops dropping a resubmitted copy; undefined when never. */
  resubmittableFrom: string | undefined;
  /** Why a resubmitted copy would reach no subscription; undefined when it would. */
  never: string | undefined;
  bodyBytes: number;
  /** The first 12 hex digits of the body's SHA-256: tells bodies apart without showing them. */
  bodySha256: string;
}

export interface DeadLetterReport {
  /** Which dead-letter queue (describeQueue). */
  queue: string;
  rows: DeadLetterRow[];
  /** Whether the queue holds a delayed-retry copy: only then is the delayed retry column shown. */
  delayedRetryColumn: boolean;
  /** What the columns mean, as list prints it after the table: only the states present. */
  legend: string[];
  /** Where the inbox states come from, or why they were not checked; '' when not asked. */
  inboxNote: string;
}

/** What one line of a plan says will happen to a message. */
export interface PlanLine {
  verdict: 'complete' | 'resubmit' | 'discard' | 'refused' | 'skipped' | 'not-found';
  /** The message's sequence number; undefined for a MessageId not found. */
  sequence?: string;
  text: string;
}

export const STATE_MEANINGS: Record<InboxStateName, string> = {
  applied: 'its consumer applied it (marker, same payload); resubmit completes it without sending',
  'payload-mismatch':
    'a marker with another payload: a different message used this MessageId; resubmit refuses it without --force',
  'not-applied':
    'no marker, and one would still be kept: never applied. Resubmit delivers it again; why its deliveries failed ' +
    '(an outage? a bug since fixed?) is in the app logs, by MessageId',
  failed:
    'never applied: its last delivery failed with the error in parentheses (its consumer noted it). ' +
    'Resubmit delivers it again: fix the cause first, or it fails the same way',
  unknown:
    'no marker, but one may have been purged (older than INBOX_RETENTION), or no known consumer; resubmit refuses it without --force',
  versioned: 'its consumer writes only over an older version and keeps no marker: resubmitting is safe',
  poison:
    'its consumer cannot read it (the reason in parentheses) and never applied it; a copy would be dead-lettered ' +
    'again, so resubmit skips it without --include-poison',
  rejected:
    'its consumer read it and rejected it as poison on its last delivery (the reason in parentheses) and never ' +
    'applied it; a copy is rejected again unless the consumer changed, so resubmit skips it without --include-poison',
};

/** Why a resubmitted copy would reach no subscription (routeOf). */
const NEVER: Record<'subject' | 'no-delayed-retry' | 'invalid-copy', string> = {
  subject: 'no subscription takes its subject',
  'no-delayed-retry': 'its subscription declares no delayedRetry, so its filter takes no delayed-retry copy',
  'invalid-copy': 'an invalid delayed-retry copy, which its consumer refuses (invalid-retry-copy)',
};

const DELAYED_RETRY_MEANING =
  `a copy its consumer scheduled after failed deliveries (Subject ${RETRY_SUBJECT}), attempt n of the original ` +
  "MessageId, listed with the rest of its family (the original first). Its inbox state is the original's (the " +
  "copy's inbox key); resubmit sends it as it is, under its own MessageId, so only its own subscription takes it " +
  'and the duplicate detection window runs from its own enqueued time.';

function stateText(state: InboxState): string {
  return ['poison', 'rejected', 'failed'].includes(state.state)
    ? `${state.state} (${state.detail})`
    : state.state;
}

/** Each dead letter's state in its consumer's inbox, by sequence number. */
async function readInboxStates(
  deadLetters: readonly ServiceBusReceivedMessage[],
  subscription: string,
  inbox: Inbox,
  at: { nowMs: number; clockSkewMs: number },
): Promise<Map<string, InboxState>> {
  const consumer = await consumerOf(subscription);
  const states = new Map<string, InboxState>();
  for (const message of deadLetters) {
    states.set(sequenceOf(message), await inboxStateOf(message, consumer, inbox, at));
  }
  return states;
}

/**
 * The inbox states of the dead letters, when there is an inbox to read (connectInbox), and the note
 * that says where they come from or why they were not checked ('' without an inbox to ask).
 */
export async function checkInbox(
  deadLetters: readonly ServiceBusReceivedMessage[],
  subscription: string,
  inbox: Inbox | string | undefined,
  at: { nowMs: number; clockSkewMs: number },
): Promise<{ note: string; states: Map<string, InboxState> | undefined }> {
  if (typeof inbox === 'string') return { note: `Inbox state not checked: ${inbox}.`, states: undefined };
  if (!inbox) return { note: '', states: undefined };
  return {
    note: `Inbox: ${inbox.description}.`,
    states: await readInboxStates(deadLetters, subscription, inbox, at),
  };
}

/**
 * The dead-letter queue as list shows it, read now: every message (peeked, nothing locked), its
 * inbox state when `inbox` can be read, and the verdicts of `rules`.
 */
export async function readDeadLetterReport(
  queue: DeadLetterQueue,
  inbox: Inbox | string | undefined,
  rules: Omit<ListRules, 'inboxStates'>,
): Promise<DeadLetterReport> {
  const deadLetters = await peekDeadLetters(queue);
  const { note, states } = await checkInbox(deadLetters, queue.subscription, inbox, rules);
  return {
    ...reportDeadLetters(deadLetters, { ...rules, inboxStates: states }),
    queue: describeQueue(queue),
    inboxNote: note,
  };
}

/**
 * The list verdicts of each dead letter, with each delayed-retry family together (byFamily). The
 * delayed retry column only when the queue holds a copy: other queues read as before. `queue` and
 * `inboxNote` are left empty: readDeadLetterReport knows them.
 */
export function reportDeadLetters(
  deadLetters: readonly ServiceBusReceivedMessage[],
  rules: ListRules,
): DeadLetterReport {
  const states = rules.inboxStates;
  const subscription = rules.retryCopies?.subscription;
  const families = new Map<string, RetryFamily | undefined>(
    deadLetters.map((message) => [sequenceOf(message), retryFamilyOf(message, subscription)]),
  );
  const copies = [...families.values()].some((family) => family !== undefined);
  const originals = new Set(
    [...families.values()].flatMap((family) => (family?.kind === 'copy' ? [family.original] : [])),
  );
  const rows = byFamily(deadLetters, subscription).map((message): DeadLetterRow => {
    const state = states?.get(sequenceOf(message));
    const route = routeOf(message, rules);
    const family = families.get(sequenceOf(message));
    const id = idText(message.messageId);
    const familyColumn =
      family === undefined && id !== undefined && originals.has(id) ? 'original' : familyText(family);
    const body = Buffer.isBuffer(message.body) ? message.body : (JSON.stringify(message.body) ?? '');
    const digest = bodyDigest(body);
    return {
      sequence: sequenceOf(message),
      messageId: id === undefined ? undefined : bounded(id),
      subject: message.subject === undefined ? undefined : bounded(message.subject),
      family: familyColumn || undefined,
      reason: message.deadLetterReason === undefined ? undefined : bounded(message.deadLetterReason, 40),
      description:
        message.deadLetterErrorDescription === undefined
          ? undefined
          : bounded(message.deadLetterErrorDescription, 60),
      deliveries: message.deliveryCount,
      enqueuedAt: message.enqueuedTimeUtc?.toISOString(),
      inbox: state && {
        state: state.state,
        detail: state.detail,
        text: stateText(state),
        meaning: STATE_MEANINGS[state.state],
      },
      resubmittableFrom: route.routed ? resubmittableAt(message, rules).toISOString() : undefined,
      never: route.routed ? undefined : NEVER[route.why],
      bodyBytes: digest.bytes,
      bodySha256: digest.sha256,
    };
  });
  const window = formatDuration(rules.duplicateWindowMs / 1000);
  const skew = formatDuration(rules.clockSkewMs / 1000);
  const present = INBOX_STATES.filter((name) => [...(states?.values() ?? [])].some((s) => s.state === name));
  const legend =
    rows.length === 0
      ? []
      : [
          `resubmittable from: enqueued + the duplicate window (${window}) + a clock-skew margin (${skew}); before it the broker drops the copy.`,
          ...(copies ? [`delayed retry: ${DELAYED_RETRY_MEANING}`] : []),
          ...present.map((name) => `${name}: ${STATE_MEANINGS[name]}`),
        ];
  return { queue: '', rows, delayedRetryColumn: copies, legend, inboxNote: '' };
}

/** What a resubmit will do (or, with dryRun, would do) with each message of the plan, and why. */
export function planLines(
  plan: ResubmitPlan,
  context: {
    subscription: string;
    topic: string;
    duplicateWindowSeconds: number;
    clockSkewSeconds: number;
    dryRun: boolean;
  },
): PlanLine[] {
  const { dryRun } = context;
  const window = formatDuration(context.duplicateWindowSeconds);
  const skew = formatDuration(context.clockSkewSeconds);
  const of = (verdict: PlanLine['verdict'], message: ServiceBusReceivedMessage, text: string): PlanLine => ({
    verdict,
    sequence: sequenceOf(message),
    text,
  });
  return [
    ...plan.applied.map((message) =>
      of(
        'complete',
        message,
        `${dryRun ? 'would complete' : 'will complete'} ${label(message)} without resubmitting: already applied ` +
          "(its consumer's marker has the same payload)",
      ),
    ),
    ...plan.resubmit.map((message) =>
      of(
        'resubmit',
        message,
        `${dryRun ? 'would resubmit' : 'will resubmit'} ${label(message)} (reason: ${bounded(message.deadLetterReason ?? 'none', 40)})`,
      ),
    ),
    ...plan.unroutable.map((message) =>
      of(
        'refused',
        message,
        message.subject === RETRY_SUBJECT
          ? `refused ${label(message)}: a delayed-retry copy, and ${bounded(context.subscription)} declares no delayedRetry ` +
              '(src/topology.json), so its filter takes no copy. The broker would accept it, deliver it nowhere and ' +
              'report success, and completing it here would lose it.'
          : `refused ${label(message)}: no subscription of ${context.topic} takes this Subject (src/topology.json). The broker ` +
              'would accept the copy, deliver it nowhere and report success, and completing the original would lose it.',
      ),
    ),
    ...plan.invalidCopies.map(({ message, problem }) =>
      of(
        'refused',
        message,
        `refused ${label(message)}: an invalid delayed-retry copy (${problem}); its consumer refuses it as poison ` +
          "(invalid-retry-copy), whatever the fix, since its effect could not be told apart from the original's. " +
          'show prints its properties; left in the dead-letter queue.',
      ),
    ),
    ...plan.inboxRefused.map(({ message, state }) =>
      of(
        'refused',
        message,
        state.state === 'payload-mismatch'
          ? `refused ${label(message)}: payload mismatch, the consumer's marker for this MessageId has another payload ` +
              '(a different message used the MessageId). A copy would be logged as payload_mismatch and not applied; --force sends it anyway.'
          : `refused ${label(message)}: inbox state unknown (${state.detail}); it may have been applied already. ` +
              'Check the business state (show gives the ids), then --force to resubmit it.',
      ),
    ),
    ...plan.poison.map(({ message, state }) =>
      of(
        'refused',
        message,
        `refused ${label(message)}: ${state.state} (${state.detail}); its consumer ` +
          `${state.state === 'poison' ? 'cannot read it' : 'rejected it'}, and a copy would fail every delivery the same ` +
          'way and come back. Once the consumer takes it (deploy the fix first), --include-poison resubmits it.',
      ),
    ),
    ...plan.tooEarly.map(({ message, resubmittableAt }) =>
      of(
        'refused',
        message,
        `refused ${label(message)}: first sent ${message.enqueuedTimeUtc?.toISOString() ?? '(unknown)'}, still inside the ` +
          `topic's duplicate detection window (${window}) plus the clock-skew margin (${skew}). Resubmit it from ` +
          `${resubmittableAt.toISOString()}: sent now, the broker could drop it as a duplicate while the dead-lettered ` +
          'copy is completed, and it would be lost.',
      ),
    ),
    ...plan.sameMessageId.map((message) =>
      of(
        'skipped',
        message,
        `skipped ${label(message)}: another message with this MessageId is resubmitted in this run; the broker would ` +
          'drop this one as its duplicate. Left in the dead-letter queue.',
      ),
    ),
    ...plan.notFound.map(notFoundLine),
  ];
}

/** A MessageId, or a `#` sequence number (the console's selection), that no dead letter has. */
function notFoundLine(key: string): PlanLine {
  return key.startsWith('#')
    ? {
        verdict: 'not-found',
        sequence: key.slice(1),
        text: `not found: no dead letter ${key} (resubmitted or discarded meanwhile?)`,
      }
    : { verdict: 'not-found', text: `not found: no dead-lettered message has MessageId ${bounded(key)}` };
}

/** What a discard will do (or, with dryRun, would do) with each message of the plan, and why. */
export function discardLines(plan: DiscardPlan, context: { dryRun: boolean }): PlanLine[] {
  const will = context.dryRun ? 'would discard' : 'will discard';
  return [
    ...plan.discard.map(({ message, state, effectLost }): PlanLine => ({
      verdict: 'discard',
      sequence: sequenceOf(message),
      text: effectLost
        ? `${will} ${label(message)} (--force): ${lostText(state)}. Its business effect never happens.`
        : `${will} ${label(message)}: ${stateText(state!)}; ${DISCARDED_BECAUSE[state!.state]}`,
    })),
    ...plan.refused.map(({ message, state }): PlanLine => ({
      verdict: 'refused',
      sequence: sequenceOf(message),
      text:
        `refused ${label(message)}: ${lostText(state)}. Discarded, its business effect would never happen; ` +
        'resubmit delivers it again, or --force discards it anyway.',
    })),
    ...plan.notFound.map(notFoundLine),
  ];
}

/**
 * What a resubmit did, after the lines it reported as it went: each message it could not receive,
 * and the summary; `ok` when everything planned was done and nothing was refused, skipped or missing.
 */
export function resubmitDone(plan: ResubmitPlan, outcome: ResubmitOutcome): { lines: string[]; ok: boolean } {
  const refused = resubmitRefused(plan);
  const failed = outcome.failed.length + outcome.sentButNotCompleted.length;
  return {
    lines: [
      ...outcome.notReceived.map(notReceivedLine),
      `Resubmitted ${outcome.resubmitted.length}, completed as already applied ${outcome.completedAsApplied.length}, ` +
        `refused ${refused}, skipped ${plan.sameMessageId.length}, not found ${plan.notFound.length}, ` +
        `failed ${failed}, not received ${outcome.notReceived.length}; ` +
        `${outcome.leftInPlace} other message(s) locked on the way were given back unchanged.`,
    ],
    ok:
      refused + plan.sameMessageId.length + plan.notFound.length + failed + outcome.notReceived.length === 0,
  };
}

/** How many messages a resubmit plan refuses (too early, unroutable, invalid copies, inbox, poison). */
export function resubmitRefused(plan: ResubmitPlan): number {
  return (
    plan.tooEarly.length +
    plan.unroutable.length +
    plan.invalidCopies.length +
    plan.inboxRefused.length +
    plan.poison.length
  );
}

/** What a discard did: as resubmitDone. */
export function discardDone(plan: DiscardPlan, outcome: DiscardOutcome): { lines: string[]; ok: boolean } {
  return {
    lines: [
      ...outcome.notReceived.map(notReceivedLine),
      `Discarded ${outcome.discarded.length}, refused ${plan.refused.length}, not found ${plan.notFound.length}, ` +
        `failed ${outcome.failed.length}, not received ${outcome.notReceived.length}; ` +
        `${outcome.leftInPlace} other message(s) locked on the way were given back unchanged.`,
    ],
    ok: plan.refused.length + plan.notFound.length + outcome.failed.length + outcome.notReceived.length === 0,
  };
}

function notReceivedLine(message: ServiceBusReceivedMessage): string {
  return `not received ${label(message)}: another receiver holds it, or it left the queue; left alone`;
}

/** Why a message in a discardable state (planDiscard) may go. */
const DISCARDED_BECAUSE: Partial<Record<InboxStateName, string>> = {
  applied: "its consumer's marker has the same payload: its effect is in place",
  versioned:
    'its consumer writes only over an older version and keeps no marker: its effect is taken as in place',
  poison: 'its consumer cannot read it, so it never takes effect (a copy would fail the same way)',
  rejected: 'its consumer rejected it, so it never takes effect unless the consumer changes',
};

/** What the inbox says of a message whose effect a discard would lose. */
function lostText(state: InboxState | undefined): string {
  if (state === undefined) return 'inbox state not checked, so nothing says it was applied';
  if (state.state === 'payload-mismatch')
    return `payload mismatch (${state.detail}): this message was never applied`;
  if (state.state === 'unknown') return `inbox state unknown (${state.detail}): nothing says it was applied`;
  return `${stateText(state)}: never applied`;
}

/** What show prints of a message besides its body: name and value, only those it has. */
export function showFields(message: ServiceBusReceivedMessage, subscription: string): [string, string][] {
  const family = retryFamilyOf(message, subscription);
  const fields: [string, string | number | undefined][] = [
    ['messageId', idText(message.messageId)],
    ['subject', message.subject],
    ['delayed retry', family === undefined ? undefined : familyText(family)],
    ['correlationId', idText(message.correlationId)],
    ['contentType', message.contentType],
    ['enqueued (UTC)', message.enqueuedTimeUtc?.toISOString()],
    ['deliveries', message.deliveryCount],
    ['DeadLetterReason', message.deadLetterReason],
    ['DeadLetterErrorDescription', message.deadLetterErrorDescription],
    ['applicationProperties', JSON.stringify(resubmittedCopy(message).applicationProperties ?? {})],
  ];
  return fields.flatMap(([name, value]) => (value === undefined ? [] : [[name, String(value)]]));
}

/** JSON pretty-printed, other UTF-8 as text, anything else as base64. */
export function bodyText(body: unknown): string {
  if (!Buffer.isBuffer(body)) return JSON.stringify(body, null, 2) ?? String(body);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return `(${body.length} bytes, base64) ${body.toString('base64')}`;
  }
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
