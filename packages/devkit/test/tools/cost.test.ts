// npm run cost's model against what the local servers count for the same work: the request units
// the local Cosmos DB server charges when each outcome runs through the real library, and the sends,
// filter evaluations, receives and settlements of the local Service Bus broker for one event of
// each subject. The server's charges are themselves a model of Azure's (packages/local-azure/src/cosmos/requestCharge.ts),
// so this checks that the cost model counts the requests and sizes the library really makes.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { type Container, CosmosClient } from '@azure/cosmos';
import {
  type OutboxDocument,
  type OutboxMessage,
  type OutboxPublisher,
  processDelivery,
  relayOutbox,
  runPurge,
} from '@idempotent-consumers/inbox/internal';
import { delivery, dependencies, OUTBOX_SETTINGS, testConsumer } from '@idempotent-consumers/inbox/testing';
import {
  Broker,
  ensureAppContainer,
  PEER_TOPOLOGY,
  Subscription,
  useLocalStack,
  virtualClock,
} from '@idempotent-consumers/local-azure';

import { PROJECT_ROOT } from '../../src/cli/project';
import { runTool } from '../../src/cli/tool';
import { captured } from '../../src/testing/tools';
import { costReport, main } from '../../src/tools/cost';
import { cosmosInputs, type TypicalEvent } from '../../src/tools/cost/inputs';
import {
  cosmosCosts,
  RU_RULES,
  SERVICE_BUS_THROTTLING_SOURCE,
  serviceBusOperations,
  STANDARD_CREDITS_PER_SECOND,
} from '../../src/tools/cost/model';
import { PRICES } from '../../src/tools/cost/prices';

/**
 * The topology the model is checked on: a fixed one, so that the checks do not change with
 * src/topology.json (npm run new:consumer, npm run remove:samples, which leaves no subject at all).
 */
const topology = PEER_TOPOLOGY;

/** The model may differ from the server's charge by this much: 10 %, or 0.5 RU on small charges. */
const TOLERANCE = { relative: 0.1, absoluteRu: 0.5 };
const within = (modelled: number, charged: number): boolean =>
  Math.abs(modelled - charged) <= Math.max(TOLERANCE.absoluteRu, TOLERANCE.relative * charged);

const stack = useLocalStack();

const EVENT: TypicalEvent = {
  eventBytes: 300,
  handlerReads: 1,
  businessWrites: 1,
  businessDocumentBytes: 500,
  publishes: 1,
};

/** A business document whose JSON body is `bytes` long. */
const documentOf = (id: string, bytes: number): { id: string; padding: string } => {
  const empty = Buffer.byteLength(JSON.stringify({ id, padding: '', partitionKey: 'account:acct-0000' }));
  return { id, padding: 'x'.repeat(bytes - empty) };
};

/** The consumer the model describes: reads a document, writes one, publishes one event. */
const typicalConsumer = testConsumer(async (_message, tx) => {
  await tx.read('balance');
  tx.upsert(documentOf('balance', EVENT.businessDocumentBytes));
  tx.publish({
    topic: 'business-events',
    subject: 'Published',
    body: { padding: 'x'.repeat(EVENT.eventBytes - 15) },
  });
});

/** What the test's own client has spent on the server so far. */
let client: CosmosClient;
const AGENT = 'cost-model-test';
const spent = (): number =>
  stack.server.usageByClient().find((usage) => usage.userAgent.includes(AGENT))?.requestCharge ?? 0;
async function charged(work: () => Promise<unknown>): Promise<number> {
  const before = spent();
  await work();
  return Math.round((spent() - before) * 100) / 100;
}

beforeAll(() => {
  client = new CosmosClient({
    endpoint: stack.server.endpoint,
    key: stack.server.key,
    userAgentSuffix: AGENT,
  });
});
afterAll(() => client.dispose());

const modelled = Object.fromEntries(
  cosmosCosts(cosmosInputs(EVENT, topology)).map((row) => [row.outcome, row.requestUnits]),
);

