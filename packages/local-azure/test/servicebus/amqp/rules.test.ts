import { isServiceBusError, type ServiceBusMessage } from '@azure/service-bus';

import { ORDERS, PAYMENTS, type PeerFixture, receive, startPeer, TOPIC } from '../../../src/testing/peer';
import { RETRY_COPIES, RETRY_PROPERTIES, RETRY_SUBJECT } from '../../support/retryCopies';

/**
 * A subscription's rules as Service Bus has them, through @azure/service-bus's rule manager: the
 * $Default rule the Bicep defines from the declared subjects, rules added and removed at run time,
 * and a message copied to a subscription when any one of its rules takes it.
 */
const AUDIT = 'audit';
let fixture: PeerFixture;

beforeEach(async () => {
  fixture = await startPeer({
    retryCopies: RETRY_COPIES,
    topology: {
      topics: [
        {
          name: TOPIC,
          subscriptions: [
            { name: PAYMENTS, subjects: ['PaymentReceived'] },
            { name: ORDERS, subjects: ['OrderCreated'] },
            { name: AUDIT, subjects: ['PaymentReceived', "Owner's Note"] },
          ],
        },
      ],
    },
  });
});
afterEach(async () => {
  await fixture.stop();
});

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const collected: T[] = [];
  for await (const item of items) collected.push(item);
  return collected;
}

async function bodiesOf(subscription: string, count: number): Promise<unknown[]> {
  const receiver = fixture.client.createReceiver(TOPIC, subscription, { receiveMode: 'receiveAndDelete' });
  const received = await receive(receiver, count);
  // Nothing more is waiting: the filter took exactly these.
  const more = await receiver.peekMessages(10);
  await receiver.close();
  return [...received.map((m) => m.body as unknown), ...more.map((m) => `extra: ${String(m.body)}`)];
}

describe('the $Default rule', () => {
  it('is the Bicep filter of the declared subjects: a correlation filter for one, sys.Label IN for several', async () => {
    const payments = await all(fixture.client.createRuleManager(TOPIC, PAYMENTS).listRules());
    const audit = await all(fixture.client.createRuleManager(TOPIC, AUDIT).listRules());

    expect(payments.map((r) => [r.name, r.filter])).toEqual([
      ['$Default', expect.objectContaining({ subject: 'PaymentReceived', correlationId: null })],
    ]);
    expect(audit.map((r) => [r.name, r.filter])).toEqual([
      ['$Default', { sqlExpression: "sys.Label IN ('PaymentReceived', 'Owner''s Note')" }],
    ]);
  });

  it('takes what the declared subjects name, quotes included, and nothing else', async () => {
    await fixture.client.createSender(TOPIC).sendMessages([
      { body: 'paid', subject: 'PaymentReceived' },
      { body: 'note', subject: "Owner's Note" },
      { body: 'order', subject: 'OrderCreated' },
    ]);

    expect(await bodiesOf(AUDIT, 2)).toEqual(['paid', 'note']);
    expect(await bodiesOf(ORDERS, 1)).toEqual(['order']);
  });

  it('can be replaced: without it the subscription takes only what its other rules take, and without any rule nothing', async () => {
    const rules = fixture.client.createRuleManager(TOPIC, ORDERS);
    await rules.deleteRule('$Default');
    const sender = fixture.client.createSender(TOPIC);
    await sender.sendMessages({ body: 'order', subject: 'OrderCreated' });
    expect(fixture.peer.broker.subscription(TOPIC, ORDERS).entity.activeCount).toBe(0);

    await rules.createRule('everything', { sqlExpression: '1 = 1' });
    expect((await all(rules.listRules())).map((r) => [r.name, r.filter])).toEqual([
      ['everything', { sqlExpression: '1 = 1' }],
    ]);
    await sender.sendMessages([{ body: 'a', subject: 'X' }, { body: 'b' }]);
    expect(await bodiesOf(ORDERS, 2)).toEqual(['a', 'b']);
  });
});

describe('the $Default rule of a subscription that declares delayedRetry', () => {
  it('is the Bicep filter that also takes the delayed copies for it, which reach it and no other subscription', async () => {
    fixture.peer.broker.declare({
      topics: [
        {
          name: TOPIC,
          subscriptions: [
            {
              name: PAYMENTS,
              subjects: ['PaymentReceived'],
              delayedRetry: { attempts: 3, firstDelaySeconds: 30 },
            },
            { name: ORDERS, subjects: ['OrderCreated'] },
            { name: AUDIT, subjects: ['PaymentReceived', "Owner's Note"] },
          ],
        },
      ],
    });
    const copy = (body: string, retryFor: string): ServiceBusMessage => ({
      body,
      subject: RETRY_SUBJECT,
      applicationProperties: { [RETRY_PROPERTIES.for]: retryFor, [RETRY_PROPERTIES.of]: 'm-1' },
    });

    expect(
      (await all(fixture.client.createRuleManager(TOPIC, PAYMENTS).listRules())).map((r) => [
        r.name,
        r.filter,
      ]),
    ).toEqual([
      [
        '$Default',
        {
          sqlExpression: `sys.Label IN ('PaymentReceived') OR sys.Label = 'inbox.retry' AND inboxRetryFor = '${PAYMENTS}'`,
        },
      ],
    ]);
    await fixture.client
      .createSender(TOPIC)
      .sendMessages([
        copy('copy for payments', PAYMENTS),
        copy('copy for orders', ORDERS),
        copy('copy for audit', AUDIT),
        { body: 'paid', subject: 'PaymentReceived' },
      ]);

    expect(await bodiesOf(PAYMENTS, 2)).toEqual(['copy for payments', 'paid']);
    expect(await bodiesOf(AUDIT, 1)).toEqual(['paid']);
    expect(await fixture.client.createReceiver(TOPIC, ORDERS).peekMessages(10)).toEqual([]);
  });
});

