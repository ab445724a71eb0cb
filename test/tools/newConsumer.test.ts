import { UsageError } from '../../cli/errors';
import { checkedRequest } from '../../tools/newConsumer';

/** The refusals of npm run new:consumer, before anything is written (test/scaffold runs the tool itself). */
const declared = {
  topics: [{ name: 'orders', subscriptions: [{ name: 'sales.order-taker', subjects: ['OrderPlaced'] }] }],
};
const request = { name: 'shipping.parcel-counter', topic: 'shipping', subject: 'ParcelShipped' };
const refusal = (values: Record<string, string>): string => {
  try {
    checkedRequest(values, declared);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message.split('\nUsage:')[0] ?? '';
  }
  throw new Error('not refused');
};

describe('new:consumer refuses', () => {
  it.each([
    ['a name without an area', { name: 'counter' }, /--name "counter" is not a consumer name/],
    ['upper case', { name: 'Shipping.Counter' }, /is not a consumer name/],
    ['a name longer than a subscription name may be', { name: `a.${'b'.repeat(49)}` }, /3 to 50 characters/],
    [
      'a topic Service Bus refuses',
      { topic: 'orders/eu' },
      /--topic "orders\/eu" is not a Service Bus topic name/,
    ],
    ['a subject that is not an event name', { subject: 'parcel shipped' }, /--subject "parcel shipped"/],
    ['an unknown kind', { kind: 'saga' }, /--kind "saga": inbox or versioned/],
    ['a declared consumer', { name: 'sales.order-taker' }, /already declares it, on the topic orders/],
    [
      'a name whose function is taken',
      { name: 'sales-order.taker' },
      /its function, sales-order-taker, is already sales.order-taker's/,
    ],
  ])('%s', (_case, change, message) => {
    expect(refusal({ ...request, ...change })).toMatch(message);
  });

  it('missing flags, naming each', () => {
    expect(refusal({ name: request.name })).toBe('Missing --topic, --subject.');
  });

  it('and accepts a new consumer, inbox by default, on a new or an existing topic', () => {
    expect(checkedRequest(request, declared)).toEqual({ ...request, kind: 'inbox' });
    expect(checkedRequest({ ...request, topic: 'orders', kind: 'versioned' }, declared).kind).toBe(
      'versioned',
    );
  });

  it('bounds the echo of a long value', () => {
    expect(refusal({ ...request, subject: 'x'.repeat(5000) }).length).toBeLessThan(300);
  });
});
