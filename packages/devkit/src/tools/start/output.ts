import { createHash } from 'node:crypto';

import {
  type BrokerMessage,
  type ChangeFeedInvocation,
  type LogLine,
  type OutgoingMessage,
  type TimerRunReport,
  type TriggerDelivery,
} from '@idempotent-consumers/local-azure';

import { bounded } from '../../cli/errors';

/**
 * What `npm start` prints while it runs: one line per delivery, per message the broker drops or
 * dead-letters on its own, per timer run, and the totals once things go quiet. Untrusted values
 * (MessageIds, error messages that may quote them) are bounded; bodies never appear.
 */
export const OUTCOME_COLUMNS = ['processed', 'duplicate', 'poison', 'retried'] as const;

export interface Totals {
  deliveries: number;
  /** By the outcome the consumer logged. */
  outcomes: Record<string, number>;
  droppedAsDuplicate: number;
  /** Sent to a topic none of whose subscriptions takes its Subject: accepted, then dropped. */
  matchedNoSubscription: number;
  deadLettered: number;
  timerRuns: number;
}

export interface LiveOutputOptions {
  /** Quiet time before the totals line; default 1,500 ms. */
  quietMs?: number;
  /** Whether the topic declares the subject unsubscribed: published on purpose with no subscription here. */
  unsubscribed?: (topic: string, subject: string) => boolean;
  /** Whether watch mode is on: a new consumer's subscription then loads when its files are saved. */
  watching?: boolean;
}

export class LiveOutput {
  readonly totals: Totals = {
    deliveries: 0,
    outcomes: {},
    droppedAsDuplicate: 0,
    matchedNoSubscription: 0,
    deadLettered: 0,
    timerRuns: 0,
  };
  private quietTimer: NodeJS.Timeout | undefined;
  private lastTotals: string | undefined;

  private readonly quietMs: number;
  private readonly unsubscribed: (topic: string, subject: string) => boolean;
  private readonly watching: boolean;

  constructor(
    private readonly write: (line: string) => void,
    /** Counts what a totals line adds (the inbox size, the queues); called once things go quiet. */
    private readonly census: () => Promise<string>,
    private readonly duplicateWindow: string,
    options: LiveOutputOptions = {},
  ) {
    this.quietMs = options.quietMs ?? 1500;
    this.unsubscribed = options.unsubscribed ?? (() => false);
    this.watching = options.watching ?? false;
  }

  delivery(d: TriggerDelivery): void {
    this.totals.deliveries++;
    const outcome = d.outcome ?? (d.error === undefined ? 'no outcome logged' : 'failed');
    this.totals.outcomes[outcome] = (this.totals.outcomes[outcome] ?? 0) + 1;
    const error = d.error === undefined ? '' : ` (${bounded(`${d.error.name}: ${d.error.message}`, 160)})`;
    // A duplicate's cause (packages/inbox/src/duplicateCause.ts) or the alternative a handler recorded.
    const detail = d.cause ?? d.alternative;
    // The trace id is the delivery's operation_Id in Application Insights (docs/monitor.md, "Follow an event").
    const traced = d.traceId === undefined ? '' : ` trace=${d.traceId}`;
    this.line(
      `${d.function} #${d.sequenceNumber} delivery ${d.deliveryCount} messageId=${id(d.messageId)}${traced}: ` +
        `${outcome}${detail === undefined ? '' : ` (${bounded(detail, 100)})`}${error} → ${d.settlement} in ${Math.round(d.handlerMs)} ms` +
        wrote(d.logs ?? []),
    );
  }

  droppedAsDuplicate(topic: string, message: OutgoingMessage): void {
    this.totals.droppedAsDuplicate++;
    this.line(
      `${topic}: duplicate detection dropped messageId=${id(message.messageId)} ` +
        `(the same MessageId was sent within ${this.duplicateWindow}; the sender was told it succeeded)`,
    );
  }

  matchedNoSubscription(topic: string, message: OutgoingMessage): void {
    this.totals.matchedNoSubscription++;
    const subject = message.subject === undefined ? 'no subject' : `subject ${bounded(message.subject, 100)}`;
    const why =
      message.subject !== undefined && this.unsubscribed(topic, message.subject)
        ? `, on purpose: ${bounded(message.subject, 100)} is among the unsubscribedSubjects of ${topic} (src/topology.json).`
        : this.watching
          ? '. A new consumer? Its subscription loads once its function file and src/topology.json are saved (watch mode).'
          : '. A new consumer in src/topology.json? Restart npm start (or run it with --watch) to load its subscription.';
    this.line(
      `${topic}: no subscription takes messageId=${id(message.messageId)} (${subject}); Service Bus accepted ` +
        `it and dropped it${why}`,
    );
  }

  deadLettered(path: string, message: BrokerMessage): void {
    this.totals.deadLettered++;
    this.line(
      `${path}: dead-lettered #${message.sequenceNumber} messageId=${id(message.messageId)} ` +
        `(${bounded(message.deadLetter?.reason ?? 'no reason', 60)}; body ${bodySummary(message.body)})`,
    );
  }

  /** A timer's run, printed when it failed, warned, or purged or sent something: idle runs stay quiet. */
  timerRun({ function: name, result, runMs }: TimerRunReport): void {
    this.totals.timerRuns++;
    if (!result.error && !result.logs.some((line) => line.category === 'user' && didSomething(line))) return;
    const last = result.logs.at(-1)?.text;
    const said = result.error
      ? `failed (${bounded(`${result.error.name}: ${result.error.message}`, 160)})`
      : `ran${last === undefined ? '' : `: ${bounded(last, 200)}`}`;
    this.line(`${name} (timer) ${said} in ${Math.round(runMs)} ms`);
  }