describe('Cosmos DB request units per outcome, against the local server', () => {
  let accounts = 0;
  const account = (): string => `acct-${String(++accounts).padStart(4, '0')}`;
  const container = (): Container => client.database('app').container('state');

  async function seeded(accountId: string): Promise<void> {
    await container().items.create({
      ...documentOf('balance', EVENT.businessDocumentBytes),
      partitionKey: `account:${accountId}`,
    });
  }

  const run = (accountId: string, messageId: string, deliveryCount: number, body?: unknown) =>
    processDelivery(
      typicalConsumer,
      delivery(body ?? { accountId, amount: 1 }, { messageId, deliveryCount }),
      dependencies(container()),
    );

  it('new, first delivery and redelivered', async () => {
    const first = account();
    const second = account();
    await seeded(first);
    await seeded(second);

    let reported = 0;
    const onFirst = await charged(async () => {
      reported = (await run(first, 'm-new-1', 1)).requestCharge;
    });
    const onRedelivery = await charged(() => run(second, 'm-new-2', 2));

    expect({ onFirst, within: within(modelled.new!, onFirst) }).toEqual({ onFirst, within: true });
    expect({ onRedelivery, within: within(modelled['new, redelivered']!, onRedelivery) }).toEqual({
      onRedelivery,
      within: true,
    });
    expect(onRedelivery).toBeGreaterThan(onFirst);
    // What the app records as inbox.batch_request_charge (the workbook's RU per message): all of it,
    // the handler's reads included.
    expect(reported).toBe(onFirst);
  });

  it('duplicate, redelivered and on a first delivery', async () => {
    const id = account();
    await seeded(id);
    await run(id, 'm-dup', 1);

    const redelivered = await charged(async () =>
      expect((await run(id, 'm-dup', 2)).outcome).toBe('duplicate'),
    );
    const resent = await charged(async () => expect((await run(id, 'm-dup', 1)).outcome).toBe('duplicate'));

    expect([redelivered, within(modelled['duplicate, redelivered']!, redelivered)]).toEqual([
      redelivered,
      true,
    ]);
    expect([resent, within(modelled['duplicate, first delivery']!, resent)]).toEqual([resent, true]);
  });

  it('poison: no request at all', async () => {
    const poison = await charged(() =>
      run(account(), 'm-poison', 1, { accountId: 'x', amount: 'not a number' }).catch(() => undefined),
    );

    expect(poison).toBe(modelled.poison);
  });

  it('outbox publish and relay: the outbox document created in the batch, then marked dispatched', async () => {
    const id = account();
    await seeded(id);
    const withoutPublish = testConsumer(async (_message, tx) => {
      await tx.read('balance');
      tx.upsert(documentOf('balance', EVENT.businessDocumentBytes));
    });
    const other = account();
    await seeded(other);
    const published = await charged(() =>
      processDelivery(
        withoutPublish,
        delivery({ accountId: other, amount: 1 }, { messageId: 'm-np' }),
        dependencies(container()),
      ),
    );
    const withPublish = await charged(() => run(id, 'm-pub', 1));
    const { resources } = await container()
      .items.query<OutboxDocument>({
        query: 'SELECT * FROM c WHERE c.type = "outbox" AND c.partitionKey = @pk',
        parameters: [{ name: '@pk', value: `account:${id}` }],
      })
      .fetchAll();
    const sent: OutboxMessage[] = [];
    const publisher: OutboxPublisher = {
      send: (_topic, messages) => {
        sent.push(...messages);
        return Promise.resolve([]);
      },
      close: () => Promise.resolve(),
    };

    const relay = await relayOutbox(resources, {
      container: container(),
      publisher,
      now: () => new Date(),
      settings: OUTBOX_SETTINGS,
    });

    expect(sent).toHaveLength(1);
    const publish = Math.round((withPublish - published) * 100) / 100;
    expect([publish, within(modelled['outbox publish (per message)']!, publish)]).toEqual([publish, true]);
    expect([relay.requestCharge, within(modelled['relay (per message)']!, relay.requestCharge)]).toEqual([
      relay.requestCharge,
      true,
    ]);
  });

  it('purge: per marker, in a container of markers only', async () => {
    const { database } = await client.databases.createIfNotExists({ id: 'purge' });
    const markersOnly = await ensureAppContainer(database);
    const writesNothing = testConsumer(() => undefined);
    const longAgo = new Date('2020-01-01T00:00:00Z');
    const count = 100;
    for (let index = 0; index < count; index++) {
      await processDelivery(
        writesNothing,
        delivery(
          { accountId: `acct-p${String(index).padStart(3, '0')}`, amount: 1 },
          { messageId: `m-${index}` },
        ),
        dependencies(markersOnly, { now: () => longAgo }),
      );
    }

    const report = await runPurge(markersOnly, { now: new Date(), maxItems: count, maxDurationMs: 60_000 });

    expect(report.purged).toBe(count);
    // The run ends with two counts of an emptied inbox: a query page's fixed part each.
    const perMarker = Math.round(((report.requestCharge - 2 * 2) / count) * 100) / 100;
    expect([perMarker, within(modelled['purge (per marker)']!, perMarker)]).toEqual([perMarker, true]);
  });
});

