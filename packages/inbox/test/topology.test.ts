import { appFunctions } from '@idempotent-consumers/devkit';
import {
  bindingOf,
  functionNameOf,
  outboxRoutesOf,
  publishersOf,
  topicsPublishedBy,
  type Topology,
  topology,
  validateTopology,
} from '@idempotent-consumers/inbox/internal';
import { loadFunctionApp, type ServiceBusFunction } from '@idempotent-consumers/local-azure';

import { registeredConsumers } from '../../../src/app';

/**
 * Where the function app (functions/*.ts, as the worker loads it) and src/topology.json disagree,
 * both ways, each problem naming what is missing where.
 */
function topologyProblems(functions: readonly ServiceBusFunction[], declared: Topology): string[] {
  const problems: string[] = [];
  const key = (topic?: string, subscription?: string): string => `${topic}/${subscription}`;
  const readers = new Map(functions.map((f) => [key(f.topicName, f.subscriptionName), f]));
  for (const topic of declared.topics) {
    for (const { name } of topic.subscriptions) {
      if (!readers.has(key(topic.name, name))) {
        problems.push(
          `subscription ${name} on topic ${topic.name} is declared in src/topology.json but no function in functions/ reads it; ` +
            `add functions/${functionNameOf(name)}.ts or run npm run new:consumer`,
        );
      }
    }
  }
  const declaredKeys = new Set(
    declared.topics.flatMap((t) => t.subscriptions.map((s) => key(t.name, s.name))),
  );
  for (const f of functions) {
    const where = `function ${f.name} (functions/${f.name}.ts)`;
    if (!declaredKeys.has(key(f.topicName, f.subscriptionName))) {
      problems.push(
        `${where} reads subscription ${f.subscriptionName} on topic ${f.topicName}, which src/topology.json does not declare; ` +
          `declare it there or delete the function file`,
      );
    } else if (f.subscriptionName !== undefined && f.name !== functionNameOf(f.subscriptionName)) {
      problems.push(
        `${where} reads subscription ${f.subscriptionName}; name it ${functionNameOf(f.subscriptionName)} (register it with consumerTrigger)`,
      );
    }
    if (f.connection !== 'ServiceBusConnection') {
      problems.push(
        `${where} uses the connection '${f.connection}'; the Bicep configures ServiceBusConnection only`,
      );
    }
  }
  return problems;
}

describe('the function app against src/topology.json', () => {
  it('reads every declared subscription with the function named after its consumer, and nothing undeclared', async () => {
    const app = await loadFunctionApp(appFunctions());

    expect(topologyProblems(app.serviceBus, topology)).toEqual([]);
    expect(app.serviceBus.length).toBe(topology.topics.flatMap((t) => t.subscriptions).length);
  });

  it('records every consumer it registers, under its own name, which is its subscription', async () => {
    await loadFunctionApp(appFunctions());
    const declared = topology.topics.flatMap((t) => t.subscriptions.map((s) => s.name));

    expect([...registeredConsumers().keys()].sort()).toEqual(declared.sort());
    for (const [name, consumer] of registeredConsumers()) {
      expect([consumer.name, bindingOf(consumer.name).subscription]).toEqual([name, name]);
    }
  });

  it('names what is missing where, both ways', () => {
    const declared: Topology = {
      topics: [
        {
          name: 'orders',
          subscriptions: [
            { name: 'billing.x', subjects: ['S'] },
            { name: 'sales.y', subjects: ['S'] },
          ],
        },
      ],
    };
    const functions: ServiceBusFunction[] = [
      {
        name: 'sales-y',
        connection: 'ServiceBusConnection',
        topicName: 'orders',
        subscriptionName: 'sales.y',
      },
      { name: 'z', connection: 'Other', topicName: 'orders', subscriptionName: 'sales.z' },
      { name: 'wrong', connection: 'ServiceBusConnection', topicName: 'orders', subscriptionName: 'sales.y' },
    ];

    expect(topologyProblems(functions, declared)).toEqual([
      'subscription billing.x on topic orders is declared in src/topology.json but no function in functions/ reads it; add functions/billing-x.ts or run npm run new:consumer',
      'function z (functions/z.ts) reads subscription sales.z on topic orders, which src/topology.json does not declare; declare it there or delete the function file',
      "function z (functions/z.ts) uses the connection 'Other'; the Bicep configures ServiceBusConnection only",
      'function wrong (functions/wrong.ts) reads subscription sales.y; name it sales-y (register it with consumerTrigger)',
    ]);
  });
});

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
    expect(() => bindingOf('nobody')).toThrow("Consumer 'nobody' is not declared in src/topology.json");
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
