import {
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutgoingMessage,
  relayOutbox,
} from '@idempotent-consumers/inbox/internal';
import { documentsIn } from '@idempotent-consumers/inbox/testing';
import { type FunctionApp, loadFunctionApp, useLocalStack } from '@idempotent-consumers/local-azure';

import { inboxRuntime } from '../../src/app';
import { onHandle, PUBLISHER_PROBE } from '../support/publisherProbe';

/**
 * What `tx.publish` accepts is what the relay sends, to someone: checked when the handler
 * publishes, so that a message the relay would set aside, or that no subscription would take, makes
 * the incoming message poison before anything commits (it is dead-lettered with its reason), never
 * an event lost after the incoming message completed. Through the worker path, on the local Cosmos
 * DB server, with a consumer function registered as the app registers its consumers.
 *
 * The app's own routes come from src/topology.json: here this test's declaration in its place, so
 * that the test holds whatever consumers the project has.
 */
jest.mock('../../src/topology.json', () => ({
  topics: [
    {
      name: 'orders',
      publishers: ['test.publisher'],
      unsubscribedSubjects: ['OrderAudited'],
      subscriptions: [
        { name: 'test.publisher', subjects: ['Test'] },
        { name: 'test.planner', subjects: ['OrderPlaced', 'OrderCancelled'] },
      ],
    },
    { name: 'audit', subscriptions: [{ name: 'test.auditor', subjects: ['Recorded'] }] },
  ],
}));

const stack = useLocalStack();

let app: FunctionApp;
beforeAll(async () => {
  app = await loadFunctionApp(PUBLISHER_PROBE);
});

let accounts = 0;

async function deliverPublishing(message: Partial<OutgoingMessage> & { body?: unknown }): Promise<{
  error: Error | undefined;
  logs: string;
  documents: Record<string, unknown>[];
}> {
  const account = `publish-${++accounts}`;
  onHandle((input, tx) => {
    tx.create({ id: 'balance', amount: input.amount });
    tx.publish({ topic: 'orders', subject: 'OrderPlaced', body: {}, ...message });
  });
  const result = await app.invokeServiceBus('publisherProbe', {
    body: JSON.stringify({ accountId: account, amount: 4 }),
    messageId: `m-${account}`,
    subject: 'Test',
  });
  return {
    error: result.error,
    logs: result.logs.map((line) => line.text).join('\n'),
    documents: await documentsIn(stack.container, `account:${account}`),
  };
}

describe('tx.publish refuses, as poison, what would be lost after the commit', () => {
  it.each([
    [
      'a NaN application property (Number of a non-number)',
      { applicationProperties: { amount: Number('4,00') } },
      /application property "amount" is NaN/,
    ],
    [
      'an Infinity application property',
      { applicationProperties: { ratio: 1 / 0 } },
      /application property "ratio" is Infinity/,
    ],
    [
      'a NaN inside the body',
      { body: { order: { amount: Number('abc') } } },
      /NaN at body\.order\.amount, which JSON cannot keep/,
    ],
    [
      'an Infinity inside an array of the body',
      { body: { lines: [1, -1 / 0] } },
      /-Infinity at body\.lines\[1\]/,
    ],
    ['a function for a body', { body: () => 1 }, /a function at body/],
    ['a symbol inside the body', { body: { tag: Symbol('x') } }, /a symbol at body\.tag/],
    [
      'undefined inside an array (written as null)',
      { body: { lines: [1, undefined] } },
      /undefined in an array at body\.lines\[1\]/,
    ],
    ['a Map (written as {})', { body: { totals: new Map([['a', 1]]) } }, /a Map at body\.totals/],
    ['a Promise (a missing await)', { body: { total: Promise.resolve(3) } }, /a Promise at body\.total/],
    [
      'a class instance (only its own fields would be written)',
      { body: { when: new (class Moment {})() } },
      /a Moment at body\.when/,
    ],
    ['a BigInt', { body: { cents: BigInt(5) } }, /a bigint at body\.cents/],
  ])('%s', async (_what, message, reason) => {
    const { error, logs, documents } = await deliverPublishing(message);

    expect(error?.name).toBe('PoisonMessageError');
    expect(error?.message).toMatch(reason);
    expect(logs).toContain('"reason":"invalid-outgoing-message"');
    // Nothing written: no effect, no marker, no outbox document.
    expect(documents).toEqual([]);
  });

  it('takes what JSON keeps as it is: dates through toJSON, undefined properties left out, null, nested plain data', async () => {
    const at = new Date('2026-12-01T10:00:00.120Z');
    const { error, documents } = await deliverPublishing({
      body: { at, note: undefined, lines: [{ sku: 'A', quantity: 2 }], discount: null },
      applicationProperties: { tenant: 'contoso', priority: 2, urgent: false },
    });
    const outbox = documents.find((d) => d.type === OUTBOX_TYPE) as OutboxDocument | undefined;
    const report = await relayOutbox(outbox ? [outbox] : [], {
      container: stack.container,
      publisher: { send: () => Promise.resolve([]), close: () => Promise.resolve() },
      now: () => new Date(),
      settings: inboxRuntime().settings,
    });

    expect(error).toBeUndefined();
    expect(JSON.parse(outbox?.message ?? '{}')).toMatchObject({
      body: { at: '2026-12-01T10:00:00.120Z', lines: [{ sku: 'A', quantity: 2 }], discount: null },
      applicationProperties: { tenant: 'contoso', priority: 2, urgent: false },
    });
    // What tx.publish accepted, the relay sends.
    expect(report).toMatchObject({ sent: 1, marked: 1, unsendable: 0 });
  });

  it('refuses a subject no subscription of the topic takes (a typo), naming those they take', async () => {
    const { error, documents } = await deliverPublishing({ subject: 'OrderPlacd' });

    expect(error?.name).toBe('PoisonMessageError');
    expect(error?.message).toContain(
      'no subscription of the topic "orders" takes the subject "OrderPlacd" (they take: OrderAudited, OrderCancelled, OrderPlaced, Test)',
    );
    expect(error?.message).toContain('"unsubscribedSubjects" in src/topology.json');
    expect(documents).toEqual([]);
  });

  it('publishes a subject the topology declares unsubscribed on purpose', async () => {
    const { error, documents } = await deliverPublishing({ subject: 'OrderAudited' });

    expect(error).toBeUndefined();
    expect(documents.filter((d) => d.type === OUTBOX_TYPE)).toMatchObject([
      { subject: 'OrderAudited', status: 'pending' },
    ]);
  });

  it('refuses a topic the consumer is not a publisher of', async () => {
    const { error, documents } = await deliverPublishing({ topic: 'audit', subject: 'Recorded' });

    expect(error?.message).toContain('the topic "audit" does not list test.consumer among its publishers');
    expect(documents).toEqual([]);
  });
});

describe("the app's routes", () => {
  it('are src/topology.json: the topics a consumer publishes on, with the subjects their subscriptions take', () => {
    const routes = inboxRuntime().outboxRoutes;

    expect(routes?.('test.publisher')).toEqual(
      new Map([['orders', new Set(['Test', 'OrderPlaced', 'OrderCancelled', 'OrderAudited'])]]),
    );
    // A consumer not listed among a topic's publishers may publish nowhere.
    expect(routes?.('test.auditor')).toEqual(new Map());
  });
});
