import { hash } from 'node:crypto';

import {
  ConcurrencyConflictError,
  PoisonMessageError,
  TransientStoreError,
} from '@idempotent-consumers/inbox';
import {
  asOriginal,
  type DelayedRetryPolicy,
  delayedRetryProblems,
  longestRetryDelaySeconds,
  markerId,
  processDelivery,
  resolvedPolicy,
  RETRY_PROPERTIES,
  RETRY_SUBJECT,
  retryCopy,
  retryDecision,
  retryMessageId,
  validateTopology,
} from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { delivery, dependencies, documentsIn, ending, testConsumer } from '../src/testing';

/**
 * Delayed retry's decisions (packages/inbox/src/delayedRetry.ts), each branch pinned: the policy's checks
 * and defaults, the schedule, the copy's identity, and how a copy's delivery is read back as its
 * original, down to the marker the real SDK writes on the local Cosmos DB server.
 * test/functions/delayedRetry.test.ts runs the whole loop through the worker and the local peer.
 */
const stack = useLocalStack();

const policy = (overrides: Partial<DelayedRetryPolicy> = {}) =>
  resolvedPolicy({ attempts: 3, firstDelaySeconds: 30, ...overrides });
const failure = new Error('the pricing service timed out');

describe('the policy', () => {
  it('fills in its defaults: two immediate deliveries, and the delay doubling up to the last attempt, capped at an hour', () => {
    expect(resolvedPolicy({ attempts: 3, firstDelaySeconds: 30 })).toEqual({
      attempts: 3,
      firstDelaySeconds: 30,
      maxDelaySeconds: 120,
      afterDeliveries: 2,
    });
    expect(resolvedPolicy({ attempts: 10, firstDelaySeconds: 60 }).maxDelaySeconds).toBe(3600);
    expect(
      resolvedPolicy({ attempts: 2, firstDelaySeconds: 5, maxDelaySeconds: 7, afterDeliveries: 1 }),
    ).toEqual({ attempts: 2, firstDelaySeconds: 5, maxDelaySeconds: 7, afterDeliveries: 1 });
  });

  it('accepts a usable declaration', () => {
    expect(delayedRetryProblems('a.b', { attempts: 1, firstDelaySeconds: 1 }, 2)).toEqual([]);
    expect(
      delayedRetryProblems(
        'a.b',
        { attempts: 10, firstDelaySeconds: 3600, maxDelaySeconds: 3600, afterDeliveries: 9 },
        10,
      ),
    ).toEqual([]);
    expect(delayedRetryProblems('a.b', { attempts: 2, firstDelaySeconds: 10, afterDeliveries: 500 })).toEqual(
      [],
    );
    // Without the delivery count (src/topology.json's own check), only its floor; the app checks the rest at start.
    expect(delayedRetryProblems('a.b', { attempts: 2, firstDelaySeconds: 10, afterDeliveries: 0 })).toEqual([
      "subscription 'a.b': delayedRetry.afterDeliveries must be a whole number of at least 1 (below SERVICEBUS_MAX_DELIVERY_COUNT, checked at start)",
    ]);
  });

  it.each([
    ['not an object', 3, ['must be an object']],
    ['a list', [], ['must be an object']],
    ['null', null, ['must be an object']],
    ['no attempts', { firstDelaySeconds: 30 }, ['attempts must be a whole number from 1 to 10']],
    [
      'zero attempts',
      { attempts: 0, firstDelaySeconds: 30 },
      ['attempts must be a whole number from 1 to 10'],
    ],
    [
      '11 attempts',
      { attempts: 11, firstDelaySeconds: 30 },
      ['attempts must be a whole number from 1 to 10'],
    ],
    [
      'a fraction',
      { attempts: 1.5, firstDelaySeconds: 30 },
      ['attempts must be a whole number from 1 to 10'],
    ],
    ['text', { attempts: '2', firstDelaySeconds: 30 }, ['attempts must be a whole number from 1 to 10']],
    ['no delay', { attempts: 2 }, ['firstDelaySeconds must be a whole number from 1 to 3600']],
    [
      'a delay past an hour',
      { attempts: 2, firstDelaySeconds: 3601 },
      ['firstDelaySeconds must be a whole number from 1 to 3600'],
    ],
    [
      'a longest delay below the first',
      { attempts: 2, firstDelaySeconds: 30, maxDelaySeconds: 29 },
      ['maxDelaySeconds must be a whole number from 30 to 3600'],
    ],
    [
      'a longest delay past an hour',
      { attempts: 2, firstDelaySeconds: 30, maxDelaySeconds: 3601 },
      ['maxDelaySeconds must be a whole number from 30 to 3600'],
    ],
    [
      'no immediate delivery',
      { attempts: 2, firstDelaySeconds: 30, afterDeliveries: 0 },
      ['afterDeliveries must be a whole number from 1 to 9'],
    ],
    [
      'no delivery left to schedule from',
      { attempts: 2, firstDelaySeconds: 30, afterDeliveries: 10 },
      ['afterDeliveries must be a whole number from 1 to 9'],
    ],
    [
      'a setting it does not have',
      { attempts: 2, firstDelaySeconds: 30, delay: 5 },
      ["has no setting 'delay' (attempts, firstDelaySeconds, maxDelaySeconds, afterDeliveries)"],
    ],
  ])('refuses %s', (_case, value, expected) => {
    const problems = delayedRetryProblems('billing.payment-applier', value, 10);
    expect(problems).toHaveLength(expected.length);
    expected.forEach((text, i) => {
      expect(problems[i]?.startsWith("subscription 'billing.payment-applier': delayedRetry")).toBe(true);
      expect(problems[i]).toContain(text);
    });
  });

  it('is checked with the topology, which keeps the retry Subject to itself', () => {
    const topology = (subscription: object) =>
      validateTopology({
        topics: [{ name: 't', subscriptions: [{ name: 'a.b', subjects: ['A'], ...subscription }] }],
      });
    expect(
      topology({ delayedRetry: { attempts: 2, firstDelaySeconds: 30 } }).topics[0]!.subscriptions[0]!
        .delayedRetry,
    ).toEqual({
      attempts: 2,
      firstDelaySeconds: 30,
    });
    expect(() => topology({ delayedRetry: { attempts: 0, firstDelaySeconds: 30 } })).toThrow(
      "subscription 'a.b': delayedRetry.attempts must be a whole number from 1 to 10",
    );
    expect(() => topology({ subjects: ['A', RETRY_SUBJECT] })).toThrow(
      `subscription 'a.b': the subject '${RETRY_SUBJECT}' is the delayed retries' own`,
    );
    expect(() =>
      validateTopology({ topics: [{ name: 't', unsubscribedSubjects: [RETRY_SUBJECT], subscriptions: [] }] }),
    ).toThrow(`topic 't': unsubscribed subject "${RETRY_SUBJECT}" is not a subject name`);
  });
});

