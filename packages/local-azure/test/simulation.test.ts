import { ChangeFeedStartFrom, type Container, CosmosClient, type CosmosClientOptions } from '@azure/cosmos';

import { type LocalCosmos, Simulation, simulationClientOptions, startCosmos } from '../src';

/**
 * The simulation's clients (simulationClientOptions) against the local server, with the server's
 * latency in model time: a request the server holds for minutes ends when the server answers, in
 * model time, and the operations around it take their turns.
 */
let cosmos: LocalCosmos;
let client: CosmosClient;
let container: Container;
let simulation: Simulation | undefined;
beforeAll(async () => {
  cosmos = await startCosmos({ seed: 7 });
  const options: CosmosClientOptions = {
    endpoint: cosmos.endpoint,
    key: cosmos.key,
    ...simulationClientOptions(() => simulation),
  };
  client = new CosmosClient(options);
  const { database } = await client.databases.createIfNotExists({ id: 'simulation' });
  ({ container } = await database.containers.createIfNotExists({
    id: 'items',
    partitionKey: { paths: ['/pk'] },
  }));
});
afterAll(async () => {
  client.dispose();
  await cosmos.stop();
});
afterEach(() => {
  cosmos.faults.clear();
});

/**
 * Runs `work` on a new simulation whose server waits latency in model time; returns what it gave,
 * the model time it took and the run. Requests after it go straight through.
 */
async function onSimulation<T>(
  work: () => Promise<T>,
): Promise<{ result: T; tookMs: number; run: Simulation }> {
  const run = new Simulation();
  simulation = run;
  cosmos.setLatencyWait((ms) => run.parked(ms));
  const start = run.clock.now();
  try {
    const result = await run.drive(work());
    return { result, tookMs: run.clock.now() - start, run };
  } finally {
    simulation = undefined;
    cosmos.setLatencyWait(undefined);
  }
}

describe('simulationClientOptions', () => {
  it('a write the server holds for 9 minutes ends when the server answers, in model time; a query runs meanwhile, in its turn', async () => {
    await container.items.create({ id: 'there', pk: 'a' });
    cosmos.faults.inject({ kind: 'latency', on: 'write', ms: 9 * 60_000, times: 1 });

    const { result, tookMs } = await onSimulation(async () => {
      const run = simulation!;
      const slow = container.items.create({ id: 'slow', pk: 'a' }).then((response) => ({
        status: response.statusCode,
        at: run.clock.now(),
      }));
      // A query goes through the SDK's request plugins only: it takes its turn while the write is held.
      const { resources } = await container.items.query('SELECT VALUE c.id FROM c').fetchAll();
      return { meanwhile: { ids: resources, at: run.clock.now() }, slow: await slow };
    });

    const start = result.slow.at - tookMs;
    expect(result.meanwhile).toEqual({ ids: ['there'], at: start });
    expect(result.slow).toEqual({ status: 201, at: start + 9 * 60_000 });
    expect(tookMs).toBe(9 * 60_000);
  });

  it('a change feed read that fails with 503 is tried again by the SDK before model time moves, in every run', async () => {
    await container.items.create({ id: 'queried', pk: 'q' });
    const runs = [];
    for (let run = 0; run < 5; run++) {
      const failed = cosmos.faults.inject({ kind: 'unavailable', on: 'query', times: 1 });
      const { result } = await onSimulation(async () => {
        const model = simulation!;
        const start = model.clock.now();
        let timerFiredAt: number | undefined;
        model.clock.after(1_000, () => (timerFiredAt = model.clock.now() - start));
        const feed = container.items.getChangeFeedIterator<{ id: string }>({
          changeFeedStartFrom: ChangeFeedStartFrom.Beginning('q'),
        });
        const resources = (await feed.readNext()).result.map((item) => item.id);
        return { ids: resources, endedAt: model.clock.now() - start, timerFiredAt, hits: failed.hits };
      });
      runs.push(result);
    }

    // The retry came before the timer: the query ended at the moment it began.
    expect(runs).toEqual(
      Array.from({ length: 5 }, () => ({ ids: ['queried'], endedAt: 0, timerFiredAt: undefined, hits: 1 })),
    );
  });
});
