import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import { markerLocation, RESUBMITTED_AT_PROPERTY, RETRY_SUBJECT } from '@idempotent-consumers/inbox/internal';
import { retryCopy } from '@idempotent-consumers/inbox/internal';
import { delivery, testConsumer } from '@idempotent-consumers/inbox/testing';
import Long from 'long';

import { byFamily, deliveryOf, familyText, retryFamilyOf } from '../../src/tools/deadLetterIdentity';
import { planResubmit, resubmittedCopy, routeOf } from '../../src/tools/deadLetterQueue';
import type { InboxState } from '../../src/tools/inboxState';

/**
 * How the dead-letter tool sees a delayed-retry family (packages/inbox/src/delayedRetry.ts): which copy of
 * which original a dead letter is, by the library's own asOriginal, with its inbox key the
 * original's; families listed together; a copy routed, refused and resubmitted by its own identity.
 * The copies are built by the library's retryCopy, as the app schedules them.
 */
const TOPIC = 'probe-events';
const SUBSCRIPTION = 'test.consumer';
const NOW_MS = Date.UTC(2026, 11, 3, 12);
const HOUR_MS = 3_600_000;
const BODY = { accountId: 'A-1', amount: 5 };

function received(
  sequence: number,
  message: { messageId?: string; subject?: string; applicationProperties?: Record<string, unknown> },
  enqueuedAgoMs = 2 * HOUR_MS,
): ServiceBusReceivedMessage {
  return {
    body: Buffer.from(JSON.stringify(BODY)),
    messageId: message.messageId,
    subject: message.subject,
    sequenceNumber: Long.fromNumber(sequence),
    enqueuedTimeUtc: new Date(NOW_MS - enqueuedAgoMs),
    applicationProperties: {
      ...message.applicationProperties,
      DeadLetterReason: 'MaxDeliveryCountExceeded',
      DeadLetterErrorDescription: '',
    },
    deadLetterReason: 'MaxDeliveryCountExceeded',
    state: 'active',
    _rawAmqpMessage: { body: undefined, bodyType: 'data' },
  } as unknown as ServiceBusReceivedMessage;
}

const ordinary = (sequence: number, messageId: string, enqueuedAgoMs?: number): ServiceBusReceivedMessage =>
  received(sequence, { messageId, subject: 'Test', applicationProperties: { tenant: 't' } }, enqueuedAgoMs);

/** Copy `attempt` of `original`, as the app schedules it for `subscription`. */
function copy(
  sequence: number,
  original: string,
  attempt: number,
  { subscription = SUBSCRIPTION, enqueuedAgoMs }: { subscription?: string; enqueuedAgoMs?: number } = {},
): ServiceBusReceivedMessage {
  const scheduled = retryCopy(
    delivery(BODY, { messageId: original, subject: 'Test', applicationProperties: { tenant: 't' } }),
    TOPIC,
    subscription,
    attempt,
  );
  return received(
    sequence,
    {
      messageId: scheduled.messageId,
      subject: scheduled.subject,
      applicationProperties: scheduled.applicationProperties,
    },
    enqueuedAgoMs,
  );
}

/** A copy whose family properties were tampered with. */
function tampered(sequence: number, change: Record<string, unknown>): ServiceBusReceivedMessage {
  const message = copy(sequence, 'm-1', 1);
  const properties = { ...message.applicationProperties, ...change };
  for (const [name, value] of Object.entries(change)) if (value === undefined) delete properties[name];
  return { ...message, applicationProperties: properties } as ServiceBusReceivedMessage;
}

const rules = {
  duplicateWindowMs: HOUR_MS,
  clockSkewMs: 0,
  ignoreDuplicateWindow: false,
  force: false,
  includePoison: false,
  nowMs: NOW_MS,
  routedSubjects: new Set(['Test']),
  inboxStates: undefined,
  retryCopies: { subscription: SUBSCRIPTION, taken: true },
};

const ids = (messages: readonly ServiceBusReceivedMessage[]): unknown[] => messages.map((m) => m.messageId);