describe('the decision after a failed delivery', () => {
  const at = (deliveryCount: number, attempt?: number, body: unknown = { accountId: 'a', amount: 1 }) =>
    delivery(body, {
      deliveryCount,
      ...(attempt === undefined
        ? {}
        : { retry: { copyMessageId: `message-1:retry:${attempt}`, attempt, for: 'a.b' } }),
    });

  it('gives the delivery back until its immediate retries are spent, then schedules the next copy', () => {
    expect(retryDecision(policy(), at(1), failure, 0)).toEqual({ kind: 'redeliver' });
    expect(retryDecision(policy(), at(2), failure, 0)).toEqual({
      kind: 'schedule',
      attempt: 1,
      delaySeconds: 30,
    });
    expect(retryDecision(policy(), at(5), failure, 0)).toEqual({
      kind: 'schedule',
      attempt: 1,
      delaySeconds: 30,
    });
    expect(retryDecision(policy({ afterDeliveries: 1 }), at(1), failure, 0)).toMatchObject({
      kind: 'schedule',
    });
    expect(retryDecision(policy(), at(1, 1), failure, 0)).toEqual({ kind: 'redeliver' });
    expect(retryDecision(policy(), at(2, 1), failure, 0)).toEqual({
      kind: 'schedule',
      attempt: 2,
      delaySeconds: 60,
    });
  });

  it('doubles the delay per copy, caps it at maxDelaySeconds, and stretches it by up to 10 % at random', () => {
    const delays = (random: number, overrides: Partial<DelayedRetryPolicy> = {}) =>
      [0, 1, 2, 3, 4].map((done) => {
        const decision = retryDecision(
          policy({ attempts: 5, ...overrides }),
          at(2, done || undefined),
          failure,
          random,
        );
        return decision.kind === 'schedule' ? decision.delaySeconds : decision.kind;
      });
    expect(delays(0)).toEqual([30, 60, 120, 240, 480]);
    expect(delays(0, { maxDelaySeconds: 100 })).toEqual([30, 60, 100, 100, 100]);
    expect(delays(0.5)).toEqual([31.5, 63, 126, 252, 504]);
    expect(delays(0.999).map((d) => Math.round(Number(d)))).toEqual([33, 66, 132, 264, 528]);
  });

  it('is spent once the last copy failed its immediate retries: given back, for the dead-letter queue', () => {
    expect(retryDecision(policy(), at(2, 3), failure, 0)).toEqual({ kind: 'spent', attempts: 3 });
    expect(retryDecision(policy(), at(9, 3), failure, 0)).toEqual({ kind: 'spent', attempts: 3 });
    expect(retryDecision(policy(), at(1, 3), failure, 0)).toEqual({ kind: 'redeliver' });
  });

  it.each([
    ['poison', new PoisonMessageError('rejected-by-handler', 'no')],
    ['a Cosmos DB failure', new TransientStoreError('503', 503)],
    ['a lost race', new ConcurrencyConflictError('etag')],
  ])('leaves %s to redelivery, as before', (_case, error) => {
    expect(retryDecision(policy(), at(2), error, 0)).toEqual({ kind: 'redeliver' });
  });

  it('schedules for any error of the handler, and for a thrown value that is not an Error', () => {
    expect(retryDecision(policy(), at(2), new TypeError('x'), 0)).toMatchObject({ kind: 'schedule' });
    expect(retryDecision(policy(), at(2), 'a string', 0)).toMatchObject({ kind: 'schedule' });
  });

  it('leaves a body that came as bytes to redelivery: the copy could not carry it as it came', () => {
    expect(retryDecision(policy(), at(2, undefined, Buffer.from([0xff])), failure, 0)).toEqual({
      kind: 'redeliver',
    });
  });

  it('leaves a body that hides the application properties to redelivery: its copy could not be known as one', () => {
    const hiding = delivery(
      { accountId: 'a', amount: 1 },
      { deliveryCount: 2, shadowedByBody: ['applicationProperties'] },
    );
    expect(retryDecision(policy(), hiding, failure, 0)).toEqual({ kind: 'redeliver' });
    // A body that hides the Subject only is scheduled: the copy is known by its properties.
    const subjectHidden = delivery(
      { accountId: 'a', amount: 1 },
      { deliveryCount: 2, shadowedByBody: ['subject'] },
    );
    expect(retryDecision(policy(), subjectHidden, failure, 0)).toMatchObject({ kind: 'schedule' });
  });

  it('bounds the longest wait by maxDelaySeconds and the jitter', () => {
    expect(longestRetryDelaySeconds(policy({ maxDelaySeconds: 100 }))).toBeCloseTo(110);
  });
});