  /** A page of changes the relay (a Cosmos DB trigger) was given: printed when it sent or failed. */
  changeFeedPage(page: ChangeFeedInvocation, logs: readonly LogLine[]): void {
    const said = logs.filter((line) => line.category !== 'system').at(-1)?.text;
    if (page.outcome === 'succeeded' && said === undefined) return;
    this.line(
      `${page.function} (change feed, ${page.ids.length} changes, ${page.attempts} attempt${page.attempts === 1 ? '' : 's'}) ` +
        `${page.outcome}${said === undefined ? '' : `: ${bounded(said, 200)}`}`,
    );
  }

  line(text: string): void {
    this.note(text);
    this.scheduleTotals();
  }

  /** A line about npm start itself (watch mode's), which changes no total. */
  note(text: string): void {
    this.write(`${clockTime()} ${text}`);
  }

  /** The totals line, printed now: on Ctrl+C always, once things go quiet only when it changed. */
  async printTotals({ always = true }: { always?: boolean } = {}): Promise<void> {
    clearTimeout(this.quietTimer);
    this.quietTimer = undefined;
    const line = await this.totalsLine();
    if (!always && line === this.lastTotals) return;
    this.lastTotals = line;
    this.write(`${clockTime()} ${line}`);
  }

  stop(): void {
    clearTimeout(this.quietTimer);
  }

  private scheduleTotals(): void {
    clearTimeout(this.quietTimer);
    this.quietTimer = setTimeout(
      () => void this.printTotals({ always: false }).catch(() => undefined),
      this.quietMs,
    );
  }

  private async totalsLine(): Promise<string> {
    const { outcomes } = this.totals;
    const others = Object.entries(outcomes)
      .filter(([outcome]) => !(OUTCOME_COLUMNS as readonly string[]).includes(outcome))
      .map(([outcome, count]) => `${outcome} ${count}`);
    const counted = [
      ...OUTCOME_COLUMNS.map((outcome) => `${outcome} ${outcomes[outcome] ?? 0}`),
      ...others,
      `dead-lettered ${this.totals.deadLettered}`,
      `dropped as duplicates by Service Bus ${this.totals.droppedAsDuplicate}`,
      ...(this.totals.matchedNoSubscription > 0
        ? [`taken by no subscription ${this.totals.matchedNoSubscription}`]
        : []),
    ];
    return `totals: ${this.totals.deliveries} deliveries: ${counted.join(', ')} | ${await this.census()}`;
  }
}

/** The business documents a delivery wrote, as its debug line (`Wrote {...}`) names them. */
export interface Wrote {
  partitionKey: string;
  documents: string[];
  count: number;
}

/**
 * Which business documents a delivery changed, from its debug line (`Wrote {...}`, which Azure
 * keeps out of Application Insights), bounded: the partition key and the first documents' names.
 */
export function wroteOf(logs: readonly LogLine[]): Wrote | undefined {
  const line = logs.find((entry) => entry.level === 'debug' && entry.text.startsWith('Wrote {'));
  if (line === undefined) return undefined;
  try {
    const { partitionKey, documents, count } = JSON.parse(line.text.slice('Wrote '.length)) as Wrote;
    if (typeof partitionKey !== 'string' || !Array.isArray(documents)) return undefined;
    return {
      partitionKey: bounded(partitionKey, 256),
      documents: documents.slice(0, 20).map((document) => bounded(String(document), 100)),
      count: Number(count) || documents.length,
    };
  } catch {
    return undefined;
  }
}

/** `; wrote <partition>: create balance, patch invoice-1`, or nothing. */
function wrote(logs: readonly LogLine[]): string {
  const written = wroteOf(logs);
  if (written === undefined) return '';
  const { partitionKey, documents, count } = written;
  const more = count > documents.length ? `, and ${count - documents.length} more` : '';
  return `; wrote ${bounded(partitionKey, 64)}: ${bounded(documents.join(', '), 200)}${more}`;
}

/** A timer's log line that reports work: a warning or an error, or a purge or a send of at least one. */
function didSomething(line: LogLine): boolean {
  if (line.level === 'warning' || line.level === 'error') return true;
  const json = /\{.*\}$/.exec(line.text)?.[0];
  if (json === undefined) return false;
  try {
    const fields = JSON.parse(json) as { purged?: unknown; sent?: unknown };
    return Number(fields.purged ?? 0) > 0 || Number(fields.sent ?? 0) > 0;
  } catch {
    return true;
  }
}

/** A body as logs may show it: its length and a hash, never its content. */
export function bodySummary(body: string | Buffer): string {
  const { bytes, sha256 } = bodyDigest(body);
  return `${bytes} bytes, sha256 ${sha256}`;
}

/** A body's length in bytes and the first 12 hex digits of its SHA-256: enough to tell bodies apart. */
export function bodyDigest(body: string | Buffer): { bytes: number; sha256: string } {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return { bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex').slice(0, 12) };
}

function id(messageId: string | undefined): string {
  return messageId === undefined ? '(none)' : bounded(messageId, 64);
}

function clockTime(): string {
  return new Date().toISOString().slice(11, 19);
}
