import { CosmosClient, type Database, type OfferDefinition } from '@azure/cosmos';

import { type LocalCosmos, start } from '../../src/cosmos';
import { rawRequest, statusOf } from '../support/conformanceTarget';

/**
 * Offers through @azure/cosmos, as a provisioned-throughput account keeps them: a database or
 * container created with `throughput` or `maxThroughput` has its own offer; a container created
 * without shares its database's, or gets 400 RU/s of its own in a database without one; the offer
 * is read, queried and replaced, refused outside Azure's ranges, and deleted with its resource.
 * With the server's budget (`throughput` option) each database without an offer shares that budget.
 */
let server: LocalCosmos;
let client: CosmosClient;

beforeAll(async () => {
  server = await start();
  client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
});

afterAll(async () => {
  client.dispose();
  await server.stop();
});

let sequence = 0;
const freshDatabase = async (
  request: { throughput?: number; maxThroughput?: number } = {},
): Promise<Database> => (await client.databases.create({ id: `offers-${++sequence}`, ...request })).database;

describe('offers of databases and containers', () => {
  it('gives a database created with throughput its own offer, and one created without none', async () => {
    const provisioned = await freshDatabase({ throughput: 500 });
    const plain = await freshDatabase();

    const { resource: offer } = await provisioned.readOffer();
    const { resource: none } = await plain.readOffer();

    const { resource: read } = await provisioned.read();
    expect(offer).toMatchObject({
      offerVersion: 'V2',
      offerType: 'Invalid',
      resource: read?._self,
      offerResourceId: read?._rid,
      content: { offerThroughput: 500, offerIsRUPerMinuteThroughputEnabled: false },
    });
    expect(offer?.id).toHaveLength(4);
    expect(none).toBeUndefined();
  });

  it("gives a container its own offer, 400 RU/s by default, unless it shares its database's", async () => {
    const dedicated = await freshDatabase();
    const shared = await freshDatabase({ throughput: 1000 });
    const byDefault = (await dedicated.containers.create({ id: 'default', partitionKey: '/pk' })).container;
    const asked = (await dedicated.containers.create({ id: 'asked', partitionKey: '/pk', throughput: 700 }))
      .container;
    const sharing = (await shared.containers.create({ id: 'sharing', partitionKey: '/pk' })).container;
    const own = (await shared.containers.create({ id: 'own', partitionKey: '/pk', throughput: 400 }))
      .container;

    const throughputOf = async (container: typeof byDefault): Promise<number | undefined> =>
      (await container.readOffer()).resource?.content?.offerThroughput;

    expect(await throughputOf(byDefault)).toBe(400);
    expect(await throughputOf(asked)).toBe(700);
    expect(await throughputOf(sharing)).toBeUndefined();
    expect(await throughputOf(own)).toBe(400);
    expect((await own.readOffer()).resource?.offerResourceId).toBe((await own.read()).resource?._rid);
  });

  it('keeps autoscale settings, reporting a tenth of the maximum as the throughput', async () => {
    const database = await freshDatabase({ maxThroughput: 4000 });
    const { container } = await database.containers.create({
      id: 'autoscale',
      partitionKey: '/pk',
      maxThroughput: 20000,
    });

    const ofDatabase = (await database.readOffer()).resource?.content;
    const ofContainer = (await container.readOffer()).resource?.content;

    expect(ofDatabase?.offerAutopilotSettings?.maxThroughput).toBe(4000);
    expect(ofDatabase?.offerThroughput).toBe(400);
    expect(ofContainer?.offerAutopilotSettings?.maxThroughput).toBe(20000);
  });

  it('lists and queries the offers, and reads one by id', async () => {
    const database = await freshDatabase({ throughput: 600 });
    const { resource: offer } = await database.readOffer();

    const listed = (await client.offers.readAll().fetchAll()).resources.map((o) => o.id);
    const queried = await client.offers
      .query<OfferDefinition>({
        query: 'SELECT * FROM root r WHERE r.offerResourceId = @rid',
        parameters: [{ name: '@rid', value: offer?.offerResourceId ?? '' }],
      })
      .fetchAll();
    const read = await client.offer(offer?.id ?? '').read();

    expect(listed).toContain(offer?.id);
    expect(queried.resources.map((o) => o.id)).toEqual([offer?.id]);
    expect(read.resource?.content?.offerThroughput).toBe(600);
    expect(await statusOf(client.offer('none').read())).toBe(404);
  });
});

