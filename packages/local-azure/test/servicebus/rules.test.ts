import type { OutgoingMessage } from '../../src/servicebus/broker';
import { correlationFilter, RuleError, sqlFilter, subjectsFilter, takes } from '../../src/servicebus/rules';
import { RETRY_COPIES, RETRY_PROPERTIES, RETRY_SUBJECT } from '../support/retryCopies';

/** The filter language of the local peer's rules (packages/local-azure/src/servicebus/rules.ts), message by message. */
const message = (fields: Partial<OutgoingMessage>): OutgoingMessage => ({ body: 'b', ...fields });

/** The RuleError a filter's construction throws. */
function refusal(build: () => unknown): RuleError {
  try {
    build();
  } catch (error) {
    if (error instanceof RuleError) return error;
    throw error;
  }
  throw new Error('The filter was accepted.');
}

describe('SQL filters', () => {
  it.each([
    ["sys.Label = 'Paid'", message({ subject: 'Paid' }), true],
    ["sys.Label = 'Paid'", message({ subject: 'paid' }), false],
    ["sys.Label <> 'Paid'", message({ subject: 'Other' }), true],
    // A property the message does not have makes the comparison unknown: false, negated or not.
    ["sys.Label <> 'Paid'", message({}), false],
    ["region != 'eu'", message({ applicationProperties: { region: 'us' } }), true],
    ["sys.To IN ('a', 'b')", message({ to: 'b' }), true],
    ["sys.To NOT IN ('a', 'b')", message({ to: 'b' }), false],
    [
      "user.region = 'eu' AND amount = 10",
      message({ applicationProperties: { region: 'eu', amount: 10 } }),
      true,
    ],
    [
      "user.region = 'eu' AND amount = 10",
      message({ applicationProperties: { region: 'eu', amount: 11 } }),
      false,
    ],
    [
      "region = 'us' OR region = 'eu' AND vip = TRUE",
      message({ applicationProperties: { region: 'us' } }),
      true,
    ],
    [
      "region = 'us' OR region = 'eu' AND vip = TRUE",
      message({ applicationProperties: { region: 'eu' } }),
      false,
    ],
    // AND binds tighter than OR: A OR (B AND C), as in Service Bus SQL (the delayed-retry filter's shape).
    [
      "sys.Label IN ('A', 'B') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'x'",
      message({ subject: 'B' }),
      true,
    ],
    [
      "sys.Label IN ('A', 'B') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'x'",
      message({ subject: 'inbox.retry', applicationProperties: { inboxRetryFor: 'x' } }),
      true,
    ],
    [
      "sys.Label IN ('A', 'B') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'x'",
      message({ subject: 'inbox.retry', applicationProperties: { inboxRetryFor: 'y' } }),
      false,
    ],
    [
      "sys.Label = 'inbox.retry' AND inboxRetryFor = 'x' OR sys.Label IN ('A', 'B')",
      message({ subject: 'A' }),
      true,
    ],
    // Keywords and commas inside a quoted literal are text.
    ["sys.Label IN ('A AND B', 'C, D')", message({ subject: 'C, D' }), true],
    ["sys.Label = 'it''s'", message({ subject: "it's" }), true],
    ['1 = 1', message({}), true],
    ['1=0', message({ subject: 'x' }), false],
  ])('%s on %j is %s', (expression, sent, expected) => {
    expect(takes(sqlFilter(expression), sent)).toBe(expected);
  });

  it.each(['(a = 1)', "sys.Label LIKE 'A%'", 'a > 1', "sys.Unknown = 'x'", "a = 'unterminated", 'a IN 1'])(
    'refuses %s as unsupported, naming it',
    (expression) => {
      const error = refusal(() => sqlFilter(expression));
      expect(error.code).toBe('unsupported');
      expect(error.message).toContain(expression);
    },
  );

  it('refuses an expression over 1,024 characters without echoing it', () => {
    const error = refusal(() => sqlFilter(`a = '${'x'.repeat(1100)}'`));
    expect(error.code).toBe('invalid');
    expect(error.message.length).toBeLessThan(100);
  });
});

