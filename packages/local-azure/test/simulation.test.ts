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

  it("a caller's abortSignal that aborts on the model clock ends its request then, and the write still commits", async () => {
    cosmos.faults.inject({ kind: 'latency', on: 'write', ms: 30_000, times: 1 });

    const { result } = await onSimulation(async () => {
      const run = simulation!;
      const deadline = new AbortController();
      run.clock.after(5_000, () => deadline.abort());
      const started = run.clock.now();
      const failure = await container.items
        .upsert({ id: 'aborted', pk: 'b' }, { abortSignal: deadline.signal })
        .then(
          () => 'answered',
          (error: Error) => `${error.name} after ${run.clock.now() - started} ms`,
        );
      // The caller goes on while the server still holds the write; the server commits it at 30 s.
      const meanwhile = (await container.item('aborted', 'b').read()).statusCode;
      await run.clock.sleep(60_000);
      const later = (await container.item('aborted', 'b').read()).statusCode;
      return { failure, meanwhile, later };
    });

    expect(result).toEqual({ failure: 'AbortError after 5000 ms', meanwhile: 404, later: 200 });
  });

  it('a request answered before its deadline is not failed', async () => {
    cosmos.faults.inject({ kind: 'latency', on: 'write', ms: 4_999, times: 1 });

    const { result, tookMs } = await onSimulation(async () => {
      const deadline = new AbortController();
      const cancel = simulation!.clock.after(5_000, () => deadline.abort());
      const response = await container.items.create(
        { id: 'in-time', pk: 'c' },
        { abortSignal: deadline.signal },
      );
      cancel();
      return response.statusCode;
    });

    expect(result).toBe(201);
    expect(tookMs).toBe(4_999);
  });

  it('an abortSignal aborted before the request starts fails it at once, unsent', async () => {
    const { result } = await onSimulation(() =>
      container.items.create({ id: 'never', pk: 'd' }, { abortSignal: AbortSignal.abort() }).then(
        () => 'answered',
        (error: Error) => error.name,
      ),
    );

    expect(result).toBe('AbortError');
    expect((await container.item('never', 'd').read()).statusCode).toBe(404);
  });
});