describe('replacing an offer', () => {
  it('changes a manual offer, and an autoscale offer by its maximum', async () => {
    const manual = await freshDatabase({ throughput: 400 });
    const autoscale = await freshDatabase({ maxThroughput: 1000 });
    const { resource: before, offer } = await manual.readOffer();
    const { resource: scaled, offer: scaledOffer } = await autoscale.readOffer();

    const replaced = await offer.replace({
      ...before!,
      content: { ...before!.content!, offerThroughput: 1200 },
    });
    await scaledOffer.replace({
      ...scaled!,
      content: {
        ...scaled!.content!,
        offerAutopilotSettings: { ...scaled!.content!.offerAutopilotSettings!, maxThroughput: 3000 },
      },
    });

    expect(replaced.resource?.content?.offerThroughput).toBe(1200);
    expect(replaced.resource?._etag).not.toBe(before?._etag);
    expect((await manual.readOffer()).resource?.content?.offerThroughput).toBe(1200);
    expect((await autoscale.readOffer()).resource?.content?.offerAutopilotSettings?.maxThroughput).toBe(3000);
  });

  it('refuses a throughput outside the range, another resource or a stale ETag, changing nothing', async () => {
    const database = await freshDatabase({ throughput: 400 });
    const { resource: current, offer } = await database.readOffer();
    const withThroughput = (offerThroughput: number): OfferDefinition => ({
      ...current!,
      content: { ...current!.content!, offerThroughput },
    });

    const tooLow = await offer.replace(withThroughput(100)).then(
      () => '',
      (error: { code?: number; message?: string }) => `${error.code}: ${error.message}`,
    );
    const notAStep = await statusOf(offer.replace(withThroughput(450)));
    const moved = await statusOf(offer.replace({ ...withThroughput(500), offerResourceId: 'AAAAAA==' }));
    const stale = await statusOf(
      offer.replace(withThroughput(500), { accessCondition: { type: 'IfMatch', condition: '"stale"' } }),
    );

    expect(tooLow).toMatch(
      /^400: .*The offer should have valid throughput values between 400 and 1000000 inclusive in increments of 100\. Requested throughput 100/,
    );
    expect(notAStep).toBe(400);
    expect(moved).toBe(400);
    expect(stale).toBe(412);
    expect((await database.readOffer()).resource?.content?.offerThroughput).toBe(400);
  });
});

describe('creating with throughput out of range', () => {
  it('refuses manual and autoscale values Azure refuses, creating nothing', async () => {
    const database = await freshDatabase();

    expect(await statusOf(client.databases.create({ id: 'too-low', throughput: 300 }))).toBe(400);
    expect(await statusOf(client.databases.create({ id: 'off-step', maxThroughput: 1500 }))).toBe(400);
    expect(
      await statusOf(
        database.containers.create({ id: 'too-high', partitionKey: '/pk', throughput: 2_000_000 }),
      ),
    ).toBe(400);
    expect(await statusOf(client.database('too-low').read())).toBe(404);
    expect(await statusOf(client.database('off-step').read())).toBe(404);
    expect(await statusOf(database.container('too-high').read())).toBe(404);
  });

  it('refuses a create that asks for manual and autoscale throughput at once', async () => {
    // @azure/cosmos refuses this itself, so it is sent as the REST API takes it.
    const response = await rawRequest(server, 'POST', '/dbs', {
      body: JSON.stringify({ id: 'both' }),
      headers: {
        'content-type': 'application/json',
        'x-ms-offer-throughput': '400',
        'x-ms-cosmos-offer-autopilot-settings': JSON.stringify({ maxThroughput: 4000 }),
      },
    });

    expect(response.status).toBe(400);
    expect(await statusOf(client.database('both').read())).toBe(404);
  });
});

describe('deleting', () => {
  it("deletes a container's offer with it, and a database's offers with the database", async () => {
    const database = await freshDatabase({ throughput: 400 });
    const { container } = await database.containers.create({ id: 'c', partitionKey: '/pk', throughput: 400 });
    const containerOfferId = (await container.readOffer()).resource?.id ?? '';
    const databaseOfferId = (await database.readOffer()).resource?.id ?? '';

    await container.delete();
    const afterContainer = await statusOf(client.offer(containerOfferId).read());
    const databaseKept = await statusOf(client.offer(databaseOfferId).read());
    await database.delete();
    const afterDatabase = await statusOf(client.offer(databaseOfferId).read());

    expect(afterContainer).toBe(404);
    expect(databaseKept).toBe(0);
    expect(afterDatabase).toBe(404);
    const listed = (await client.offers.readAll().fetchAll()).resources.map((o) => o.id);
    expect(listed).not.toContain(containerOfferId);
    expect(listed).not.toContain(databaseOfferId);
  });
});

describe("the server's budget (throughput option)", () => {
  it('is the offer every database without its own shares, and follows a change of either', async () => {
    const provisioned = await start({ throughput: 400 });
    const other = new CosmosClient({ endpoint: provisioned.endpoint, key: provisioned.key });
    try {
      const { database } = await other.databases.create({ id: 'app' });
      const { database: second } = await other.databases.create({ id: 'second' });
      const { database: own } = await other.databases.create({ id: 'own', throughput: 2000 });
      const { container } = await database.containers.create({ id: 'state', partitionKey: '/id' });

      const before = await database.readOffer();
      const ofContainer = await container.readOffer();
      provisioned.setThroughput(1000);
      const afterSet = await database.readOffer();
      await before.offer.replace({
        ...afterSet.resource!,
        content: { ...afterSet.resource!.content!, offerThroughput: 1500 },
      });
      const listed = await other.offers.readAll().fetchAll();

      expect(before.resource?.content?.offerThroughput).toBe(400);
      expect(before.resource?.offerResourceId).toBe((await database.read()).resource?._rid);
      // A container in a database with shared throughput has no offer of its own.
      expect(ofContainer.resource).toBeUndefined();
      expect(afterSet.resource?.content?.offerThroughput).toBe(1000);
      // One budget: replacing one database's offer changes what every such database shares.
      expect((await second.readOffer()).resource?.content?.offerThroughput).toBe(1500);
      expect((await own.readOffer()).resource?.content?.offerThroughput).toBe(2000);
      expect(listed.resources).toHaveLength(3);
    } finally {
      other.dispose();
      await provisioned.stop();
    }
  });
});