describe("the copy's identity", () => {
  it('is <original>:retry:<subscription>:<attempt>, or the hash of an original too long for 128 characters', () => {
    expect(retryMessageId('payment-1', 'a.b', 1)).toBe('payment-1:retry:a.b:1');
    // Two subscriptions of one topic schedule two copies, which duplicate detection keeps apart.
    expect(retryMessageId('payment-1', 'a.c', 1)).not.toBe(retryMessageId('payment-1', 'a.b', 1));
    expect(retryMessageId('x'.repeat(115), 'a.b', 10)).toBe(`${'x'.repeat(115)}:retry:a.b:10`);
    expect(retryMessageId('x'.repeat(115), 'a.b', 10)).toHaveLength(128);
    const long = 'y'.repeat(116);
    expect(retryMessageId(long, 'a.b', 10)).toBe(`${hash('sha256', long)}:retry:a.b:10`);
    expect(retryMessageId(long, 'a.b', 10)).not.toBe(retryMessageId('z'.repeat(116), 'a.b', 10));
    // The longest: a 128-character original, a 50-character subscription, attempt 10.
    expect(retryMessageId('x'.repeat(128), 's'.repeat(50), 10).length).toBeLessThanOrEqual(128);
  });

  it("carries the body, ContentType, CorrelationId and properties of the delivery, under the retry Subject, with the family's properties", () => {
    const failed = delivery(
      { accountId: 'a', amount: 1 },
      {
        messageId: 'payment-1',
        subject: 'PaymentReceived',
        correlationId: 'order-7',
        applicationProperties: {
          traceparent: '00-abc-def-01',
          tenant: 'eu',
          count: 3,
          urgent: true,
          nested: { a: 1 },
        },
      },
    );
    expect(retryCopy(failed, 'payments', 'billing.payment-applier', 2)).toEqual({
      messageId: 'payment-1:retry:billing.payment-applier:2',
      topic: 'payments',
      subject: RETRY_SUBJECT,
      body: { accountId: 'a', amount: 1 },
      contentType: 'application/json',
      correlationId: 'order-7',
      applicationProperties: {
        traceparent: '00-abc-def-01',
        tenant: 'eu',
        count: 3,
        urgent: true,
        [RETRY_PROPERTIES.of]: 'payment-1',
        [RETRY_PROPERTIES.for]: 'billing.payment-applier',
        [RETRY_PROPERTIES.attempt]: 2,
        [RETRY_PROPERTIES.subject]: 'PaymentReceived',
      },
    });
  });

  it("of a copy's copy keeps the original, and drops a stale original Subject when the delivery has none", () => {
    const copy = asOriginal(
      delivery(
        {},
        { messageId: 'payment-1:retry:a.b:1', subject: RETRY_SUBJECT, applicationProperties: family({}) },
      ),
    );
    const next = retryCopy(copy, 'payments', 'a.b', 2);
    expect(next.messageId).toBe('payment-1:retry:a.b:2');
    expect(next.applicationProperties).toEqual(family({ [RETRY_PROPERTIES.attempt]: 2 }));
    const noSubject = retryCopy(
      delivery({}, { subject: undefined, applicationProperties: { [RETRY_PROPERTIES.subject]: 'Stale' } }),
      't',
      'a.b',
      1,
    );
    expect(noSubject.applicationProperties).not.toHaveProperty(RETRY_PROPERTIES.subject);
  });
});