describe('correlation filters', () => {
  it('take a message when every property they set is equal, application properties included', () => {
    const filter = correlationFilter({ subject: 'Paid', applicationProperties: { region: 'eu' } });
    expect(takes(filter, message({ subject: 'Paid', applicationProperties: { region: 'eu', x: 1 } }))).toBe(
      true,
    );
    expect(takes(filter, message({ subject: 'Paid', applicationProperties: { region: 'us' } }))).toBe(false);
    expect(takes(filter, message({ subject: 'Paid' }))).toBe(false);
  });

  it('must set at least one property', () => {
    expect(refusal(() => correlationFilter({})).code).toBe('invalid');
  });
});

describe("the Bicep's filter of declared subjects", () => {
  it('is a correlation filter on Subject for one subject and sys.Label IN for several', () => {
    expect(subjectsFilter(['Paid'])).toEqual({ kind: 'correlation', subject: 'Paid' });
    const several = subjectsFilter(['Paid', "Owner's"]);
    expect(several).toMatchObject({ kind: 'sql', expression: "sys.Label IN ('Paid', 'Owner''s')" });
    expect(takes(several, message({ subject: "Owner's" }))).toBe(true);
    expect(takes(several, message({ subject: 'Other' }))).toBe(false);
  });

  describe('of a subscription that declares delayedRetry', () => {
    const copy = (retryFor: string, subject = RETRY_SUBJECT): OutgoingMessage =>
      message({
        subject,
        applicationProperties: {
          [RETRY_PROPERTIES.for]: retryFor,
          [RETRY_PROPERTIES.of]: 'm-1',
          [RETRY_PROPERTIES.attempt]: 1,
          [RETRY_PROPERTIES.subject]: 'Paid',
        },
      });

    it('is a SQL filter of its subjects or its own delayed copies, even for one subject', () => {
      expect(
        subjectsFilter(['Paid'], { copies: RETRY_COPIES, for: 'billing.payment-applier' }),
      ).toMatchObject({
        kind: 'sql',
        expression:
          "sys.Label IN ('Paid') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'billing.payment-applier'",
      });
      expect(subjectsFilter(['Paid', "Owner's"], { copies: RETRY_COPIES, for: 'audit' })).toMatchObject({
        kind: 'sql',
        expression:
          "sys.Label IN ('Paid', 'Owner''s') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'audit'",
      });
      // Without retry, exactly the filter of a subscription without delayedRetry.
      expect(subjectsFilter(['Paid'], undefined)).toEqual(subjectsFilter(['Paid']));
    });

    it('takes its subjects and the copies scheduled for it, not a copy for another subscription', () => {
      const one = subjectsFilter(['Paid'], { copies: RETRY_COPIES, for: 'billing.payment-applier' });
      const several = subjectsFilter(['Paid', "Owner's"], { copies: RETRY_COPIES, for: 'audit' });

      expect(takes(one, message({ subject: 'Paid' }))).toBe(true);
      expect(takes(one, message({ subject: 'Other' }))).toBe(false);
      expect(takes(one, copy('billing.payment-applier'))).toBe(true);
      expect(takes(one, copy('audit'))).toBe(false);
      expect(takes(several, message({ subject: "Owner's" }))).toBe(true);
      expect(takes(several, copy('audit'))).toBe(true);
      expect(takes(several, copy('billing.payment-applier'))).toBe(false);
      // The name alone, or the subject alone, is not a copy for it.
      expect(takes(one, copy('billing.payment-applier', 'Other'))).toBe(false);
      expect(takes(one, message({ subject: RETRY_SUBJECT }))).toBe(false);
    });

    it('lets no subscription without delayedRetry take a copy, even one named for it', () => {
      const plain = subjectsFilter(['Paid', 'Refunded']);

      expect(takes(subjectsFilter(['Paid']), copy('billing.payment-applier'))).toBe(false);
      expect(takes(plain, copy('billing.payment-applier'))).toBe(false);
      expect(takes(plain, message({ subject: 'Refunded' }))).toBe(true);
    });
  });
});
