import {
  bindingOf,
  functionNameOf,
  outboxRoutesOf,
  publishersOf,
  topicsPublishedBy,
  type Topology,
  validateTopology,
} from '@idempotent-consumers/inbox/internal';

/** The topology schema and its checks (./src/topology.ts); the app's own declaration is checked by test/functions/topology.test.ts. */
describe('src/topology.json', () => {
  it('binds each consumer to its topic, its subscription (its own name) and subjects', () => {
    const declared: Topology = {
      topics: [
        {
          name: 'events',
          subscriptions: [{ name: 'billing.payment-applier', subjects: ['PaymentReceived'] }],
        },
      ],
    };

    expect(bindingOf('billing.payment-applier', declared)).toEqual({
      topic: 'events',
      subscription: 'billing.payment-applier',
      subjects: ['PaymentReceived'],
    });
    expect(functionNameOf('billing.payment-applier')).toBe('billing-payment-applier');
  });

  it('says where to declare an unknown consumer', () => {
    expect(() => bindingOf('nobody', { topics: [] })).toThrow(
      "Consumer 'nobody' is not declared in src/topology.json",
    );
  });

  it('accepts a declaration without consumers', () => {
    expect(validateTopology({ topics: [] })).toEqual({ topics: [] });
  });

  it('refuses duplicates, function name clashes, invalid names and missing filters', () => {
    const invalid = {
      topics: [
        {
          name: 'events',
          subscriptions: [
            { name: 'a.b', subjects: ['S'] },
            { name: 'a.b', subjects: [] },
            { name: 'a-b', subjects: ['S'] },
            { name: 'a.b-', subjects: ['S'] },
          ],
        },
      ],
    };

    expect(() => validateTopology(invalid)).toThrow(
      [
        'src/topology.json is invalid:',
        "  - consumer 'a.b' is declared twice",
        "  - subscription 'a.b' needs at least one subject to filter on",
        "  - consumers 'a.b' and 'a-b' would both be the function 'a-b'",
        "  - subscription 'a.b-' is not a valid Service Bus name",
      ].join('\n'),
    );
  });

  describe('publishers', () => {
    const declared: Topology = {
      topics: [
        {
          name: 'orders',
          publishers: ['sales.order-taker'],
          subscriptions: [{ name: 'stock.reserver', subjects: ['OrderCreated'] }],
        },
        {
          name: 'stock-events',
          publishers: ['stock.reserver', 'sales.order-taker'],
          subscriptions: [{ name: 'shipping.planner', subjects: ['StockReserved'] }],
        },
        { name: 'intake', subscriptions: [{ name: 'sales.order-taker', subjects: ['Basket'] }] },
      ],
    };

    it('are the consumers a topic lists, and the topics a consumer is listed on', () => {
      expect(validateTopology(declared)).toBe(declared);
      expect(publishersOf('stock-events', declared)).toEqual(['stock.reserver', 'sales.order-taker']);
      expect(publishersOf('intake', declared)).toEqual([]);
      expect(publishersOf('nowhere', declared)).toEqual([]);
      expect(topicsPublishedBy('sales.order-taker', declared)).toEqual(['orders', 'stock-events']);
      expect(topicsPublishedBy('shipping.planner', declared)).toEqual([]);
    });

    it('must be declared consumers, each once per topic, in an array', () => {
      const invalid = {
        topics: [
          {
            name: 'orders',
            publishers: ['stock.reserver', 'stock.nobody', 'stock.reserver', 7],
            subscriptions: [{ name: 'stock.reserver', subjects: ['OrderCreated'] }],
          },
          { name: 'other', publishers: 'stock.reserver', subscriptions: [] },
        ],
      };

      expect(() => validateTopology(invalid)).toThrow(
        [
          'src/topology.json is invalid:',
          `  - topic 'orders': publisher "stock.nobody" is not a consumer declared here`,
          `  - topic 'orders': publisher 'stock.reserver' is listed twice`,
          `  - topic 'orders': publisher 7 is not a consumer declared here`,
          `  - topic 'other': "publishers" must be an array of consumer names`,
        ].join('\n'),
      );
    });
  });

  describe('outbox routes and unsubscribed subjects', () => {
    const declared: Topology = {
      topics: [
        {
          name: 'orders',
          publishers: ['sales.order-taker'],
          unsubscribedSubjects: ['OrderAudited'],
          subscriptions: [
            { name: 'stock.reserver', subjects: ['OrderCreated'] },
            { name: 'billing.invoicer', subjects: ['OrderCreated', 'OrderCancelled'] },
          ],
        },
        { name: 'intake', subscriptions: [{ name: 'sales.order-taker', subjects: ['Basket'] }] },
      ],
    };

    it('are, per topic a consumer publishes on, the subjects a subscription takes and those declared unsubscribed', () => {
      expect(validateTopology(declared)).toBe(declared);
      expect(outboxRoutesOf('sales.order-taker', declared)).toEqual(
        new Map([['orders', new Set(['OrderCreated', 'OrderCancelled', 'OrderAudited'])]]),
      );
      expect(outboxRoutesOf('stock.reserver', declared)).toEqual(new Map());
    });

    it('must be subject names, each once, that no subscription of the topic takes', () => {
      const invalid = {
        topics: [
          {
            name: 'orders',
            unsubscribedSubjects: ['OrderCreated', 'Fine', 'Fine', '9lives', 7],
            subscriptions: [{ name: 'stock.reserver', subjects: ['OrderCreated'] }],
          },
          { name: 'other', unsubscribedSubjects: 'Audited', subscriptions: [] },
        ],
      };

      expect(() => validateTopology(invalid)).toThrow(
        [
          'src/topology.json is invalid:',
          "  - topic 'orders': subject 'OrderCreated' is declared unsubscribed, but the subscription 'stock.reserver' takes it",
          "  - topic 'orders': unsubscribed subject 'Fine' is listed twice",
          `  - topic 'orders': unsubscribed subject "9lives" is not a subject name`,
          "  - topic 'orders': unsubscribed subject 7 is not a subject name",
          `  - topic 'other': "unsubscribedSubjects" must be an array of subjects`,
        ].join('\n'),
      );
    });
  });
});
