// emulators/servicebus-config.json, the Service Bus emulator's Config.json, must hold what
// src/topology.json declares with the settings infra/ gives Azure, within the limits the emulator
// documents (Config-schema.json and "Usage quotas" of the emulator overview), and the committed file
// must be what the generator writes today.

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { appTopology } from '@idempotent-consumers/devkit';
import { parseDurationSeconds, type Topology } from '@idempotent-consumers/inbox/internal';

import { PROJECT_ROOT } from '../../src/cli/project';
import {
  AZURE_ENTITY_SETTINGS,
  CONFIG_PATH,
  type EmulatorConfig,
  emulatorConfig,
  type EmulatorTopic,
  renderEmulatorConfig,
} from '../../src/emulators/generateConfig';

const topology = appTopology();

const seconds = (duration: string): number => parseDurationSeconds(duration, 'test');

/** The emulator's limits as its documentation states them, independently of the generator's table. */
const documented = {
  namespace: 'sbemulatorns',
  duplicateDetectionWindow: { min: seconds('PT5S'), max: seconds('PT5M') },
  subscriptionLockDuration: { min: seconds('PT1M'), max: seconds('PT5M') },
  messageTimeToLive: { min: seconds('PT5M'), max: seconds('PT1H') },
  maxDeliveryCount: { min: 1, max: 10 },
  entities: 50,
  subscriptionsPerTopic: 50,
  name: /^[A-Za-z0-9]$|^[A-Za-z0-9][\w./-]*[A-Za-z0-9]$/,
};

const committedText = readFileSync(CONFIG_PATH, 'utf8');
const committed = JSON.parse(committedText) as EmulatorConfig;
const topicsOf = (config: EmulatorConfig): EmulatorTopic[] =>
  config.UserConfig.Namespaces.flatMap((namespace) => namespace.Topics);

function bicepDefault(pattern: RegExp): string {
  const match = pattern.exec(readFileSync(path.join(PROJECT_ROOT, 'infra', 'main.bicep'), 'utf8'));
  if (!match?.[1]) throw new Error(`infra/main.bicep has no match for ${pattern}`);
  return match[1];
}

describe('emulators/servicebus-config.json', () => {
  it('is what `npm run emulators:config` generates from src/topology.json today', () => {
    const generated = renderEmulatorConfig(emulatorConfig().config);

    expect(committedText).toBe(generated);
  });

  it('declares every declared topic and subscription, and nothing else, in the one namespace', () => {
    expect(committed.UserConfig.Namespaces.map((namespace) => namespace.Name)).toEqual([
      documented.namespace,
    ]);
    expect(committed.UserConfig.Namespaces[0]?.Queues).toEqual([]);
    expect(topicsOf(committed).map((topic) => [topic.Name, topic.Subscriptions.map((s) => s.Name)])).toEqual(
      topology.topics.map((topic) => [topic.name, topic.subscriptions.map((s) => s.name)]),
    );
  });

  it('filters each subscription on exactly the subjects it declares, with one rule as in Azure', () => {
    for (const topic of topology.topics) {
      for (const declared of topic.subscriptions) {
        const subscription = topicsOf(committed)
          .find((candidate) => candidate.Name === topic.name)
          ?.Subscriptions.find((candidate) => candidate.Name === declared.name);
        const retries =
          declared.delayedRetry === undefined
            ? ''
            : ` OR sys.Label = 'inbox.retry' AND inboxRetryFor = '${declared.name}'`;
        const filter =
          declared.subjects.length === 1 && retries === ''
            ? { FilterType: 'Correlation', CorrelationFilter: { Label: declared.subjects[0] } }
            : {
                FilterType: 'Sql',
                SqlFilter: {
                  SqlExpression: `sys.Label IN (${declared.subjects.map((s) => `'${s}'`).join(', ')})${retries}`,
                },
              };

        expect({
          subscription: declared.name,
          rules: subscription?.Rules.map((rule) => rule.Properties),
        }).toEqual({ subscription: declared.name, rules: [filter] });
      }
    }
  });

  it('turns duplicate detection on for every topic', () => {
    for (const topic of topicsOf(committed)) {
      expect(topic.Properties.RequiresDuplicateDetection).toBe(true);
    }
  });

  it('gives every subscription the Azure lock duration, delivery count and dead-lettering on expiry', () => {
    for (const subscription of topicsOf(committed).flatMap((topic) => topic.Subscriptions)) {
      expect(subscription.Properties).toMatchObject({
        LockDuration: 'PT1M',
        MaxDeliveryCount: 10,
        DeadLetteringOnMessageExpiration: true,
        RequiresSession: false,
      });
    }
  });

  it('starts from the defaults infra/main.bicep deploys to Azure', () => {
    expect(AZURE_ENTITY_SETTINGS).toEqual({
      lockDuration: bicepDefault(/^param serviceBusLockDuration string = '([^']+)'$/m),
      maxDeliveryCount: Number(bicepDefault(/^param serviceBusMaxDeliveryCount int = (\d+)$/m)),
      messageTimeToLive: bicepDefault(/^param serviceBusMessageTtl string = '([^']+)'$/m),
      duplicateDetectionWindow: bicepDefault(/^var duplicateDetectionWindow = '([^']+)'$/m),
    });
  });

  it('stays within every limit the emulator documents', () => {
    const topics = topicsOf(committed);
    const within = (value: number, range: { min: number; max: number }): boolean =>
      value >= range.min && value <= range.max;

    expect(topics.length).toBeLessThanOrEqual(documented.entities);
    for (const topic of topics) {
      expect(topic.Name).toMatch(documented.name);
      expect(topic.Subscriptions.length).toBeLessThanOrEqual(documented.subscriptionsPerTopic);
      expect(
        within(
          seconds(topic.Properties.DuplicateDetectionHistoryTimeWindow),
          documented.duplicateDetectionWindow,
        ),
      ).toBe(true);
      expect(within(seconds(topic.Properties.DefaultMessageTimeToLive), documented.messageTimeToLive)).toBe(
        true,
      );
      for (const subscription of topic.Subscriptions) {
        expect(subscription.Name).toMatch(documented.name);
        expect(
          within(seconds(subscription.Properties.LockDuration), documented.subscriptionLockDuration),
        ).toBe(true);
        expect(within(subscription.Properties.MaxDeliveryCount, documented.maxDeliveryCount)).toBe(true);
        expect(
          within(seconds(subscription.Properties.DefaultMessageTimeToLive), documented.messageTimeToLive),
        ).toBe(true);
        for (const rule of subscription.Rules) {
          expect(rule.Name).toMatch(documented.name);
        }
      }
    }
  });

  it('keeps as much of Azure as the emulator allows: the window and the TTL at its maximum', () => {
    const [topic] = topicsOf(
      emulatorConfig({ topics: [{ name: 'orders', subscriptions: [{ name: 'audit', subjects: ['A'] }] }] })
        .config,
    );

    expect(topic?.Properties.DuplicateDetectionHistoryTimeWindow).toBe('PT5M');
    expect(topic?.Properties.DefaultMessageTimeToLive).toBe('PT1H');
    expect(topic?.Subscriptions[0]?.Properties.DefaultMessageTimeToLive).toBe('PT1H');
  });
});