describe('retryFamilyOf', () => {
  it('names a copy by its original MessageId, attempt, subscription and original Subject', () => {
    expect(retryFamilyOf(copy(1, 'm-1', 2), SUBSCRIPTION)).toEqual({
      kind: 'copy',
      original: 'm-1',
      attempt: 2,
      for: SUBSCRIPTION,
      subject: 'Test',
    });
    expect(copy(1, 'm-1', 2).messageId).toBe('m-1:retry:test.consumer:2');
  });

  it('leaves an ordinary message alone, whatever properties it carries', () => {
    expect(retryFamilyOf(ordinary(1, 'm-1'), SUBSCRIPTION)).toBeUndefined();
  });

  it('knows a copy by its properties and MessageId, as the app does, whatever its Subject', () => {
    const otherSubject = { ...copy(1, 'm-1', 1), subject: 'Test' } as ServiceBusReceivedMessage;
    expect(retryFamilyOf(otherSubject, SUBSCRIPTION)).toMatchObject({ kind: 'copy', original: 'm-1' });
    const reminted = { ...copy(1, 'm-1', 1), messageId: 'another-id' } as ServiceBusReceivedMessage;
    expect(retryFamilyOf(reminted, SUBSCRIPTION)).toEqual({
      kind: 'invalid',
      problem: 'its MessageId is not the one its inboxRetry* properties give',
    });
  });

  it.each([
    ['no inboxRetryOf', { inboxRetryOf: undefined }],
    ['an empty inboxRetryOf', { inboxRetryOf: '' }],
    ['attempt 0', { inboxRetryAttempt: 0 }],
    ['attempt 11', { inboxRetryAttempt: 11 }],
    ['attempt as text', { inboxRetryAttempt: '1' }],
    ['no inboxRetryFor', { inboxRetryFor: undefined }],
  ])('calls a copy with %s invalid (poison for its consumer)', (_, change) => {
    expect(retryFamilyOf(tampered(1, change), SUBSCRIPTION)).toEqual({
      kind: 'invalid',
      problem: 'its inboxRetry* properties are missing or malformed',
    });
  });

  it('calls a copy scheduled for another subscription invalid here, and valid without a subscription to compare', () => {
    const elsewhere = copy(1, 'm-1', 1, { subscription: 'other.consumer' });

    expect(retryFamilyOf(elsewhere, SUBSCRIPTION)).toEqual({
      kind: 'invalid',
      problem: "scheduled for subscription 'other.consumer', not this one",
    });
    expect(retryFamilyOf(elsewhere)).toMatchObject({ kind: 'copy', for: 'other.consumer' });
  });

  it('says which copy of which original, bounded, and nothing for other messages', () => {
    const long = `m-\u001b[2J${'x'.repeat(120)}`;

    expect(familyText(retryFamilyOf(copy(1, 'm-1', 3)))).toBe('attempt 3 of m-1 (Test)');
    expect(familyText(retryFamilyOf(copy(1, long, 1)))).toBe(`attempt 1 of m- [2J${'x'.repeat(57)}… (Test)`);
    expect(familyText(retryFamilyOf(tampered(1, { inboxRetryOf: undefined })))).toMatch(
      /^invalid-retry-copy: its inboxRetry\* properties are missing or malformed$/,
    );
    expect(familyText(undefined)).toBe('');
  });
});

describe('the inbox key of a copy', () => {
  const consumer = testConsumer(() => undefined);

  it("is its original's: the same marker, failure note and Subject as the app uses", () => {
    const copied = deliveryOf(copy(1, 'm-1', 2));
    const original = delivery(BODY, { messageId: 'm-1' });

    expect(copied).toMatchObject({
      messageId: 'm-1',
      subject: 'Test',
      retry: { copyMessageId: 'm-1:retry:test.consumer:2', attempt: 2, for: SUBSCRIPTION },
    });
    expect(markerLocation(consumer, copied)).toEqual(markerLocation(consumer, original));
  });

  it('is the original MessageId as the worker hands it, even one the worker parses as a number', () => {
    // The worker hands an all-digit MessageId as a number: the app keys it as lossy (MessageId and
    // payload hash), and a copy naming it in inboxRetryOf maps to that same key.
    const digits = received(1, { messageId: '1234567', subject: 'Test' });

    expect(markerLocation(consumer, deliveryOf(copy(2, '1234567', 1)))).toEqual(
      markerLocation(consumer, deliveryOf(digits)),
    );
    expect(markerLocation(consumer, deliveryOf(copy(2, '1234567', 1)))).not.toEqual(
      markerLocation(consumer, delivery(BODY, { messageId: '1234567:retry:test.consumer:1' })),
    );
  });
});

describe('byFamily', () => {
  it('lists each family together where its first member is, the original first, then its copies by attempt', () => {
    const queue = [
      ordinary(1, 'a'),
      copy(2, 'x', 2),
      ordinary(3, 'b'),
      ordinary(4, 'x'),
      copy(5, 'x', 1),
      tampered(6, { inboxRetryOf: undefined }),
      copy(7, 'y', 1),
      ordinary(8, 'c'),
    ];

    expect(byFamily(queue, SUBSCRIPTION).map((m) => m.sequenceNumber!.toNumber())).toEqual([
      1, 4, 5, 2, 3, 6, 7, 8,
    ]);
  });

  it('keeps a queue without copies in its order', () => {
    const queue = [ordinary(3, 'c'), ordinary(1, 'a'), ordinary(2, 'a')];

    expect(byFamily(queue)).toEqual(queue);
  });
});

