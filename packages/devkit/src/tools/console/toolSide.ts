import { createHash } from 'node:crypto';

import type { ServiceBusClient, ServiceBusReceivedMessage } from '@azure/service-bus';
import type { Topology } from '@idempotent-consumers/inbox/internal';
import Long from 'long';
import { z } from 'zod';

import { bounded, UsageError } from '../../cli/errors';
import {
  type DeadLetterQueue,
  describeQueue,
  discard,
  peekQueue,
  planDiscard,
  planResubmit,
  resubmit,
  sequenceOf,
} from '../deadLetterQueue';
import {
  checkInbox,
  discardDone,
  discardLines,
  type ListRules,
  planLines,
  reportDeadLetters,
  resubmitDone,
} from '../deadLetterReport';
import { parseEvent, type SubjectRules } from '../events';
import type { Inbox } from '../inboxState';
import { sendEvent } from '../send';
import { planSend, type SendPlan, sendPlanLines } from '../sendPlan';
import { routedSubjects, takesRetryCopies, topicFor } from '../serviceBus';
import { bodyForPage } from './body';
import { ConsoleError, explainRefusal } from './errors';
import type {
  ActionRequest,
  ActionResult,
  BodyView,
  DeadLetterPage,
  PlanView,
  SendForm,
  SendPlanView,
  SendRequest,
  SendResult,
} from './types';

const DEAD_LETTERS_PER_PAGE = 50;

/**
 * The console's actions and the views that decide them, through the tools' own code: the dead-letter
 * queues with the verdicts of `npm run dead-letters` (its report, plans, resubmit and discard), and
 * sending as `npm run send` does (its validation, MessageId, tracing). The inbox states and the
 * schemas come from the app's consumers, loaded as the tools load them; under npm start the built
 * app runs on the main thread, so this side runs on a thread of its own (toolThread.ts).
 */
export class ToolSide {
  constructor(
    private readonly parts: {
      serviceBus: ServiceBusClient;
      inbox: Inbox | string;
      rules: ReadonlyMap<string, SubjectRules>;
      duplicateWindowSeconds: number;
      clockSkewSeconds: number;
      now: () => number;
    },
  ) {}

  /** A page of a subscription's dead-letter queue, from a sequence number, with list's verdicts. */
  async deadLetters(
    topology: Topology,
    subscription: string,
    from: string | undefined,
  ): Promise<DeadLetterPage> {
    const queue = this.queue(topology, subscription);
    const start = from === undefined ? undefined : sequenceNumber(from);
    const messages = await this.read('the dead-letter queue', () =>
      peekQueue(queue, { deadLetter: true, max: DEAD_LETTERS_PER_PAGE + 1, from: start }),
    );
    const page = messages.slice(0, DEAD_LETTERS_PER_PAGE);
    const rules = this.listRules(topology, queue);
    const { note, states } = await checkInbox(page, subscription, this.parts.inbox, rules);
    const report = reportDeadLetters(page, { ...rules, inboxStates: states });
    return {
      subscription,
      queue: describeQueue(queue),
      rows: report.rows.map((row) =>
        row.inbox === undefined
          ? row
          : { ...row, inbox: { ...row.inbox, meaning: inPageWords(row.inbox.meaning) } },
      ),
      legend: report.legend.map(inPageWords),
      inboxNote: note,
      next: messages.length > DEAD_LETTERS_PER_PAGE ? sequenceOf(messages.at(-1)!) : undefined,
    };
  }

  /** One dead letter's body, on request: at most PAGE_BODY_BYTES of it. */
  async deadLetterBody(topology: Topology, subscription: string, sequence: string): Promise<BodyView> {
    const queue = this.queue(topology, subscription);
    const [message] = await this.peekSequences(queue, [sequence]);
    if (message === undefined)
      throw new ConsoleError(404, `No dead letter #${sequence} (it may have been resubmitted or discarded).`);
    return bodyForPage(bodyBytes(message));
  }

  /**
   * What the action would do, as the CLI's --dry-run says it (nothing is sent, completed or locked),
   * and the plan's fingerprint, which `act` must be given back.
   */
  async plan(topology: Topology, subscription: string, request: ActionRequest): Promise<PlanView> {
    const { lines, acting, fingerprint } = await this.decide(topology, subscription, request, true);
    return { action: request.action, lines, acting, fingerprint };
  }

  /**
   * Does what the confirmed plan said: decided again on the queue as it is now, by the same rules as
   * the CLI, and refused when that decision is not the plan the user confirmed (a message came, went
   * or changed state meanwhile).
   */
  async act(topology: Topology, subscription: string, request: ActionRequest): Promise<ActionResult> {
    const decided = await this.decide(topology, subscription, request, false);
    if (request.fingerprint === undefined)
      throw new ConsoleError(409, 'An action carries out a plan: ask for the plan first, and confirm it.');
    if (request.fingerprint !== decided.fingerprint) {
      throw new ConsoleError(
        409,
        'The dead-letter queue changed since the plan you confirmed: nothing was done. Look at the new plan.',
      );
    }
    const lines = decided.lines.map((line) => line.text);
    const said = (line: string): void => void lines.push(line);
    const done =
      decided.resubmit !== undefined
        ? resubmitDone(
            decided.resubmit,
            await resubmit(decided.queue, decided.resubmit, said, this.parts.now),
          )
        : discardDone(decided.discard!, await discard(decided.queue, decided.discard!, said));
    lines.push(...done.lines.slice(0, -1));
    return { lines, summary: done.lines.at(-1)!, ok: done.ok };
  }

