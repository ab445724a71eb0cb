import type { Container } from '@azure/cosmos';
import type { ServiceBusClient, ServiceBusReceivedMessage } from '@azure/service-bus';

import { MARKER_TYPE, OUTBOX_TYPE } from '#inbox/internal';

import { bounded } from '../../cli/errors';
import { functionNameOf, type Topology } from '../../src/topology';
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
import type { EventInput } from '../events';
import type { Inbox } from '../inboxState';
import { sendEvent } from '../send';
import { routedSubjects, takesRetryCopies } from '../serviceBus';
import type { Feed } from './feed';
import type { ActionRequest } from './server';
import { ConsoleError } from './server';
import type { Subjects } from './subjects';
import type {
  ActionResult,
  ConsumerView,
  DeadLetterPage,
  DocumentView,
  FeedPage,
  Overview,
  PartitionView,
  PlanView,
  SendForm,
  SendResult,
  SubscriptionView,
} from './types';

/** The console's page of documents in a partition, and how much of one document it shows. */
const DOCUMENTS_PER_PAGE = 50;
const DOCUMENT_JSON_LIMIT = 64 * 1024;
const RECENT_PARTITIONS = 20;
const DEAD_LETTERS_PER_PAGE = 50;

/** A subscription's counts, by `<topic>/<subscription>`. */
export type Counts = ReadonlyMap<string, NonNullable<SubscriptionView['counts']>>;

/** Where the console reads and acts: npm start's local stack, or a deployment. */
export interface BackendParts {
  /** What the page says it looks at. */
  target: string;
  /** Whether the page may resubmit, discard and send; and what to say when it may not. */
  actions: boolean;
  readOnlyReason: string;
  /** Where the inbox and the business documents are (connectInbox), or why it is not connected. */
  inbox: Inbox | string;
  serviceBus: ServiceBusClient;
  /** The broker's duplicate detection window, and the margin for clock skew, as the dead-letter tool takes them. */
  duplicateWindowSeconds: number;
  clockSkewSeconds: number;
  /** The send form's subjects and validation, loaded on first use. */
  subjects: () => Promise<Subjects>;
  now: () => number;
  /** The topics and subscriptions the broker serves now. */
  topology: () => Topology;
  /** The message counts of every subscription (an error names what is missing). */
  counts: () => Promise<Counts>;
  /** The function names the app registers (a consumer's is functionNameOf(consumer)). */
  functions: () => readonly string[];
  /** The app's other functions: its timers with their next runs, its change-feed relay. */
  others: () => Overview['others'];
  /** When the inbox purge timer runs next, when known. */
  nextPurge: () => Date | undefined;
  /** The live feed: npm start's; a deployment's events are in Application Insights. */
  feed: Feed | undefined;
  /** Turns a refused read into what to do about it (the missing role); undefined for other errors. */
  explain: (error: unknown, what: string) => string | undefined;
}

/** What the console serves, over the parts of its target. */
export class ConsoleBackend {
  readonly actions: boolean;
  readonly readOnlyReason: string;

  constructor(private readonly parts: BackendParts) {
    this.actions = parts.actions;
    this.readOnlyReason = parts.readOnlyReason;
  }

  async overview(): Promise<Overview> {
    const problems: string[] = [];
    let counts: Counts | undefined;
    try {
      counts = await this.parts.counts();
    } catch (error) {
      problems.push(this.problem(error, 'the message counts'));
    }
    const registered = new Set(this.parts.functions());
    return {
      target: this.parts.target,
      actions: this.parts.actions,
      topics: this.parts.topology().topics.map((topic) => ({
        name: topic.name,
        publishers: [...(topic.publishers ?? [])],
        unsubscribedSubjects: [...(topic.unsubscribedSubjects ?? [])],
        subscriptions: topic.subscriptions.map((subscription) => {
          const name = functionNameOf(subscription.name);
          return {
            name: subscription.name,
            topic: topic.name,
            subjects: [...subscription.subjects],
            function: registered.has(name) ? name : undefined,
            delayedRetry: subscription.delayedRetry,
            counts: counts?.get(`${topic.name}/${subscription.name}`),
          };
        }),
      })),
      others: this.parts.others(),
      problems,
    };
  }

  feed(after: number, waitMs: number, signal: AbortSignal): Promise<FeedPage> {
    if (this.parts.feed === undefined) return Promise.resolve({ events: [], last: after });
    return this.parts.feed.page(after, 200, waitMs, signal);
  }

  /** A feed event's body, as text when it is UTF-8, else base64. */
  feedBody(seq: number): Promise<{ text: string; encoding: 'utf-8' | 'base64' }> {
    const body = this.parts.feed?.body(seq);
    if (body === undefined) {
      throw new ConsoleError(
        404,
        'The console no longer keeps this body (it keeps the last 200, up to 64 KB each).',
      );
    }
    return Promise.resolve(bodyText(body));
  }

