import type { ServiceBusClient, ServiceBusReceivedMessage } from '@azure/service-bus';
import { z } from 'zod';

import { bounded } from '../../cli/errors';
import type { Topology } from '../../src/topology';
import {
  type DeadLetterQueue,
  describeQueue,
  discard,
  peekDeadLetters,
  peekQueue,
  planDiscard,
  planResubmit,
  resubmit,
  type Selection,
  sequenceOf,
} from '../deadLetterQueue';
import { checkInbox, discardLines, type ListRules, planLines, reportDeadLetters } from '../deadLetterReport';
import { type EventInput, parseEvent, type SubjectRules } from '../events';
import type { Inbox } from '../inboxState';
import { sendEvent } from '../send';
import { routedSubjects, takesRetryCopies, topicFor } from '../serviceBus';
import { bodyText } from './body';
import { ConsoleError, explainRefusal } from './errors';
import type { ActionRequest, ActionResult, DeadLetterPage, PlanView, SendForm, SendResult } from './types';

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
      rows: report.rows,
      legend: report.legend,
      inboxNote: note,
      next: messages.length > DEAD_LETTERS_PER_PAGE ? sequenceOf(messages.at(-1)!) : undefined,
    };
  }

  async deadLetterBody(
    topology: Topology,
    subscription: string,
    sequence: string,
  ): Promise<{ text: string; encoding: 'utf-8' | 'base64' }> {
    const queue = this.queue(topology, subscription);
    const [message] = await this.read('the dead-letter queue', () =>
      peekQueue(queue, { deadLetter: true, max: 1, from: sequenceNumber(sequence) }),
    );
    if (message === undefined || sequenceOf(message) !== sequence)
      throw new ConsoleError(
        404,
        `No dead letter #${bounded(sequence, 20)} (it may have been resubmitted or discarded).`,
      );
    return bodyText(bodyBytes(message));
  }

  /** What the action would do, as the CLI's --dry-run says it: nothing is sent, completed or locked. */
  async plan(topology: Topology, subscription: string, request: ActionRequest): Promise<PlanView> {
    const { lines, acting } = await this.decide(topology, subscription, request, true);
    return { action: request.action, lines, acting };
  }

  /** Does it: decided again on the queue as it is now, by the same rules as the CLI. */
  async act(topology: Topology, subscription: string, request: ActionRequest): Promise<ActionResult> {
    const decided = await this.decide(topology, subscription, request, false);
    const lines = decided.lines.map((line) => line.text);
    const said = (line: string): void => void lines.push(line);
    if (decided.resubmit !== undefined) {
      const outcome = await resubmit(decided.queue, decided.resubmit, said, this.parts.now);
      const failed = outcome.failed.length + outcome.sentButNotCompleted.length + outcome.notReceived.length;
      return {
        lines,
        summary:
          `Resubmitted ${outcome.resubmitted.length}, completed as already applied ${outcome.completedAsApplied.length}, ` +
          `refused or skipped ${decided.lines.length - decided.acting}, failed ${failed}.`,
        ok: failed === 0 && decided.acting === decided.lines.length,
      };
    }
    const outcome = await discard(decided.queue, decided.discard!, said);
    const failed = outcome.failed.length + outcome.notReceived.length;
    return {
      lines,
      summary: `Discarded ${outcome.discarded.length}, refused ${decided.lines.length - decided.acting}, failed ${failed}.`,
      ok: failed === 0 && decided.acting === decided.lines.length,
    };
  }

  sendForm(): Promise<SendForm> {
    return Promise.resolve({
      subjects: [...this.parts.rules].map(([subject, rule]) => ({
        subject,
        topic: topicFor(subject),
        consumers: [...rule.schemas.keys()],
        schema: jsonSchema([...rule.schemas.values()][0]),
      })),
    });
  }

  /** Sends one event as npm run send does: the same validation, MessageId, tracing and message. */
  async send(topology: Topology, input: unknown): Promise<SendResult> {
    const value = (input ?? {}) as EventInput & { allowInvalid?: unknown };
    const event = parseEvent(
      { subject: value.subject, body: value.body, rawBody: value.rawBody, messageId: value.messageId },
      'The form',
      this.parts.rules,
      value.allowInvalid === true,
    );
    const sent = await sendEvent(this.parts.serviceBus, event, {
      repeat: 1,
      routed: (topic) => routedSubjects(topic, topology),
    });
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

  /** The plan of an action on the queue as it is now, with what it would say of each message. */
  private async decide(
    topology: Topology,
    subscription: string,
    request: ActionRequest,
    dryRun: boolean,
  ): Promise<{
    queue: DeadLetterQueue;
    lines: PlanView['lines'];
    acting: number;
    resubmit?: ReturnType<typeof planResubmit>;
    discard?: ReturnType<typeof planDiscard>;
  }> {
    const queue = this.queue(topology, subscription);
    const deadLetters = await this.read('the dead-letter queue', () => peekDeadLetters(queue));
    const selection = selectionOf(deadLetters, request.sequences);
    const gone = request.sequences
      .filter((sequence) => !deadLetters.some((message) => sequenceOf(message) === sequence))
      .map((sequence) => ({
        verdict: 'not-found',
        sequence,
        text: `not found: no dead letter #${sequence} (resubmitted or discarded meanwhile?)`,
      }));
    const asked = deadLetters.filter((message) => selection.messageIds!.includes(String(message.messageId)));
    const rules = this.listRules(topology, queue);
    const { states } = await checkInbox(asked, subscription, this.parts.inbox, rules);
    if (request.action === 'resubmit') {
      const plan = planResubmit(deadLetters, selection, {
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
      return {
        queue,
        lines: [...lines, ...gone],
        acting: plan.resubmit.length + plan.applied.length,
        resubmit: plan,
      };
    }
    const plan = planDiscard(deadLetters, selection, { inboxStates: states, force: request.force });
    return {
      queue,
      lines: [...discardLines(plan, { dryRun }).map(lineView), ...gone],
      acting: plan.discard.length,
      discard: plan,
    };
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

/** The selection the CLI's --message-id makes, for the dead letters the page chose by sequence number. */
function selectionOf(
  deadLetters: readonly ServiceBusReceivedMessage[],
  sequences: readonly string[],
): Selection {
  const ids = deadLetters
    .filter((message) => sequences.includes(sequenceOf(message)))
    .map((message) => String(message.messageId));
  return { messageIds: [...new Set(ids)] };
}

function lineView(line: { verdict: string; sequence?: string; text: string }): PlanView['lines'][number] {
  return { verdict: line.verdict, sequence: line.sequence, text: line.text };
}

function sequenceNumber(text: string): number {
  if (!/^\d{1,15}$/.test(text)) throw new ConsoleError(400, 'A sequence number is a whole number.');
  return Number(text);
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