  /** The form's subjects, each on the topic whose filters take it in `topology` (the one served). */
  sendForm(topology: Topology): Promise<SendForm> {
    return Promise.resolve({
      subjects: [...this.parts.rules].map(([subject, rule]) => ({
        subject,
        topic: topicFor(subject, undefined, topology),
        consumers: [...rule.schemas.keys()],
        schema: jsonSchema([...rule.schemas.values()][0]),
      })),
    });
  }

  /**
   * What sending the event would do, as `npm run send -- --dry-run` says it (nothing is sent), and
   * the plan's fingerprint, which `send` must be given back.
   */
  planSend(topology: Topology, request: SendRequest): Promise<SendPlanView> {
    const plan = this.decideSend(topology, request);
    const { event } = plan;
    return Promise.resolve({
      topic: plan.topic,
      subject: event.subject,
      messageId: bounded(event.messageId, 128),
      messageIdGiven: event.messageIdGiven,
      copies: plan.copies,
      bodyBytes: plan.bodyBytes,
      bodySha256: plan.bodySha256,
      subscriptions: plan.subscriptions,
      consumers: event.consumers,
      poison: event.poison,
      lines: sendPlanLines(plan).map(inPageWords),
      fingerprint: sendFingerprint(plan),
    });
  }

  /**
   * Sends what the confirmed plan said, as npm run send does (the same validation, MessageId, tracing
   * and message): planned again from the request, with the filters and the consumers as they are now,
   * and refused when that is not the plan the user confirmed.
   */
  async send(topology: Topology, request: SendRequest): Promise<SendResult> {
    const plan = this.decideSend(topology, request);
    if (request.fingerprint === undefined)
      throw new ConsoleError(409, 'A send carries out a plan: ask for the plan first, and confirm it.');
    if (request.fingerprint !== sendFingerprint(plan)) {
      throw new ConsoleError(
        409,
        'What would be sent is no longer the plan you confirmed (the form, the filters or the consumers changed): ' +
          'nothing was sent. Look at the new plan.',
      );
    }
    const { event } = plan;
    const sent = await sendEvent(this.parts.serviceBus, plan);
    const lines = [
      `Sent ${event.subject} messageId=${bounded(sent.messageId, 128)} to ${sent.topic} (trace ${sent.traceId}).`,
    ];
    if (sent.poison !== undefined)
      lines.push(
        `Expected to be poison (${sent.poison}): its consumers refuse it, the host retries it until maxDeliveryCount, and Service Bus dead-letters it.`,
      );
    if (sent.unrouted)
      lines.push(
        `No subscription of ${sent.topic} takes ${event.subject}: Service Bus reported success and dropped it.`,
      );
    return { lines, messageId: bounded(sent.messageId, 128), topic: sent.topic };
  }

  /** The plan of a send from the form, to the topic whose filters take its Subject. */
  private decideSend(topology: Topology, request: SendRequest): SendPlan {
    let event;
    try {
      event = parseEvent(
        {
          subject: request.subject,
          body: request.body,
          rawBody: request.rawBody,
          messageId: request.messageId,
        },
        'The form',
        this.parts.rules,
        request.allowInvalid,
      );
    } catch (error) {
      if (error instanceof UsageError) error.message = inPageWords(error.message);
      throw error;
    }
    return planSend(event, { copies: 1, topology });
  }

  /**
   * The plan of an action on the chosen dead letters as they are now (each peeked by its sequence
   * number: the rest of the queue is not read), with what it would say of each, and a fingerprint of
   * what it would do to which message.
   */
  private async decide(
    topology: Topology,
    subscription: string,
    request: ActionRequest,
    dryRun: boolean,
  ): Promise<{
    queue: DeadLetterQueue;
    lines: PlanView['lines'];
    acting: number;
    fingerprint: string;
    resubmit?: ReturnType<typeof planResubmit>;
    discard?: ReturnType<typeof planDiscard>;
  }> {
    const queue = this.queue(topology, subscription);
    const chosen = await this.peekSequences(queue, request.sequences);
    const selection = { sequences: request.sequences };
    const rules = this.listRules(topology, queue);
    const { states } = await checkInbox(chosen, subscription, this.parts.inbox, rules);
    const decided = (lines: PlanView['lines'], acting: number) => ({
      queue,
      lines,
      acting,
      fingerprint: createHash('sha256')
        .update(JSON.stringify(lines.map((line) => [line.verdict, line.sequence])))
        .digest('hex'),
    });
    if (request.action === 'resubmit') {
      const plan = planResubmit(chosen, selection, {
        ...rules,
        inboxStates: states,
        force: request.force,
        includePoison: request.includePoison,
        ignoreDuplicateWindow: false,
      });
      const lines = planLines(plan, {
        subscription,
        topic: queue.topic,
        duplicateWindowSeconds: this.parts.duplicateWindowSeconds,
        clockSkewSeconds: this.parts.clockSkewSeconds,
        dryRun,
      }).map(lineView);
      return { ...decided(lines, plan.resubmit.length + plan.applied.length), resubmit: plan };
    }
    const plan = planDiscard(chosen, selection, { inboxStates: states, force: request.force });
    return { ...decided(discardLines(plan, { dryRun }).map(lineView), plan.discard.length), discard: plan };
  }

