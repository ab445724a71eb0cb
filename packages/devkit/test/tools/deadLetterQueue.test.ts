import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import { RESUBMITTED_AT_PROPERTY } from '@idempotent-consumers/inbox/internal';
import Long from 'long';

import { bounded } from '../../src/cli/errors';
import { planDiscard, planResubmit, resubmittedCopy } from '../../src/tools/deadLetterQueue';
import { reportDeadLetters, STATE_MEANINGS } from '../../src/tools/deadLetterReport';
import type { InboxState } from '../../src/tools/inboxState';

const NOW_MS = Date.UTC(2026, 10, 30, 12);
const HOUR_MS = 3_600_000;

function deadLetter(
  sequence: number,
  messageId: string | undefined,
  enqueuedAgoMs: number,
): ServiceBusReceivedMessage {
  return {
    body: Buffer.from('{}'),
    messageId,
    subject: 'PaymentReceived',
    sequenceNumber: Long.fromNumber(sequence),
    enqueuedTimeUtc: new Date(NOW_MS - enqueuedAgoMs),
    applicationProperties: { tenant: 't', DeadLetterReason: 'r', DeadLetterErrorDescription: 'd' },
    deadLetterReason: 'r',
    deadLetterErrorDescription: 'd',
    state: 'active',
    _rawAmqpMessage: { body: undefined, bodyType: 'data' },
  } as unknown as ServiceBusReceivedMessage;
}

const rules = {
  duplicateWindowMs: HOUR_MS,
  clockSkewMs: 0,
  ignoreDuplicateWindow: false,
  force: false,
  includePoison: false,
  nowMs: NOW_MS,
  routedSubjects: new Set(['PaymentReceived']),
  inboxStates: undefined,
};
const MINUTE_MS = 60_000;

describe('planResubmit', () => {
  it('refuses inside the window, from the enqueued time plus the window, and allows after it', () => {
    const plan = planResubmit(
      [deadLetter(1, 'a', HOUR_MS - 1), deadLetter(2, 'b', HOUR_MS), deadLetter(3, 'c', 3 * HOUR_MS)],
      { all: true },
      rules,
    );

    expect(
      plan.tooEarly.map(({ message, resubmittableAt }) => [message.messageId, resubmittableAt.getTime()]),
    ).toEqual([['a', NOW_MS + 1]]);
    expect(plan.resubmit.map((m) => m.messageId)).toEqual(['b', 'c']);
  });

  it('resubmits one of several dead letters sharing a MessageId: the broker would drop the others', () => {
    const plan = planResubmit(
      [deadLetter(1, 'a', 5 * HOUR_MS), deadLetter(7, 'a', 2 * HOUR_MS)],
      { all: true },
      rules,
    );

    expect(plan.resubmit.map((m) => m.sequenceNumber?.toNumber())).toEqual([1]);
    expect(plan.sameMessageId.map((m) => m.sequenceNumber?.toNumber())).toEqual([7]);
  });

  it('needs no window for a message without MessageId (duplicate detection cannot match it)', () => {
    const plan = planResubmit([deadLetter(1, undefined, 0)], { all: true }, rules);

    expect(plan.resubmit).toHaveLength(1);
  });

  it('waits the clock-skew margin out after the window', () => {
    const plan = planResubmit(
      [deadLetter(1, 'a', HOUR_MS + 4 * MINUTE_MS), deadLetter(2, 'b', HOUR_MS + 5 * MINUTE_MS)],
      { all: true },
      { ...rules, clockSkewMs: 5 * MINUTE_MS },
    );

    expect(plan.tooEarly.map(({ message }) => message.messageId)).toEqual(['a']);
    expect(plan.resubmit.map((m) => m.messageId)).toEqual(['b']);
  });

  it('completes applied ones, refuses unroutable ones, and mismatches and unknowns without force', () => {
    const states = new Map<string, InboxState>([
      ['1', { state: 'applied', detail: '' }],
      ['2', { state: 'payload-mismatch', detail: '' }],
      ['3', { state: 'unknown', detail: '' }],
      ['4', { state: 'not-applied', detail: '' }],
    ]);
    const unroutable = { ...deadLetter(5, 'e', 2 * HOUR_MS), subject: 'PaymentRecieved' };
    const all = [1, 2, 3, 4].map((n) => deadLetter(n, `m${n}`, 2 * HOUR_MS));

    const plan = planResubmit([...all, unroutable], { all: true }, { ...rules, inboxStates: states });
    const forced = planResubmit(
      [...all, unroutable],
      { all: true },
      { ...rules, inboxStates: states, force: true },
    );

    expect(plan.applied.map((m) => m.messageId)).toEqual(['m1']);
    expect(plan.inboxRefused.map(({ message }) => message.messageId)).toEqual(['m2', 'm3']);
    expect(plan.resubmit.map((m) => m.messageId)).toEqual(['m4']);
    expect(plan.unroutable.map((m) => m.messageId)).toEqual(['e']);
    expect(forced.resubmit.map((m) => m.messageId)).toEqual(['m2', 'm3', 'm4']);
    expect(forced.unroutable.map((m) => m.messageId)).toEqual(['e']);
  });

  it('refuses poison and rejected ones (even asked for by MessageId, even with force) without includePoison', () => {
    const states = new Map<string, InboxState>([
      ['1', { state: 'poison', detail: 'schema-violation' }],
      ['2', { state: 'rejected', detail: 'rejected-by-handler; delivery 10' }],
      ['3', { state: 'failed', detail: 'TypeError: x; delivery 10' }],
    ]);
    const all = [1, 2, 3].map((n) => deadLetter(n, `m${n}`, 2 * HOUR_MS));

    const asked = planResubmit(
      all,
      { messageIds: ['m1', 'm2', 'm3'] },
      { ...rules, inboxStates: states, force: true },
    );
    const included = planResubmit(all, { all: true }, { ...rules, inboxStates: states, includePoison: true });

    expect(asked.poison.map(({ message, state }) => [message.messageId, state.state])).toEqual([
      ['m1', 'poison'],
      ['m2', 'rejected'],
    ]);
    expect(asked.resubmit.map((m) => m.messageId)).toEqual(['m3']);
    expect(included.poison).toEqual([]);
    expect(included.resubmit.map((m) => m.messageId)).toEqual(['m1', 'm2', 'm3']);
  });

  it('with ignoreDuplicateWindow, ignores the window', () => {
    const plan = planResubmit(
      [deadLetter(1, 'a', 0)],
      { messageIds: ['a', 'zz'] },
      { ...rules, ignoreDuplicateWindow: true },
    );

    expect(plan.resubmit.map((m) => m.messageId)).toEqual(['a']);
    expect(plan.notFound).toEqual(['zz']);
  });
});