describe('emulatorConfig()', () => {
  const orders = (subscriptions: Topology['topics'][number]['subscriptions']): Topology => ({
    topics: [{ name: 'orders', subscriptions }],
  });

  it('says which Azure values the emulator cannot take, and only those', () => {
    const { notes } = emulatorConfig();

    expect(notes).toEqual([
      expect.stringMatching(/^duplicate detection window: PT1H in Azure, PT5M in the emulator/),
      expect.stringMatching(/^message time to live: P14D in Azure, PT1H in the emulator/),
    ]);
  });

  it('clamps a delivery count and a lock duration the emulator refuses, and says so', () => {
    const { config, notes } = emulatorConfig(orders([{ name: 'audit', subjects: ['A'] }]), {
      ...AZURE_ENTITY_SETTINGS,
      lockDuration: 'PT10S',
      maxDeliveryCount: 50,
    });
    const subscription = topicsOf(config)[0]?.Subscriptions[0];

    expect(subscription?.Properties).toMatchObject({ LockDuration: 'PT1M', MaxDeliveryCount: 10 });
    expect(notes).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^lock duration: PT10S in Azure, PT1M in the emulator/),
        expect.stringMatching(/^max delivery count: 50 in Azure, 10 in the emulator/),
      ]),
    );
  });

  it('filters several subjects with the SQL expression the Bicep deploys, quotes escaped', () => {
    const { config } = emulatorConfig(
      orders([{ name: 'audit', subjects: ['OrderCreated', "Order's Note"] }]),
    );

    expect(topicsOf(config)[0]?.Subscriptions[0]?.Rules.map((rule) => rule.Properties)).toEqual([
      { FilterType: 'Sql', SqlFilter: { SqlExpression: "sys.Label IN ('OrderCreated', 'Order''s Note')" } },
    ]);
  });

  it('gives a subscription with delayedRetry the SQL filter the Bicep deploys, which also takes its own delayed copies', () => {
    const { config } = emulatorConfig(
      orders([
        {
          name: 'billing.one',
          subjects: ['OrderCreated'],
          delayedRetry: { attempts: 3, firstDelaySeconds: 30 },
        },
        {
          name: 'billing.two',
          subjects: ['OrderCreated', "Order's Note"],
          delayedRetry: { attempts: 1, firstDelaySeconds: 5 },
        },
        { name: 'billing.plain', subjects: ['OrderCreated'] },
      ]),
    );

    expect(topicsOf(config)[0]?.Subscriptions.map((s) => s.Rules.map((rule) => rule.Properties))).toEqual([
      [
        {
          FilterType: 'Sql',
          SqlFilter: {
            SqlExpression:
              "sys.Label IN ('OrderCreated') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'billing.one'",
          },
        },
      ],
      [
        {
          FilterType: 'Sql',
          SqlFilter: {
            SqlExpression:
              "sys.Label IN ('OrderCreated', 'Order''s Note') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'billing.two'",
          },
        },
      ],
      [{ FilterType: 'Correlation', CorrelationFilter: { Label: 'OrderCreated' } }],
    ]);
  });

  it('refuses declarations the emulator cannot hold, naming each problem', () => {
    const tooMany = Array.from({ length: 51 }, (_, i) => ({
      name: `s${i}`,
      subjects: ['A'],
    }));

    expect(() => emulatorConfig(orders(tooMany))).toThrow(
      "topic 'orders' has 51 subscriptions; the emulator allows 50",
    );
    expect(() => emulatorConfig(orders([{ name: 'audit-', subjects: ['A'] }]))).toThrow(
      "subscription 'orders/audit-': the emulator's names start and end with a letter or digit",
    );
  });
});