  async consumer(name: string): Promise<ConsumerView> {
    const consumer = this.knownConsumer(name);
    const container = this.container();
    const problems: string[] = [];
    const read = async <T>(what: string, query: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await query();
      } catch (error) {
        problems.push(this.problem(error, what));
        return undefined;
      }
    };
    const values = async <T>(query: string, parameters: { name: string; value: string | number }[]) =>
      (await container.items.query<T>({ query, parameters }).fetchAll()).resources;
    const byConsumer = [
      { name: '@consumer', value: consumer },
      { name: '@marker', value: MARKER_TYPE },
      { name: '@outbox', value: OUTBOX_TYPE },
    ];
    const inbox = await read('its inbox', async () => {
      const [markers] = await values<number>(
        'SELECT VALUE COUNT(1) FROM c WHERE c.type = @marker AND c.consumer = @consumer',
        byConsumer.slice(0, 2),
      );
      const [oldest] = await values<number>(
        'SELECT VALUE MIN(c.processedAtEpochSeconds) FROM c WHERE c.type = @marker AND c.consumer = @consumer',
        byConsumer.slice(0, 2),
      );
      return { markers: markers ?? 0, oldestProcessedAt: epochText(oldest) };
    });
    const outbox = await read('its outbox', async () => {
      const parameters = [byConsumer[0]!, byConsumer[2]!];
      const pending =
        'c.type = @outbox AND c.consumer = @consumer AND IS_DEFINED(c.pendingSinceEpochSeconds)';
      const [count] = await values<number>(`SELECT VALUE COUNT(1) FROM c WHERE ${pending}`, parameters);
      const [oldest] = await values<number>(
        `SELECT VALUE MIN(c.pendingSinceEpochSeconds) FROM c WHERE ${pending}`,
        parameters,
      );
      return { pending: count ?? 0, oldestPendingSince: epochText(oldest) };
    });
    const recent =
      (await read('the partitions it wrote', () =>
        values<{ partitionKey: unknown; messageId: unknown; processedAt: unknown }>(
          `SELECT TOP ${RECENT_PARTITIONS} c.partitionKey, c.messageId, c.processedAt FROM c ` +
            'WHERE c.type = @marker AND c.consumer = @consumer ORDER BY c.processedAtEpochSeconds DESC',
          byConsumer.slice(0, 2),
        ),
      )) ?? [];
    return {
      consumer,
      inbox,
      nextPurge: this.parts.nextPurge()?.toISOString(),
      outbox,
      recentPartitions: recent.map((marker) => ({
        partitionKey: String(marker.partitionKey),
        messageId: bounded(String(marker.messageId), 128),
        processedAt: String(marker.processedAt),
      })),
      problems,
    };
  }

  /** A page of the documents in one logical partition: business state, inbox markers and outbox. */
  async partition(partitionKey: string, continuation: string | undefined): Promise<PartitionView> {
    checkPartitionKey(partitionKey);
    if (continuation !== undefined && continuation.length > 4096)
      throw new ConsoleError(400, 'continuation is too long.');
    try {
      const page = await this.container()
        .items.query<{ id: string; type?: unknown; _ts?: number }>(
          { query: 'SELECT c.id, c.type, c._ts FROM c' },
          {
            partitionKey,
            maxItemCount: DOCUMENTS_PER_PAGE,
            ...(continuation === undefined ? {} : { continuationToken: continuation }),
          },
        )
        .fetchNext();
      return {
        partitionKey,
        documents: page.resources.map((document) => ({
          id: document.id,
          type: typeof document.type === 'string' ? bounded(document.type, 60) : undefined,
          ts: document._ts,
        })),
        continuation: page.continuationToken ?? undefined,
      };
    } catch (error) {
      throw new ConsoleError(502, this.problem(error, 'the partition'));
    }
  }

  async document(partitionKey: string, id: string): Promise<DocumentView> {
    checkPartitionKey(partitionKey);
    if (id.length === 0 || id.length > 255)
      throw new ConsoleError(400, 'A document id has 1 to 255 characters.');
    let resource: unknown;
    try {
      ({ resource } = await this.container().item(id, partitionKey).read());
    } catch (error) {
      throw new ConsoleError(502, this.problem(error, 'the document'));
    }
    if (resource === undefined)
      throw new ConsoleError(404, 'No such document (it may have been deleted or purged).');
    const json = JSON.stringify(resource, null, 2);
    return {
      partitionKey,
      id,
      json: json.length > DOCUMENT_JSON_LIMIT ? json.slice(0, DOCUMENT_JSON_LIMIT) : json,
      truncated: json.length > DOCUMENT_JSON_LIMIT,
    };
  }

  /** A page of a subscription's dead-letter queue, from a sequence number, with list's verdicts. */
  async deadLetters(subscription: string, from: string | undefined): Promise<DeadLetterPage> {
    const queue = this.queue(subscription);
    const start = from === undefined ? undefined : sequenceNumber(from);
    const messages = await this.read('the dead-letter queue', () =>
      peekQueue(queue, { deadLetter: true, max: DEAD_LETTERS_PER_PAGE + 1, from: start }),
    );
    const page = messages.slice(0, DEAD_LETTERS_PER_PAGE);
    const rules = this.listRules(queue);
    const { note, states } = await checkInbox(page, subscription, this.inboxOrReason(), rules);
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
    subscription: string,
    sequence: string,
  ): Promise<{ text: string; encoding: 'utf-8' | 'base64' }> {
    const queue = this.queue(subscription);
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
  async plan(subscription: string, request: ActionRequest): Promise<PlanView> {
    const { lines, acting } = await this.decide(subscription, request, true);
    return { action: request.action, lines, acting };
  }

  /** Does it: decided again on the queue as it is now, by the same rules as the CLI. */
  async act(subscription: string, request: ActionRequest): Promise<ActionResult> {
    const decided = await this.decide(subscription, request, false);
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

  async sendForm(): Promise<SendForm> {
    return { subjects: (await this.parts.subjects()).subjects };
  }

  /** Sends one event as npm run send does: the same validation, MessageId, tracing and message. */
  async send(input: unknown): Promise<SendResult> {
    const value = (input ?? {}) as EventInput & { allowInvalid?: unknown };
    const subjects = await this.parts.subjects();
    const event = await subjects.parse({
      subject: value.subject,
      body: value.body,
      rawBody: value.rawBody,
      messageId: value.messageId,
      allowInvalid: value.allowInvalid === true,
    });
    const topology = this.parts.topology();
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
    const queue = this.queue(subscription);
    const deadLetters = await this.read('the dead-letter queue', () => peekDeadLetters(queue));
    const selection = selectionOf(deadLetters, request.sequences);
    const asked = deadLetters.filter((message) => selection.messageIds!.includes(String(message.messageId)));
    const rules = this.listRules(queue);
    const { states } = await checkInbox(asked, subscription, this.inboxOrReason(), rules);
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
      return { queue, lines, acting: plan.resubmit.length + plan.applied.length, resubmit: plan };
    }
    const plan = planDiscard(deadLetters, selection, { inboxStates: states, force: request.force });
    return {
      queue,
      lines: discardLines(plan, { dryRun }).map(lineView),
      acting: plan.discard.length,
      discard: plan,
    };
  }

  private listRules(queue: DeadLetterQueue): Omit<ListRules, 'inboxStates'> {
    const topology = this.parts.topology();
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
  private queue(subscription: string): DeadLetterQueue {
    const topic = this.parts
      .topology()
      .topics.find((candidate) => candidate.subscriptions.some((s) => s.name === subscription));
    if (topic === undefined)
      throw new ConsoleError(404, `No subscription is named '${bounded(subscription, 60)}'.`);
    return { client: this.parts.serviceBus, topic: topic.name, subscription };
  }

  private async read<T>(what: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      throw new ConsoleError(502, this.problem(error, what));
    }
  }

  private inboxOrReason(): Inbox | string {
    return this.parts.inbox;
  }

  private container(): Container {
    if (typeof this.parts.inbox === 'string')
      throw new ConsoleError(503, `Cosmos DB is not connected: ${this.parts.inbox}.`);
    return this.parts.inbox.container;
  }

  close(): void {
    this.parts.feed?.close();
  }

  /** A consumer the topology declares, by name: nothing else is queried. */
  private knownConsumer(name: string): string {
    const known = this.parts.topology().topics.flatMap((topic) => topic.subscriptions.map((s) => s.name));
    if (!known.includes(name)) throw new ConsoleError(404, `No consumer is named '${bounded(name, 60)}'.`);
    return name;
  }

  private problem(error: unknown, what: string): string {
    return (
      this.parts.explain(error, what) ??
      `Could not read ${what}: ${bounded(error instanceof Error ? error.message : String(error), 200)}`
    );
  }
}

function checkPartitionKey(partitionKey: string): void {
  if (partitionKey.length === 0 || Buffer.byteLength(partitionKey) > 2048)
    throw new ConsoleError(400, 'A partition key has 1 to 2048 bytes.');
}

function epochText(seconds: number | undefined): string | undefined {
  return typeof seconds === 'number' ? new Date(seconds * 1000).toISOString() : undefined;
}

/** UTF-8 text when the bytes are, else base64. */
export function bodyText(body: Buffer): { text: string; encoding: 'utf-8' | 'base64' } {
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(body), encoding: 'utf-8' };
  } catch {
    return { text: body.toString('base64'), encoding: 'base64' };
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