describe('planDiscard', () => {
  const names = [
    'applied',
    'versioned',
    'poison',
    'rejected',
    'not-applied',
    'failed',
    'unknown',
    'payload-mismatch',
  ] as const;
  const all = [
    ...names.map((_, index) => deadLetter(index + 1, `m${index + 1}`, 0)),
    deadLetter(9, 'unchecked', 0),
  ];
  const states = new Map<string, InboxState>(
    names.map((state, index) => [String(index + 1), { state, detail: 'd' }]),
  );
  const ids = (entries: { message: ServiceBusReceivedMessage }[]): unknown[] =>
    entries.map(({ message }) => message.messageId);

  it('discards what is applied or refused by its consumer, and refuses what would never take effect', () => {
    const plan = planDiscard(all, { all: true }, { inboxStates: states, force: false });

    expect(ids(plan.discard)).toEqual(['m1', 'm2', 'm3', 'm4']);
    expect(plan.discard.every(({ effectLost }) => !effectLost)).toBe(true);
    expect(ids(plan.refused)).toEqual(['m5', 'm6', 'm7', 'm8', 'unchecked']);
  });

  it('discards the rest with force, each marked as an effect lost', () => {
    const plan = planDiscard(
      all,
      { messageIds: ['m5', 'unchecked', 'gone'] },
      { inboxStates: states, force: true },
    );

    expect(plan.discard.map(({ message, effectLost }) => [message.messageId, effectLost])).toEqual([
      ['m5', true],
      ['unchecked', true],
    ]);
    expect(plan.refused).toEqual([]);
    expect(plan.notFound).toEqual(['gone']);
  });
});

describe('reportDeadLetters', () => {
  it("gives list's verdicts as plain data: bounded ids, the inbox state and its meaning, the body's length and hash only", () => {
    const long = deadLetter(2, 'x'.repeat(100), 0);
    const report = reportDeadLetters([deadLetter(1, 'a', 0), long], {
      ...rules,
      routedSubjects: new Set(),
      inboxStates: new Map([['1', { state: 'poison', detail: 'schema-violation' }]]),
    });

    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
    expect(report.rows[0]).toEqual({
      sequence: '1',
      messageId: 'a',
      subject: 'PaymentReceived',
      family: undefined,
      reason: 'r',
      description: 'd',
      deliveries: undefined,
      enqueuedAt: new Date(NOW_MS).toISOString(),
      inbox: {
        state: 'poison',
        detail: 'schema-violation',
        text: 'poison (schema-violation)',
        meaning: STATE_MEANINGS.poison,
      },
      resubmittableFrom: undefined,
      never: 'no subscription takes its subject',
      bodyBytes: 2,
      bodySha256: '44136fa355b3',
    });
    expect(report.rows[1]!.messageId).toBe(bounded('x'.repeat(100)));
    expect(report.delayedRetryColumn).toBe(false);
    expect(report.legend).toEqual([
      expect.stringMatching(/^resubmittable from: enqueued \+ the duplicate window \(PT1H\)/),
      `poison: ${STATE_MEANINGS.poison}`,
    ]);
  });
});

describe('resubmittedCopy', () => {
  it('keeps what the producer sent and drops what dead-lettering added', () => {
    const copy = resubmittedCopy(deadLetter(1, 'a', 0));

    expect(copy).toEqual({
      body: Buffer.from('{}'),
      messageId: 'a',
      subject: 'PaymentReceived',
      applicationProperties: { tenant: 't' },
    });
  });

  it('marks the copy with the time of the resubmit, replacing an earlier mark, when given one', () => {
    const at = new Date('2026-12-01T10:00:00.123Z');
    const earlier = deadLetter(1, 'a', 0);
    earlier.applicationProperties = {
      ...earlier.applicationProperties,
      [RESUBMITTED_AT_PROPERTY]: '2026-11-01T00:00:00.000Z',
    };

    expect(resubmittedCopy(deadLetter(1, 'a', 0), at).applicationProperties).toEqual({
      tenant: 't',
      [RESUBMITTED_AT_PROPERTY]: '2026-12-01T10:00:00.123Z',
    });
    expect(resubmittedCopy(earlier, at).applicationProperties).toEqual({
      tenant: 't',
      [RESUBMITTED_AT_PROPERTY]: '2026-12-01T10:00:00.123Z',
    });
  });
});

describe('bounded', () => {
  it('keeps an echoed value to one line of at most the given length', () => {
    expect(bounded(`a\nb\u0007c${'x'.repeat(100)}`, 10)).toBe('a b cxxxx…');
    expect(bounded('short')).toBe('short');
  });
});
