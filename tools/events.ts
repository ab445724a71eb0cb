import type { z } from 'zod';

import { InvoiceStatusChanged, OrderCreated, PaymentReceived, SUBJECTS } from '../src/sample/messages';
import { UsageError } from './errors';

/**
 * The sample events the send tool publishes, validated with the consumers' own schemas, each with a
 * MessageId derived from the business event (not random): sending the same event twice yields the
 * same MessageId, which is what lets broker duplicate detection and the consumers' inbox drop the
 * second copy.
 */
export type BusinessEvent =
  | { subject: typeof SUBJECTS.paymentReceived; body: PaymentReceived }
  | { subject: typeof SUBJECTS.orderCreated; body: OrderCreated }
  | { subject: typeof SUBJECTS.invoiceStatusChanged; body: InvoiceStatusChanged };
export type SampleEvent = BusinessEvent & { messageId: string };

export const EVENT_KINDS = {
  payment: SUBJECTS.paymentReceived,
  order: SUBJECTS.orderCreated,
  status: SUBJECTS.invoiceStatusChanged,
} as const;
export type EventKind = keyof typeof EVENT_KINDS;

/** Service Bus refuses longer MessageIds. */
const MAX_MESSAGE_ID_LENGTH = 128;

/** The MessageId of a business event: the same event always gets the same one. */
export function messageIdFor(event: BusinessEvent): string {
  switch (event.subject) {
    case SUBJECTS.paymentReceived:
      return `payment-${event.body.paymentId}`;
    case SUBJECTS.orderCreated:
      return `order-${event.body.orderId}`;
    case SUBJECTS.invoiceStatusChanged:
      // A status change is an event per version: version 3 and version 4 are different messages.
      return `invoice-status-${event.body.invoiceId}-v${event.body.version}`;
  }
}

/**
 * Validates one event: `subject` says which schema applies; `messageId` defaults to the event's own.
 * `where` names the input in errors (a flag set, `events.jsonl:3`).
 */
export function parseEvent(
  input: { subject: unknown; body: unknown; messageId?: unknown },
  where: string,
): SampleEvent {
  const event = validated(input.subject, input.body, where);
  if (input.messageId === undefined) return { ...event, messageId: messageIdFor(event) };
  if (
    typeof input.messageId !== 'string' ||
    input.messageId.length === 0 ||
    input.messageId.length > MAX_MESSAGE_ID_LENGTH
  ) {
    throw new UsageError(`${where}: messageId must be a string of 1 to ${MAX_MESSAGE_ID_LENGTH} characters.`);
  }
  return { ...event, messageId: input.messageId };
}

/** A JSON Lines file: one `{ "subject": ..., "body": {...}, "messageId"?: ... }` per line; blank lines are skipped. */
export function parseEventLines(text: string, source: string): SampleEvent[] {
  const events: SampleEvent[] = [];
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
      throw new UsageError(`${where}: unexpected field(s) ${unknownKeys.join(', ')}.`);
    events.push(
      parseEvent({ subject: fields.subject, body: fields.body, messageId: fields.messageId }, where),
    );
  });
  if (events.length === 0) throw new UsageError(`${source} has no events.`);
  return events;
}

function validated(subject: unknown, body: unknown, where: string): BusinessEvent {
  switch (subject) {
    case SUBJECTS.paymentReceived:
      return { subject, body: check(PaymentReceived, body, where) };
    case SUBJECTS.orderCreated:
      return { subject, body: check(OrderCreated, body, where) };
    case SUBJECTS.invoiceStatusChanged:
      return { subject, body: check(InvoiceStatusChanged, body, where) };
    default:
      throw new UsageError(
        `${where}: subject must be one of ${Object.values(SUBJECTS).join(', ')}; got ${JSON.stringify(subject)}.`,
      );
  }
}

function check<T extends z.ZodType>(schema: T, body: unknown, where: string): z.infer<T> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`);
  throw new UsageError(`${where}: invalid event:\n  - ${problems.join('\n  - ')}`);
}
