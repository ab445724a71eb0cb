import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';

import { bindingOf, type Consumer } from '@idempotent-consumers/inbox/internal';

import { bounded, UsageError } from '../cli/errors';
import { appTopology, PROJECT_ROOT } from '../cli/project';
import { loadConsumers } from './consumers';

/**
 * The events the send tool publishes: any Subject a consumer of the app reads, its body validated
 * with the schema of each consumer that reads it (found in the app as loaded through the worker
 * path), with a MessageId derived from the event, never random: sending the same event twice yields
 * the same MessageId, which is what lets broker duplicate detection and the consumers' inbox drop
 * the second copy. The sample's events (sample/src/events.ts) add their own MessageId rule and the
 * `payment`, `order` and `status` shortcuts.
 */
export interface OutgoingEvent {
  subject: string;
  /** A JSON value, sent as JSON; or the bytes of a raw body (`--raw-body`, `"rawBody"`), sent as they are. */
  body: unknown;
  messageId: string;
  /** Whether the MessageId was given (`--message-id`, `"messageId"`) rather than derived from the event. */
  messageIdGiven: boolean;
  /** What each consumer that reads the Subject makes of the body. */
  consumers: ConsumerVerdict[];
  /**
   * Why its consumers will refuse it, when it was sent anyway (`--allow-invalid`): a message the
   * user made poison on purpose, to watch the dead-letter queue act.
   */
  poison?: string;
}

/** One consumer's verdict on a body: `refusal` says why it refuses it (bounded); none, it accepts it. */
export interface ConsumerVerdict {
  consumer: string;
  refusal?: string;
}

/** What the send tool knows of a subject: the schemas of its consumers, and a MessageId rule. */
export interface SubjectRules {
  /** Consumer name → its schema. */
  schemas: Map<string, Consumer['schema']>;
  /** The sample's rule; otherwise the MessageId is derived from the body's content. */
  messageId?: (body: never) => string;
}

/** A shortcut of the send tool (`npm run send -- payment ...`): one kind of sample event. */
export interface EventShortcut {
  subject: string;
  messageId: (body: never) => string;
  flags: Record<string, { field: string; type: 'string' | 'number' }>;
}

/** Service Bus refuses longer MessageIds. */
const MAX_MESSAGE_ID_LENGTH = 128;

const SAMPLE_CATALOGUE = path.join(PROJECT_ROOT, 'sample', 'src', 'events.ts');

/**
 * The sample's events, while the sample is in the project (`npm run remove:samples` deletes it,
 * and the send tool then publishes any subject with --subject and --body).
 */
export function sampleShortcuts(): Record<string, EventShortcut> {
  if (!existsSync(SAMPLE_CATALOGUE)) return {};
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- only while the sample exists
  return (require(SAMPLE_CATALOGUE) as { SAMPLE_EVENTS: Record<string, EventShortcut> }).SAMPLE_EVENTS;
}

/**
 * Every subject a consumer of the app reads, with its consumers' schemas and its MessageId rule.
 * When the app's function files do not load (one that does not compile), the subjects come from
 * src/topology.json alone and bodies go unchecked; `warn` is told why, so that a broken file does
 * not stop a send.
 */
export async function loadSubjectRules({
  warn = () => undefined,
  load = () => loadConsumers({ definitionsOnly: true }),
}: {
  warn?: (text: string) => void;
  load?: () => Promise<ReadonlyMap<string, Consumer>>;
} = {}): Promise<Map<string, SubjectRules>> {
  const rules = new Map<string, SubjectRules>();
  let consumers: ReadonlyMap<string, Consumer> | undefined;
  try {
    consumers = await load();
  } catch (error) {
    warn(
      `The app's function files did not load (${bounded(error instanceof Error ? error.message : String(error), 200)}): ` +
        "src/topology.json's subjects are used alone, and bodies are not checked against the consumers' schemas.",
    );
  }
  const topology = appTopology();
  const subscriptions =
    consumers === undefined
      ? topology.topics.flatMap((topic) => topic.subscriptions.map(({ name }) => [name, undefined] as const))
      : [...consumers].map(([name, consumer]) => [name, consumer.schema] as const);
  for (const [name, schema] of subscriptions) {
    for (const subject of bindingOf(name, topology).subjects) {
      const entry = rules.get(subject) ?? { schemas: new Map() };
      if (schema !== undefined) entry.schemas.set(name, schema);
      rules.set(subject, entry);
    }
  }
  for (const shortcut of Object.values(sampleShortcuts())) {
    const entry = rules.get(shortcut.subject);
    if (entry) entry.messageId = shortcut.messageId;
  }
  return rules;
}

/**
 * The MessageId of an event without a rule of its own: the subject and a SHA-256 of the validated
 * body, so the same event always gets the same one.
 */
export function contentMessageId(subject: string, body: unknown): string {
  return `${subject.slice(0, 50)}-${createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 40)}`;
}

/** What one event may say; `body` and `rawBody` exclude each other. */
export interface EventInput {
  subject: unknown;
  body?: unknown;
  /** Text sent as its UTF-8 bytes, unparsed: the way to send a body that is not JSON. */
  rawBody?: unknown;
  messageId?: unknown;
}

/**
 * Validates one event: `subject` says which schemas apply; `messageId` defaults to the event's own.
 * `where` names the input in errors (a flag set, `events.jsonl:3`). An event its consumers would
 * refuse is a usage error, unless `allowInvalid`: then it is returned with the reason as `poison`,
 * and its MessageId (unless given) is derived from its content.
 */
