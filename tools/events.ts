import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';

import type { Consumer } from '../src/inbox/internal';
import { loadConsumers } from './consumers';
import { UsageError } from './errors';

/**
 * The events the send tool publishes: any Subject a consumer of the app reads, its body validated
 * with the schema of each consumer that reads it (found in the app as loaded through the worker
 * path), with a MessageId derived from the event, never random: sending the same event twice yields
 * the same MessageId, which is what lets broker duplicate detection and the consumers' inbox drop
 * the second copy. The sample's events (src/sample/events.ts) add their own MessageId rule and the
 * `payment`, `order` and `status` shortcuts.
 */
export interface OutgoingEvent {
  subject: string;
  body: unknown;
  messageId: string;
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

const SAMPLE_CATALOGUE = path.join(__dirname, '..', 'src', 'sample', 'events.ts');

/**
 * The sample's events, while the sample is in the project (`npm run remove:samples` deletes it,
 * and the send tool then publishes any subject with --subject and --body).
 */
export function sampleShortcuts(): Record<string, EventShortcut> {
  if (!existsSync(SAMPLE_CATALOGUE)) return {};
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- only while the sample exists
  return (require(SAMPLE_CATALOGUE) as { SAMPLE_EVENTS: Record<string, EventShortcut> }).SAMPLE_EVENTS;
}

/** Every subject a consumer of the app reads, with its consumers' schemas and its MessageId rule. */
export async function loadSubjectRules(): Promise<Map<string, SubjectRules>> {
  const rules = new Map<string, SubjectRules>();
  for (const consumer of (await loadConsumers({ definitionsOnly: true })).values()) {
    for (const subject of consumer.subjects) {
      const entry = rules.get(subject) ?? { schemas: new Map() };
      entry.schemas.set(consumer.name, consumer.schema);
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

/**
 * Validates one event: `subject` says which schemas apply; `messageId` defaults to the event's own.
 * `where` names the input in errors (a flag set, `events.jsonl:3`).
 */
export function parseEvent(
  input: { subject: unknown; body: unknown; messageId?: unknown },
  where: string,
  rules: ReadonlyMap<string, SubjectRules>,
): OutgoingEvent {
  const subject = input.subject;
  const rule = typeof subject === 'string' ? rules.get(subject) : undefined;
  if (typeof subject !== 'string' || rule === undefined) {
    const shown = JSON.stringify(typeof subject === 'string' ? subject.slice(0, 60) : subject) ?? 'nothing';
    throw new UsageError(
      `${where}: subject must be one a consumer reads (${[...rules.keys()].join(', ') || 'none'}); got ${shown.slice(0, 80)}.`,
    );
  }
  const body = validated(rule, input.body, where);
  if (input.messageId === undefined) {
    const messageId = rule.messageId ? rule.messageId(body as never) : contentMessageId(subject, body);
    return { subject, body, messageId };
  }
  if (
    typeof input.messageId !== 'string' ||
    input.messageId.length === 0 ||
    input.messageId.length > MAX_MESSAGE_ID_LENGTH
  ) {
    throw new UsageError(`${where}: messageId must be a string of 1 to ${MAX_MESSAGE_ID_LENGTH} characters.`);
  }
  return { subject, body, messageId: input.messageId };
}

/** A JSON Lines file: one `{ "subject": ..., "body": {...}, "messageId"?: ... }` per line; blank lines are skipped. */
export function parseEventLines(
  text: string,
  source: string,
  rules: ReadonlyMap<string, SubjectRules>,
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
        `${where}: expected an object { "subject": ..., "body": {...}, "messageId"?: ... }.`,
      );
    }
    const fields = parsed as Record<string, unknown>;
    const unknownKeys = Object.keys(fields).filter((key) => !['subject', 'body', 'messageId'].includes(key));
    if (unknownKeys.length > 0)
      throw new UsageError(`${where}: unexpected field(s) ${unknownKeys.join(', ').slice(0, 200)}.`);
    events.push(
      parseEvent({ subject: fields.subject, body: fields.body, messageId: fields.messageId }, where, rules),
    );
  });
  if (events.length === 0) throw new UsageError(`${source} has no events.`);
  return events;
}

/** The body as every consumer of the subject reads it (the first one's parse is what is sent). */
function validated(rule: SubjectRules, body: unknown, where: string): unknown {
  let accepted: unknown;
  for (const [consumer, schema] of rule.schemas) {
    const result = schema.safeParse(body);
    if (!result.success) {
      const problems = result.error.issues.map(
        (issue) => `${issue.path.map(String).join('.') || 'body'}: ${issue.message}`,
      );
      const reader = rule.schemas.size > 1 ? ` for ${consumer}` : '';
      throw new UsageError(`${where}: invalid event${reader}:\n  - ${problems.join('\n  - ')}`);
    }
    accepted ??= result.data;
  }
  return accepted;
}