describe('Service Bus operations per event, against the local broker', () => {
  it('one send, one filter evaluation per subscription, one receive and one completion per subscription that takes it', () => {
    const broker = new Broker({ topology, clock: virtualClock() });
    const evaluations = jest.spyOn(Subscription.prototype, 'accepts');
    try {
      for (const expected of serviceBusOperations(topology)) {
        const topic = broker.topics.get(expected.topic)!;
        const sentBefore = topic.stats.sent;
        evaluations.mockClear();

        topic.send({ messageId: `${expected.subject}-1`, subject: expected.subject, body: '{}' });
        let receives = 0;
        let settles = 0;
        const takenBy: string[] = [];
        for (const subscription of topic.subscriptions) {
          for (let locked = subscription.entity.receive(); locked; locked = subscription.entity.receive()) {
            receives++;
            takenBy.push(subscription.name);
            subscription.entity.complete(locked.lockToken);
            settles++;
          }
        }

        expect({
          subject: expected.subject,
          sends: topic.stats.sent - sentBefore,
          filterEvaluations: evaluations.mock.calls.length,
          takenBy,
          receives,
          settles,
        }).toEqual({
          subject: expected.subject,
          sends: expected.sends,
          filterEvaluations: expected.filterEvaluations,
          takenBy: expected.takenBy,
          receives: expected.receives,
          settles: expected.settles,
        });
      }
    } finally {
      evaluations.mockRestore();
    }
  });
});

