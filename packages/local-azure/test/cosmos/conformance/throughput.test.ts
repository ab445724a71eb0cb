import { CosmosClient, type FailedRequestAttemptDiagnostic } from '@azure/cosmos';

import { type LocalCosmos, start } from '../../../src/cosmos';
import { rawRequest } from '../../support/conformanceTarget';

/**
 * Provisioned throughput is a mode of the local server (Azure enforces it on its own): a budget of
 * request units per second, beyond which data requests are answered 429 as Cosmos DB answers them.
 * Checked through @azure/cosmos, which retries a 429 itself, and through raw HTTP for what the SDK
 * hides (the status, headers and body of the 429).
 */
let server: LocalCosmos;
let client: CosmosClient;
const RU_PER_SECOND = 20;
/** About 3 KB with its system properties: 15 to 20 RU to write (5 per KB), about a second of the budget. */
const bulky = (id: string): { id: string; pk: string; text: string } => ({
  id,
  pk: 't',
  text: 'x'.repeat(2900),
});

beforeAll(async () => {
  server = await start({ throughput: RU_PER_SECOND, seed: 1 });
  client = new CosmosClient({ endpoint: server.endpoint, key: server.key, userAgentSuffix: 'conformance' });
  const { database } = await client.databases.create({ id: 'throughput' });
  await database.containers.create({ id: 'c', partitionKey: { paths: ['/pk'] } });
});
afterAll(async () => {
  client.dispose();
  await server.stop();
});

const container = (): ReturnType<ReturnType<CosmosClient['database']>['container']> =>
  client.database('throughput').container('c');
const throttledAttempts = (diagnostics: {
  clientSideRequestStatistics: { retryDiagnostics: { failedAttempts: FailedRequestAttemptDiagnostic[] } };
}): FailedRequestAttemptDiagnostic[] =>
  diagnostics.clientSideRequestStatistics.retryDiagnostics.failedAttempts.filter(
    (attempt) => attempt.statusCode === 429,
  );

describe('provisioned throughput (local server)', () => {
  it('answers 429 with x-ms-retry-after-ms, substatus 3200 and a Cosmos-shaped body once the budget is spent', async () => {
    // Two writes of about a second of budget each: the first fits, the second runs the budget into debt.
    await container().items.create(bulky('first'));
    await container().items.create(bulky('second'));

    const response = await rawRequest(server, 'GET', '/dbs/throughput/colls/c/docs/first', {
      headers: { 'x-ms-documentdb-partitionkey': '["t"]' },
    });

    expect(response.status).toBe(429);
    expect(response.headers.get('x-ms-substatus')).toBe('3200');
    expect(response.headers.get('x-ms-request-charge')).toBe('0');
    const retryAfterMs = Number(response.headers.get('x-ms-retry-after-ms'));
    // The debt is at most one write (20 RU) at 20 RU/s: a second at most.
    expect(retryAfterMs).toBeGreaterThanOrEqual(1);
    expect(retryAfterMs).toBeLessThanOrEqual(1000);
    expect(response.body).toEqual({
      code: 'TooManyRequests',
      message: expect.stringMatching(/^Message: \{"Errors":\["Request rate is large\./) as unknown,
    });
  });

  it('the SDK waits the retry-after, retries, and the throttled request then succeeds, once', async () => {
    await container().items.create(bulky('third'));

    const written = await container().items.create(bulky('after-throttle'));
    const read = await container().item('after-throttle', 't').read<{ text: string }>();

    const throttled = throttledAttempts(written.diagnostics);
    expect(written.statusCode).toBe(201);
    expect(throttled.length).toBeGreaterThanOrEqual(1);
    expect(read.resource?.text).toHaveLength(2900);
    const { resources } = await container()
      .items.query('SELECT VALUE COUNT(1) FROM c WHERE c.id = "after-throttle"')
      .fetchAll();
    expect(resources).toEqual([1]);
  });

  it('does not charge or throttle metadata requests (Cosmos DB serves them from another budget)', async () => {
    await container().items.create(bulky('fourth'));
    await container().items.create(bulky('fifth'));

    const dataStatus = (
      await rawRequest(server, 'GET', '/dbs/throughput/colls/c/docs/fourth', {
        headers: { 'x-ms-documentdb-partitionkey': '["t"]' },
      })
    ).status;
    const metadataStatus = (await rawRequest(server, 'GET', '/dbs/throughput/colls/c')).status;

    expect(dataStatus).toBe(429);
    expect(metadataStatus).toBe(200);
  });

  it('serves no more than the budget over time, however many clients push, and counts each client', async () => {
    const budget = 100;
    const busy = await start({ throughput: budget, seed: 1 });
    const sdk = new CosmosClient({ endpoint: busy.endpoint, key: busy.key, userAgentSuffix: 'pusher' });
    const { database } = await sdk.databases.create({ id: 'd' });
    const { container: pushed } = await database.containers.create({
      id: 'c',
      partitionKey: { paths: ['/pk'] },
    });
    // A few writers: many more would starve some of them past the SDK's 9 retries, as in Cosmos DB.
    let charged = 0;
    const writers = Array.from({ length: 3 }, async (_, writer) => {
      for (let i = 0; i < 4; i++) {
        const { requestCharge } = await pushed.items.create(bulky(`push-${writer}-${i}`));
        charged += requestCharge;
      }
    });
    await Promise.all(writers);
    const usage = busy.usageByClient().find((entry) => entry.userAgent.endsWith(' pusher'));
    sdk.dispose();
    await busy.stop();

    expect(usage).toBeDefined();
    const { requestCharge, maxRequestCharge, firstAtMs, lastAtMs, throttled } = usage!;
    // The server counted what the SDK was told it spent: the 429s cost nothing.
    expect(requestCharge).toBe(charged);
    expect(requestCharge).toBeGreaterThan(budget);
    expect(throttled).toBeGreaterThan(0);
    // One second of budget may be spent at once, and the last request's charge is taken after it ran.
    expect(requestCharge).toBeLessThanOrEqual(
      budget * ((lastAtMs - firstAtMs) / 1000 + 1) + maxRequestCharge,
    );
  });
});

describe('without a throughput', () => {
  it('never throttles', async () => {
    const unlimited = await start({ seed: 1 });
    const sdk = new CosmosClient({ endpoint: unlimited.endpoint, key: unlimited.key });
    const { database } = await sdk.databases.create({ id: 'd' });
    const { container: c } = await database.containers.create({ id: 'c', partitionKey: { paths: ['/pk'] } });
    await Promise.all(Array.from({ length: 40 }, (_, i) => c.items.create(bulky(`u-${i}`))));
    const usage = unlimited.usageByClient();
    sdk.dispose();
    await unlimited.stop();

    expect(usage.reduce((sum, client) => sum + client.requests, 0)).toBe(40);
    expect(usage.reduce((sum, client) => sum + client.throttled, 0)).toBe(0);
  });
});