export function parseEvent(
  input: EventInput,
  where: string,
  rules: ReadonlyMap<string, SubjectRules>,
  allowInvalid = false,
): OutgoingEvent {
  const subject = input.subject;
  const rule = typeof subject === 'string' ? rules.get(subject) : undefined;
  if (typeof subject !== 'string' || rule === undefined) {
    const shown = JSON.stringify(typeof subject === 'string' ? subject.slice(0, 60) : subject) ?? 'nothing';
    throw new UsageError(
      `${where}: subject must be one a consumer reads (${[...rules.keys()].join(', ') || 'none'}); got ${shown.slice(0, 80)}.`,
    );
  }
  const content = contentOf(input, where);
  const { refusals, accepted } = validated(rule, content);
  const [refusal] = refusals;
  if (refusal !== undefined && !allowInvalid) {
    const { consumer, problems } = refusal;
    throw new UsageError(
      `${where}: invalid event${rule.schemas.size > 1 && !content.notJson ? ` for ${consumer}` : ''}:\n  - ${problems.join('\n  - ')}\n` +
        '(--allow-invalid sends it anyway, as a poison message.)',
    );
  }
  // What the user wrote, as written: the schemas only check it (and the sample's rule names it).
  const body = content.raw ?? content.json;
  const consumers = [...rule.schemas.keys()].map((consumer): ConsumerVerdict => {
    const refused = refusals.find((r) => r.consumer === consumer);
    return refused === undefined ? { consumer } : { consumer, refusal: problemsText(refused) };
  });
  const poison = refusal === undefined ? {} : { poison: problemsText(refusal) };
  if (input.messageId === undefined) {
    // A rule reads a body its schemas accepted; an unchecked one (no schema loaded) is named by its content.
    const messageId =
      refusal === undefined && rule.schemas.size > 0
        ? (rule.messageId?.(accepted as never) ?? contentMessageId(subject, accepted))
        : contentMessageId(subject, content.raw?.toString('utf8') ?? content.json);
    return { subject, body, messageId, messageIdGiven: false, consumers, ...poison };
  }
  if (
    typeof input.messageId !== 'string' ||
    input.messageId.length === 0 ||
    input.messageId.length > MAX_MESSAGE_ID_LENGTH
  ) {
    throw new UsageError(`${where}: messageId must be a string of 1 to ${MAX_MESSAGE_ID_LENGTH} characters.`);
  }
  return { subject, body, messageId: input.messageId, messageIdGiven: true, consumers, ...poison };
}

function problemsText(refusal: Refusal): string {
  return bounded(refusal.problems.join('; '), 160);
}

/** The body to validate (a raw body parsed, when it is JSON), and the raw bytes to send. */
interface Content {
  json: unknown;
  /** A raw body: these bytes are sent. */
  raw?: Buffer;
  /** A raw body that does not parse as JSON. */
  notJson?: true;
}

function contentOf(input: EventInput, where: string): Content {
  if ((input.body === undefined) === (input.rawBody === undefined)) {
    throw new UsageError(`${where}: give a body or a rawBody (one of them).`);
  }
  if (input.rawBody === undefined) return { json: input.body };
  if (typeof input.rawBody !== 'string') throw new UsageError(`${where}: rawBody must be a string.`);
  const raw = Buffer.from(input.rawBody, 'utf8');
  try {
    return { json: JSON.parse(input.rawBody) as unknown, raw };
  } catch {
    return { json: undefined, raw, notJson: true };
  }
}

/**
 * A JSON Lines file: one `{ "subject": ..., "body": {...} | "rawBody": "...", "messageId"?: ... }` per
 * line; blank lines are skipped. `allowInvalid` as for parseEvent.
 */
export function parseEventLines(
  text: string,
  source: string,
  rules: ReadonlyMap<string, SubjectRules>,
  allowInvalid = false,
): OutgoingEvent[] {
  const events: OutgoingEvent[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((line, index) => {
    if (line.trim() === '') return;
    const where = `${source}:${index + 1}`;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (error) {
      throw new UsageError(`${where}: not JSON (${(error as Error).message}).`, { cause: error });
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new UsageError(
        `${where}: expected an object { "subject": ..., "body": {...} or "rawBody": "...", "messageId"?: ... }.`,
      );
    }
    const fields = parsed as Record<string, unknown>;
    const unknownKeys = Object.keys(fields).filter(
      (key) => !['subject', 'body', 'rawBody', 'messageId'].includes(key),
    );
    if (unknownKeys.length > 0)
      throw new UsageError(`${where}: unexpected field(s) ${unknownKeys.join(', ').slice(0, 200)}.`);
    const { subject, body, rawBody, messageId } = fields;
    events.push(parseEvent({ subject, body, rawBody, messageId }, where, rules, allowInvalid));
  });
  if (events.length === 0) throw new UsageError(`${source} has no events.`);
  return events;
}

interface Refusal {
  consumer: string;
  problems: string[];
}

/**
 * Why each consumer of the subject refuses the body (a raw body that is not JSON: every one, as the
 * inbox does), and the body as the first one reads it (what a MessageId rule names) when none does.
 */
function validated(rule: SubjectRules, content: Content): { refusals: Refusal[]; accepted?: unknown } {
  const consumers = [...rule.schemas.keys()];
  if (content.notJson)
    return { refusals: consumers.map((consumer) => ({ consumer, problems: ['body: not JSON'] })) };
  const refusals: Refusal[] = [];
  let accepted: unknown;
  for (const [consumer, schema] of rule.schemas) {
    const result = schema.safeParse(content.json);
    if (result.success) {
      accepted ??= result.data;
      continue;
    }
    refusals.push({
      consumer,
      problems: result.error.issues.map(
        (issue) => `${issue.path.map(String).join('.') || 'body'}: ${issue.message}`,
      ),
    });
  }
  return { refusals, accepted };
}