describe('planResubmit with delayed-retry copies', () => {
  it('routes a copy only to its own subscription, and only when that subscription takes its copies', () => {
    const queue = [copy(1, 'm-1', 1), tampered(2, { inboxRetryAttempt: '1' })];
    const elsewhere = copy(3, 'm-3', 1, { subscription: 'other.consumer' });

    const taken = planResubmit([...queue, elsewhere], { all: true }, rules);
    const notTaken = planResubmit(
      queue,
      { all: true },
      { ...rules, retryCopies: { ...rules.retryCopies, taken: false } },
    );
    const unknown = planResubmit(queue, { all: true }, { ...rules, retryCopies: undefined });
    const included = planResubmit(queue, { all: true }, { ...rules, includePoison: true, force: true });

    expect(ids(taken.resubmit)).toEqual(['m-1:retry:test.consumer:1']);
    expect(
      taken.invalidCopies.map(({ message, problem }) => [message.sequenceNumber?.toNumber(), problem]),
    ).toEqual([
      [2, expect.stringMatching(/are missing or malformed$/) as unknown],
      [3, "scheduled for subscription 'other.consumer', not this one"],
    ]);
    expect(ids(notTaken.unroutable)).toEqual(['m-1:retry:test.consumer:1']);
    expect(ids(unknown.unroutable)).toEqual(['m-1:retry:test.consumer:1']);
    // An invalid copy is never the consumer's to take, whatever the flags.
    expect(included.invalidCopies).toHaveLength(1);
    expect(routeOf(ordinary(1, 'a'), rules)).toEqual({ routed: true });
    expect(routeOf({ ...ordinary(1, 'a'), subject: RETRY_SUBJECT }, rules)).toMatchObject({
      routed: false,
      why: 'invalid-copy',
    });
  });

  it("completes a copy whose original was applied (the inbox key's state), without sending it", () => {
    const states = new Map<string, InboxState>([['1', { state: 'applied', detail: 'marker of …' }]]);

    const plan = planResubmit([copy(1, 'm-1', 2)], { all: true }, { ...rules, inboxStates: states });

    expect(ids(plan.applied)).toEqual(['m-1:retry:test.consumer:2']);
    expect(plan.resubmit).toEqual([]);
  });

  it("applies the duplicate window and the one-per-MessageId rule to the copy's own MessageId", () => {
    const queue = [
      ordinary(1, 'm-1'),
      copy(2, 'm-1', 1),
      copy(3, 'm-1', 1),
      copy(4, 'm-1', 2, { enqueuedAgoMs: HOUR_MS - 1 }),
    ];

    const plan = planResubmit(queue, { all: true }, rules);
    const asked = planResubmit(queue, { messageIds: ['m-1:retry:test.consumer:1'] }, rules);

    // The original and its copy go under different MessageIds: the broker keeps both, and the inbox
    // applies the family once.
    expect(ids(plan.resubmit)).toEqual(['m-1', 'm-1:retry:test.consumer:1']);
    expect(plan.sameMessageId.map((m) => m.sequenceNumber?.toNumber())).toEqual([3]);
    expect(
      plan.tooEarly.map(({ message, resubmittableAt }) => [message.messageId, resubmittableAt.getTime()]),
    ).toEqual([['m-1:retry:test.consumer:2', NOW_MS + 1]]);
    expect(ids(asked.resubmit)).toEqual(['m-1:retry:test.consumer:1']);
  });
});

describe('resubmittedCopy of a delayed-retry copy', () => {
  it('keeps its own MessageId, the retry Subject and every family property, and drops what dead-lettering added', () => {
    const at = new Date(NOW_MS);

    expect(resubmittedCopy(copy(1, 'm-1', 2), at)).toEqual({
      body: Buffer.from(JSON.stringify(BODY)),
      messageId: 'm-1:retry:test.consumer:2',
      subject: RETRY_SUBJECT,
      applicationProperties: {
        tenant: 't',
        inboxRetryOf: 'm-1',
        inboxRetryFor: SUBSCRIPTION,
        inboxRetryAttempt: 2,
        inboxRetrySubject: 'Test',
        [RESUBMITTED_AT_PROPERTY]: at.toISOString(),
      },
    });
  });
});
