import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import Long from 'long';

import { planResubmit, resubmittedCopy } from '../../tools/deadLetterQueue';

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

const rules = { duplicateWindowMs: HOUR_MS, force: false, nowMs: NOW_MS };

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

  it('with force, ignores the window', () => {
    const plan = planResubmit(
      [deadLetter(1, 'a', 0)],
      { messageIds: ['a', 'zz'] },
      { ...rules, force: true },
    );

    expect(plan.resubmit.map((m) => m.messageId)).toEqual(['a']);
    expect(plan.notFound).toEqual(['zz']);
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
});