function family(overrides: Record<string, unknown>): Record<string, unknown> {
  return {
    [RETRY_PROPERTIES.of]: 'payment-1',
    [RETRY_PROPERTIES.for]: 'a.b',
    [RETRY_PROPERTIES.attempt]: 1,
    [RETRY_PROPERTIES.subject]: 'PaymentReceived',
    ...overrides,
  };
}

describe('a delivery of a copy, read as its original', () => {
  const copy = (properties: Record<string, unknown>, overrides = {}) =>
    delivery(
      { accountId: 'a', amount: 1 },
      {
        messageId: 'payment-1:retry:a.b:1',
        subject: RETRY_SUBJECT,
        applicationProperties: properties,
        ...overrides,
      },
    );
  const refusal = async (broken: ReturnType<typeof copy>) =>
    ending(
      processDelivery(
        testConsumer(() => undefined, { name: 'a.b' }),
        broken,
        dependencies(stack.container),
      ),
    );

  it('takes the original MessageId and Subject, and says which copy it is', () => {
    expect(asOriginal(copy(family({})))).toMatchObject({
      messageId: 'payment-1',
      messageIdIsLossy: false,
      subject: 'PaymentReceived',
      retry: { copyMessageId: 'payment-1:retry:a.b:1', attempt: 1, for: 'a.b' },
    });
    expect(asOriginal(copy(family({}))).invalidRetryCopy).toBeUndefined();
    expect(asOriginal(copy(family({ [RETRY_PROPERTIES.subject]: undefined }))).subject).toBeUndefined();
    expect(asOriginal(copy(family({ [RETRY_PROPERTIES.subject]: '' }))).subject).toBeUndefined();
    // A MessageId that is JSON text is keyed with the payload hash, as the original's was.
    const numeric = copy(family({ [RETRY_PROPERTIES.of]: '1000' }), { messageId: '1000:retry:a.b:1' });
    expect(asOriginal(numeric).messageIdIsLossy).toBe(true);
    expect(asOriginal(copy(family({}), { messageIdIsLossy: true })).messageIdIsLossy).toBe(true);
  });

  it('knows a copy by its properties and MessageId, whatever Subject it shows: a body with subject and label hides the retry Subject', () => {
    for (const subject of [undefined, 'from the body', 'PaymentReceived']) {
      expect(
        asOriginal(copy(family({}), { subject, shadowedByBody: subject === undefined ? ['subject'] : [] })),
      ).toMatchObject({
        messageId: 'payment-1',
        subject: 'PaymentReceived',
        retry: { copyMessageId: 'payment-1:retry:a.b:1', attempt: 1 },
      });
    }
  });

  it('leaves any other delivery as it is', () => {
    const plain = delivery({}, { messageId: 'payment-1', subject: 'PaymentReceived' });
    expect(asOriginal(plain)).toBe(plain);
    // A MessageId that looks like a copy's, with properties the body does not hide: an ordinary message.
    const lookalike = delivery({}, { messageId: 'order:retry:a.b:1' });
    expect(asOriginal(lookalike)).toBe(lookalike);
  });

  it.each([
    ['no original', { [RETRY_PROPERTIES.of]: undefined }],
    ['an empty original', { [RETRY_PROPERTIES.of]: '' }],
    ['an original past 128 characters', { [RETRY_PROPERTIES.of]: 'x'.repeat(129) }],
    ['an original that is not text', { [RETRY_PROPERTIES.of]: 7 }],
    ['no attempt', { [RETRY_PROPERTIES.attempt]: undefined }],
    ['attempt 0', { [RETRY_PROPERTIES.attempt]: 0 }],
    ['attempt 11', { [RETRY_PROPERTIES.attempt]: 11 }],
    ['a fractional attempt', { [RETRY_PROPERTIES.attempt]: 1.5 }],
    ['an attempt as text', { [RETRY_PROPERTIES.attempt]: '1' }],
    ['no subscription', { [RETRY_PROPERTIES.for]: undefined }],
    ['a Subject that is not text', { [RETRY_PROPERTIES.subject]: 5 }],
  ])('marks a copy with %s invalid, which processing refuses as poison', async (_case, change) => {
    const broken = asOriginal(copy(family(change)));
    expect(broken.invalidRetryCopy).toBe('its inboxRetry* properties are missing or malformed');
    expect(broken.retry).toBeUndefined();
    expect(await refusal(broken)).toBe('poison invalid-retry-copy');
  });

  it.each([
    ['none', undefined],
    ["another copy's", 'payment-1:retry:a.b:2'],
    ["another subscription's", 'payment-1:retry:a.c:1'],
    ['the original', 'payment-1'],
  ])(
    'marks a copy whose MessageId is %s invalid: its properties name another message',
    async (_case, messageId) => {
      const broken = asOriginal(copy(family({}), { messageId }));
      expect(broken.invalidRetryCopy).toBe('its MessageId is not the one its inboxRetry* properties give');
      expect(await refusal(broken)).toBe('poison invalid-retry-copy');
    },
  );

  it('marks the retry Subject without any family property invalid', async () => {
    const broken = asOriginal(copy({ tenant: 'eu' }));
    expect(broken.invalidRetryCopy).toBe('its Subject is inbox.retry but it has no inboxRetry* properties');
    expect(await refusal(broken)).toBe('poison invalid-retry-copy');
    // The reason, as the log line and the dead-letter tools show it.
    const error = await processDelivery(
      testConsumer(() => undefined, { name: 'a.b' }),
      broken,
      dependencies(stack.container),
    ).catch((e: unknown) => e);
    expect((error as Error).message).toBe(
      "A delayed-retry copy that cannot be read as one (its Subject is inbox.retry but it has no inboxRetry* properties): its effect could not be told apart from the original's.",
    );
  });

  it("marks a copy's MessageId invalid when the body hides the properties that would name its original", async () => {
    const hidden = copy({}, { subject: undefined, shadowedByBody: ['subject', 'applicationProperties'] });
    const broken = asOriginal(hidden);
    expect(broken.invalidRetryCopy).toMatch(/^its MessageId is a copy's, and its body hides its properties/);
    expect(await refusal(broken)).toBe('poison invalid-retry-copy');
    // The hashed form of a long original too, and attempt 10; an ordinary MessageId is left alone.
    for (const messageId of [retryMessageId('y'.repeat(120), 'a.b', 10), 'm:retry:s_1-x.y:9'])
      expect(asOriginal({ ...hidden, messageId }).invalidRetryCopy).toBeDefined();
    for (const messageId of ['payment-1', 'm:retry:a.b:11', 'm:retry:a.b:0', 'm:retry::1', 'm:retry:a:b:1x'])
      expect(asOriginal({ ...hidden, messageId }).invalidRetryCopy).toBeUndefined();
    expect(
      asOriginal({ ...hidden, messageId: `m:retry:${'s'.repeat(51)}:1` }).invalidRetryCopy,
    ).toBeUndefined();
    expect(
      asOriginal({ ...hidden, messageId: `m:retry:${'s'.repeat(50)}:1` }).invalidRetryCopy,
    ).toBeDefined();
  });

  it('accepts an original of exactly 128 characters and attempt 10', () => {
    const original = 'x'.repeat(128);
    expect(
      asOriginal(
        copy(family({ [RETRY_PROPERTIES.of]: original, [RETRY_PROPERTIES.attempt]: 10 }), {
          messageId: retryMessageId(original, 'a.b', 10),
        }),
      ),
    ).toMatchObject({ messageId: original, retry: { attempt: 10 } });
  });

  it("is refused as poison by a consumer it was not scheduled for: the subscriptions' filters are wrong", async () => {
    const error = await processDelivery(
      testConsumer(() => undefined, { name: 'other.consumer' }),
      asOriginal(copy(family({}))),
      dependencies(stack.container),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PoisonMessageError);
    expect((error as PoisonMessageError).reason).toBe('invalid-retry-copy');
    expect((error as Error).message).toContain(
      "scheduled for subscription 'a.b' reached consumer other.consumer",
    );
  });

  it("writes the original's marker, so the original and its copies apply the effect once", async () => {
    const consumer = testConsumer((message, tx) => tx.create({ id: 'effect', amount: message.amount }), {
      name: 'a.b',
    });
    const deps = dependencies(stack.container);
    const body = { accountId: 'retry-marker', amount: 1 };
    expect(await ending(processDelivery(consumer, asOriginal(copy(family({}), { body })), deps))).toBe(
      'processed',
    );
    expect(
      await ending(
        processDelivery(
          consumer,
          delivery(body, { messageId: 'payment-1', subject: 'PaymentReceived' }),
          deps,
        ),
      ),
    ).toBe('duplicate');
    expect(
      await ending(
        processDelivery(
          consumer,
          asOriginal(
            copy(family({ [RETRY_PROPERTIES.attempt]: 2 }), { body, messageId: 'payment-1:retry:a.b:2' }),
          ),
          deps,
        ),
      ),
    ).toBe('duplicate');
    const documents = await documentsIn(stack.container, 'account:retry-marker');
    expect(documents.map((d) => d.id).sort()).toEqual(['effect', markerId('a.b', 'payment-1')].sort());
  });
});
