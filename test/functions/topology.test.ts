import { appFunctions } from '@idempotent-consumers/devkit';
import { bindingOf, functionNameOf, type Topology } from '@idempotent-consumers/inbox/internal';
import { loadFunctionApp, type ServiceBusFunction } from '@idempotent-consumers/local-azure';

import { registeredConsumers } from '../../src/app';
import { topology } from '../../src/topology';

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
  // Definitions only: registration is what is checked, and no appStart hook (the account checks,
  // which warn without a Cosmos DB) runs.
  it('reads every declared subscription with the function named after its consumer, and nothing undeclared', async () => {
    const app = await loadFunctionApp(appFunctions(), { definitionsOnly: true });

    expect(topologyProblems(app.serviceBus, topology)).toEqual([]);
    expect(app.serviceBus.length).toBe(topology.topics.flatMap((t) => t.subscriptions).length);
  });

  it('records every consumer it registers, under its own name, which is its subscription', async () => {
    await loadFunctionApp(appFunctions(), { definitionsOnly: true });
    const declared = topology.topics.flatMap((t) => t.subscriptions.map((s) => s.name));

    expect([...registeredConsumers().keys()].sort()).toEqual(declared.sort());
    for (const [name, consumer] of registeredConsumers()) {
      expect([consumer.name, bindingOf(consumer.name, topology).subscription]).toEqual([name, name]);
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