  /** The dead letters with these sequence numbers that are still there, oldest first. */
  private async peekSequences(
    queue: DeadLetterQueue,
    sequences: readonly string[],
  ): Promise<ServiceBusReceivedMessage[]> {
    const found: ServiceBusReceivedMessage[] = [];
    for (const sequence of [...new Set(sequences)].sort((a, b) =>
      Long.fromString(a).compare(Long.fromString(b)),
    )) {
      const [message] = await this.read('the dead-letter queue', () =>
        peekQueue(queue, { deadLetter: true, max: 1, from: sequenceNumber(sequence) }),
      );
      if (message !== undefined && sequenceOf(message) === sequence) found.push(message);
    }
    return found;
  }

  private listRules(topology: Topology, queue: DeadLetterQueue): Omit<ListRules, 'inboxStates'> {
    return {
      duplicateWindowMs: this.parts.duplicateWindowSeconds * 1000,
      clockSkewMs: this.parts.clockSkewSeconds * 1000,
      nowMs: this.parts.now(),
      routedSubjects: routedSubjects(queue.topic, topology),
      retryCopies: {
        subscription: queue.subscription,
        taken: takesRetryCopies(queue.topic, queue.subscription, topology),
      },
    };
  }

  /** A declared subscription's dead-letter queue; nothing else is read. */
  private queue(topology: Topology, subscription: string): DeadLetterQueue {
    const topic = topology.topics.find((candidate) =>
      candidate.subscriptions.some((s) => s.name === subscription),
    );
    if (topic === undefined)
      throw new ConsoleError(404, `No subscription is named '${bounded(subscription, 60)}'.`);
    return { client: this.parts.serviceBus, topic: topic.name, subscription };
  }

  private async read<T>(what: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      throw new ConsoleError(
        502,
        explainRefusal(error, what) ??
          `Could not read ${what}: ${bounded(error instanceof Error ? error.message : String(error), 200)}`,
      );
    }
  }
}

function lineView(line: { verdict: string; sequence?: string; text: string }): PlanView['lines'][number] {
  return { verdict: line.verdict, sequence: line.sequence, text: inPageWords(line.text) };
}

/**
 * The commands' texts (written once, for the terminal) name the flags that lift a refusal; the page
 * has boxes for them, named here as its labels say (page/app.ts).
 */
const PAGE_WORDS: readonly (readonly [string, string])[] = [
  ['--allow-invalid', 'the box "send it even if its consumers refuse it"'],
  ['--include-poison', 'the box "include poison"'],
  ['--force', 'the box "force"'],
];

export function inPageWords(text: string): string {
  return PAGE_WORDS.reduce((said, [flag, box]) => said.split(flag).join(box), text);
}

/** What the send would do, hashed: the body by its SHA-256, and every verdict the dialog showed. */
function sendFingerprint(plan: SendPlan): string {
  const { event } = plan;
  return createHash('sha256')
    .update(
      JSON.stringify([
        plan.topic,
        event.subject,
        event.messageId,
        plan.bodySha256,
        plan.copies,
        plan.subscriptions,
        event.consumers,
        event.poison ?? null,
      ]),
    )
    .digest('hex');
}

/** A sequence number as the page sends it: decimal digits, up to a 64-bit integer (partitioned entities use the high bits). */
function sequenceNumber(text: string): Long {
  if (!/^\d{1,19}$/.test(text)) throw new ConsoleError(400, 'A sequence number is a whole number.');
  return Long.fromString(text);
}

/** A peeked body's bytes (peeked with skipParsingBodyAsJson: the producer's bytes). */
function bodyBytes(message: ServiceBusReceivedMessage): Buffer {
  const body = message.body as unknown;
  return Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body) ?? '');
}

/** A zod schema's JSON Schema, for the form; undefined for another validator (the form asks for JSON). */
function jsonSchema(schema: unknown): unknown {
  if (!(schema instanceof z.ZodType)) return undefined;
  try {
    return z.toJSONSchema(schema, { unrepresentable: 'any' });
  } catch {
    return undefined;
  }
}