describe('rules added and removed with the rule manager', () => {
  it('copies a message to the subscription when any one rule takes it, and stops once the rule is removed', async () => {
    const rules = fixture.client.createRuleManager(TOPIC, PAYMENTS);
    await rules.createRule('refunds', { subject: 'RefundIssued', applicationProperties: { region: 'eu' } });
    await rules.createRule('big', { sqlExpression: "amount IN (100, 200) AND currency = 'EUR'" });
    const sender = fixture.client.createSender(TOPIC);

    await sender.sendMessages([
      { body: 'paid', subject: 'PaymentReceived' },
      { body: 'refund eu', subject: 'RefundIssued', applicationProperties: { region: 'eu' } },
      { body: 'refund us', subject: 'RefundIssued', applicationProperties: { region: 'us' } },
      { body: 'big eur', subject: 'Other', applicationProperties: { amount: 200, currency: 'EUR' } },
      { body: 'big usd', subject: 'Other', applicationProperties: { amount: 200, currency: 'USD' } },
    ]);
    expect(await bodiesOf(PAYMENTS, 3)).toEqual(['paid', 'refund eu', 'big eur']);

    await rules.deleteRule('refunds');
    await sender.sendMessages({
      body: 'refund eu',
      subject: 'RefundIssued',
      applicationProperties: { region: 'eu' },
    });
    expect(await fixture.client.createReceiver(TOPIC, PAYMENTS).peekMessages(10)).toEqual([]);
  });

  it('lists every rule with its filter, in the order they were added, one page at a time', async () => {
    const rules = fixture.client.createRuleManager(TOPIC, PAYMENTS);
    await rules.createRule('by-correlation', {
      correlationId: 'c-1',
      to: 'billing',
      contentType: 'application/json',
    });
    await rules.createRule('never', { sqlExpression: '1=0' });

    const listed = await all(rules.listRules());
    expect(listed.map((r) => r.name)).toEqual(['$Default', 'by-correlation', 'never']);
    expect(listed[1]!.filter).toEqual(
      expect.objectContaining({ correlationId: 'c-1', to: 'billing', contentType: 'application/json' }),
    );
    expect(listed[2]!.filter).toEqual({ sqlExpression: '1=0' });

    const pages: string[][] = [];
    for await (const page of rules.listRules().byPage({ maxPageSize: 2 }))
      pages.push(page.map((r) => r.name));
    expect(pages).toEqual([['$Default', 'by-correlation'], ['never']]);
  });

  it('refuses a second rule of the same name, and removing a rule that is not there', async () => {
    const rules = fixture.client.createRuleManager(TOPIC, PAYMENTS);
    await rules.createRule('once', { subject: 'A' });

    const codes = await Promise.all([
      rules.createRule('ONCE', { subject: 'B' }).catch((e: unknown) => e),
      rules.deleteRule('missing').catch((e: unknown) => e),
    ]);
    expect(codes.map((e) => (isServiceBusError(e) ? e.code : String(e)))).toEqual([
      'MessagingEntityAlreadyExists',
      'MessagingEntityNotFound',
    ]);
  });

  it('refuses, with the reason, a SQL filter it cannot evaluate and a rule action, and keeps the rules it had', async () => {
    const rules = fixture.client.createRuleManager(TOPIC, PAYMENTS);

    const refusals = await Promise.all([
      rules.createRule('nested', { sqlExpression: "(a = 1 OR b = 2) AND c = 'x'" }).catch((e: unknown) => e),
      rules.createRule('like', { sqlExpression: "sys.Label LIKE 'Pay%'" }).catch((e: unknown) => e),
      rules
        .createRule('action', { sqlExpression: '1=1' }, { sqlExpression: "SET a = 'b'" })
        .catch((e: unknown) => e),
      rules.createRule('x'.repeat(51), { subject: 'A' }).catch((e: unknown) => e),
    ]);

    expect(refusals.map((e) => (e as Error).message)).toEqual([
      expect.stringContaining("cannot evaluate '(a = 1 OR b = 2) AND c = 'x''"),
      expect.stringContaining("cannot evaluate 'sys.Label LIKE 'Pay%''"),
      expect.stringContaining('does not run rule actions'),
      expect.stringContaining('1 to 50 characters'),
    ]);
    expect((await all(rules.listRules())).map((r) => r.name)).toEqual(['$Default']);
  });

  it('keeps a rule added at run time across a redeployment, which redefines only $Default', async () => {
    await fixture.client.createRuleManager(TOPIC, PAYMENTS).createRule('extra', { subject: 'Extra' });
    fixture.peer.broker.declare({
      topics: [
        {
          name: TOPIC,
          subscriptions: [
            { name: PAYMENTS, subjects: ['PaymentReceived', 'PaymentReversed'] },
            { name: ORDERS, subjects: ['OrderCreated'] },
            { name: AUDIT, subjects: ['PaymentReceived', "Owner's Note"] },
          ],
        },
      ],
    });

    const rules = await all(fixture.client.createRuleManager(TOPIC, PAYMENTS).listRules());
    expect(rules.map((r) => [r.name, r.filter])).toEqual([
      ['$Default', { sqlExpression: "sys.Label IN ('PaymentReceived', 'PaymentReversed')" }],
      ['extra', expect.objectContaining({ subject: 'Extra' })],
    ]);
  });
});
