import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import {
  asOriginal,
  type Delivery,
  failureNote,
  processDelivery,
} from '@idempotent-consumers/inbox/internal';
import { retryCopy } from '@idempotent-consumers/inbox/internal';
import { delivery, dependencies, testConsumer } from '@idempotent-consumers/inbox/testing';
import { useLocalStack } from '@idempotent-consumers/local-azure';
import Long from 'long';

import { type Inbox, inboxStateOf } from '../../src/tools/inboxState';

/**
 * The dead-letter tool's inbox lookup of a delayed-retry copy, on the local Cosmos DB server: the
 * marker and the failure note are written by the library's own code (processDelivery, and
 * failureNote of the delivery the adapter sees, asOriginal), keyed by the original MessageId, and
 * the tool must find them from the dead-lettered copy.
 */
const stack = useLocalStack();
const consumer = testConsumer(() => undefined);
const RETENTION_SECONDS = 30 * 86_400;

let run = 0;
let account: string;
let original: string;
let now: number;
beforeEach(() => {
  run++;
  account = `retried-${run}`;
  original = `payment-${run}`;
  now = Date.now();
});

const body = (): { accountId: string; amount: number } => ({ accountId: account, amount: 7 });
const inbox = (): Inbox => ({
  container: stack.container,
  retentionSeconds: RETENTION_SECONDS,
  description: 'local',
  close: () => undefined,
});
const at = (): { nowMs: number; clockSkewMs: number } => ({ nowMs: now, clockSkewMs: 0 });

/** The copy the app schedules for `subscription` (retryCopy), as the tool peeks it in the dead-letter queue. */
function deadLetteredCopy(
  attempt: number,
  {
    subscription = consumer.name,
    enqueuedAt = new Date(now),
    change = {},
  }: { subscription?: string; enqueuedAt?: Date; change?: Record<string, unknown> } = {},
): { message: ServiceBusReceivedMessage; delivery: Delivery } {
  const scheduled = retryCopy(
    delivery(body(), { messageId: original, subject: 'Test' }),
    'probe-events',
    subscription,
    attempt,
  );
  const properties: Record<string, unknown> = { ...scheduled.applicationProperties, ...change };
  const message = {
    body: Buffer.from(JSON.stringify(scheduled.body)),
    messageId: scheduled.messageId,
    subject: scheduled.subject,
    sequenceNumber: Long.fromNumber(run),
    enqueuedTimeUtc: enqueuedAt,
    applicationProperties: { ...properties, DeadLetterReason: 'MaxDeliveryCountExceeded' },
    deadLetterReason: 'MaxDeliveryCountExceeded',
    state: 'active',
    _rawAmqpMessage: { body: undefined, bodyType: 'data' },
  } as unknown as ServiceBusReceivedMessage;
  // What the adapter is handed for this copy's last delivery (packages/inbox/src/azureFunctions.ts).
  const handed = asOriginal(
    delivery(body(), {
      messageId: scheduled.messageId,
      subject: scheduled.subject,
      applicationProperties: properties,
      deliveryCount: 10,
    }),
  );
  return { message, delivery: handed };
}

it('finds the marker of the original: a copy whose original was applied meanwhile is applied', async () => {
  const { message } = deadLetteredCopy(2);
  const before = await inboxStateOf(message, consumer, inbox(), at());
  // The original, sent again by its producer, is applied meanwhile.
  const result = await processDelivery(
    consumer,
    delivery(body(), { messageId: original }),
    dependencies(stack.container),
  );

  const after = await inboxStateOf(message, consumer, inbox(), at());

  expect(before).toEqual({ state: 'not-applied', detail: 'no marker' });
  expect(result.outcome).toBe('processed');
  expect(after).toEqual({ state: 'applied', detail: expect.stringMatching(/^marker of \d{4}-/) as unknown });
});

it('finds the failure note the last copy left, keyed by the original MessageId', async () => {
  const { message, delivery: handed } = deadLetteredCopy(3);
  const note = failureNote(consumer, handed, new Error('the pricing service timed out'), {
    settings: { inbox: { retentionSeconds: RETENTION_SECONDS } } as never,
    now: () => new Date(now),
  });
  await stack.container.items.upsert(note!);

  const state = await inboxStateOf(message, consumer, inbox(), at());

  expect(note?.messageId).toBe(original);
  expect(state).toEqual({
    state: 'failed',
    detail: `Error: the pricing service timed out; delivery 10, ${new Date(now).toISOString()}`,
  });
});

it.each([
  ['without inboxRetryOf', { change: { inboxRetryOf: undefined } }],
  ['with an attempt past the last', { change: { inboxRetryAttempt: 11 } }],
  ['scheduled for another subscription', { subscription: 'other.consumer' }],
])('calls a copy %s poison (invalid-retry-copy), as its consumer does', async (_, options) => {
  const { message } = deadLetteredCopy(1, options);

  expect(await inboxStateOf(message, consumer, inbox(), at())).toEqual({
    state: 'poison',
    detail: 'invalid-retry-copy',
  });
});

it('starts the no-marker timeline of a copy when it may have been scheduled, up to the longest delay earlier', async () => {
  // Enqueued 30 days less 30 minutes ago, with a retention of 30 days: the marker of an ordinary
  // message would still be kept, but the family may have been applied up to 66 minutes before.
  const enqueuedAt = new Date(now - RETENTION_SECONDS * 1000 + 30 * 60_000);
  const { message } = deadLetteredCopy(1, { enqueuedAt });
  const ordinary = {
    ...message,
    messageId: `${original}-plain`,
    subject: 'Test',
    applicationProperties: {},
  } as ServiceBusReceivedMessage;

  expect(await inboxStateOf(ordinary, consumer, inbox(), at())).toMatchObject({ state: 'not-applied' });
  expect(await inboxStateOf(message, consumer, inbox(), at())).toMatchObject({ state: 'unknown' });
  expect(
    await inboxStateOf(message, consumer, inbox(), { nowMs: now - 40 * 60_000, clockSkewMs: 0 }),
  ).toMatchObject({ state: 'not-applied' });
});