describe('npm run cost', () => {
  it('runs as docs/monitor.md\'s "What a message costs" shows it, and its rules are the model\'s', async () => {
    const readme = readFileSync(join(PROJECT_ROOT, 'docs', 'monitor.md'), 'utf8');
    const section = /^## What a message costs\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(readme)?.[1] ?? '';
    const args = /^npm run cost -- (.*)$/m.exec(section)?.[1]?.split(' ') ?? [];
    const run = captured({});

    expect(args.length).toBeGreaterThan(0);
    expect(await main(args, run.context)).toBe(0);
    expect(run.err).toEqual([]);
    expect(section).toContain(
      `throttled at ${STANDARD_CREDITS_PER_SECOND.toLocaleString('en')} credits a second`,
    );
    expect(section).toContain(
      `(a 1 KB point read ${RU_RULES.readPerKb} RU, a 1 KB write ${RU_RULES.writePerKb} RU)`,
    );
    expect(section).toContain(SERVICE_BUS_THROTTLING_SOURCE);
  });

  it('prints the tables, names each list price with its source and date, and --json carries the same figures', async () => {
    const text = captured({});
    const json = captured({});

    expect(await main(['--publishes', '1'], text.context)).toBe(0);
    expect(await main(['--publishes', '1', '--json'], json.context)).toBe(0);

    const report = JSON.parse(json.out.join('\n')) as ReturnType<typeof costReport>;
    const lines = text.out.join('\n');
    for (const row of report.cosmos)
      expect(lines).toMatch(new RegExp(`\\n${row.outcome.replace(/[()]/g, '\\$&')} +${row.requestUnits} `));
    for (const price of Object.values(PRICES))
      expect(lines).toContain(
        `List price: $${price.usd} per ${price.unit}, ${price.source}, read ${price.readOn}`,
      );
    for (const row of report.perMillionEvents) {
      const operations = report.serviceBus.find((s) => s.subject === row.subject)!;
      expect(row.serviceBusOperationsUsd).toBeCloseTo(
        PRICES.serviceBusStandardPerMillionOperations.usd * operations.billedOperations,
        4,
      );
    }
    expect(report.serviceBusBasePerMonthUsd).toBeCloseTo(PRICES.serviceBusStandardBasePerHour.usd * 730, 4);
  });

  it('prints a price given with its flag instead of the list price', async () => {
    const run = captured({});

    expect(await main(['--usd-base-per-hour', '1', '--json'], run.context)).toBe(0);

    const report = JSON.parse(run.out.join('\n')) as ReturnType<typeof costReport>;
    expect(report.serviceBusBasePerMonthUsd).toBe(730);
    expect(report.prices.serviceBusStandardBasePerHour).toMatchObject({ usd: 1, given: true });
    expect(report.prices.cosmosServerlessPerMillionRu).toMatchObject({ given: false });
  });

  it("counts a poison message's deliveries from SERVICEBUS_MAX_DELIVERY_COUNT, and refuses one the app would", async () => {
    const three = captured({ SERVICEBUS_MAX_DELIVERY_COUNT: '3' });
    const wrong = captured({ SERVICEBUS_MAX_DELIVERY_COUNT: 'ten' });

    expect(await main(['--json'], three.context)).toBe(0);
    expect((JSON.parse(three.out.join('\n')) as ReturnType<typeof costReport>).poison).toEqual({
      deliveries: 3,
      credits: 3,
      billedOperations: 6,
    });
    expect(await runTool('cost', main, [], wrong.context)).toBe(2);
    expect(wrong.out).toEqual([]);
    expect(wrong.err[0]).toMatch(
      /^cost: SERVICEBUS_MAX_DELIVERY_COUNT must be a whole number from 1 to 2000; got 'ten'\.\nUsage:/,
    );
  });

  it('turns a given price into money per million events: RU of a new message times the price, per consumer', () => {
    const event = { ...EVENT, publishes: 0 };
    const prices = Object.fromEntries(
      Object.entries(PRICES).map(([name, price]) => [name, { ...price, usd: 0.5, given: true }]),
    ) as Parameters<typeof costReport>[2];

    const report = costReport(event, 100, prices, 10, topology);

    const newRu = report.cosmos.find((row) => row.outcome === 'new')!.requestUnits;
    for (const row of report.perMillionEvents) {
      const operations = report.serviceBus.find((s) => s.subject === row.subject)!;
      expect(row.cosmosServerlessUsd).toBeCloseTo(0.5 * newRu * operations.receives, 4);
      expect(row.serviceBusOperationsUsd).toBeCloseTo(0.5 * operations.billedOperations, 4);
    }
    // 100 events a second: the RU/s in steps of 100, priced per 100 RU/s-hour, over 360,000 events an hour.
    expect(report.provisioned.requestUnitsPerSecond).toBe(
      Math.max(400, Math.ceil((100 * newRu) / 100) * 100),
    );
    expect(report.perMillionEvents[0]!.cosmosProvisionedUsd).toBeCloseTo(
      ((0.5 * report.provisioned.requestUnitsPerSecond) / 100) * (1_000_000 / 360_000),
      4,
    );
    // One send, one filter evaluation for each of the topic's three subscriptions, one receive.
    expect(report.serviceBus.find((s) => s.subject === 'OrderCreated')!.sustainableEventsPerSecond).toBe(
      Math.floor(1000 / (1 + 3 + 1)),
    );
  });
});
