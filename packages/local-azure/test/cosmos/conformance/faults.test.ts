import { type Container, CosmosClient } from '@azure/cosmos';

import { batchErrorStatus, local, statusOf, type Target, useTarget } from '../../support/conformanceTarget';

/**
 * Fault injection is a feature of the local server only: against a real account these cases are
 * skipped (there is nothing to inject with).
 */
const target = useTarget();
let container: Container;
beforeAll(async () => {
  container = await target.container();
});

const localOnly = local ? describe : describe.skip;

localOnly('fault injection (local server)', () => {
  const faults = (): NonNullable<Target['server']>['faults'] => target.server!.faults;

  it('429 with x-ms-retry-after-ms: the SDK waits, retries and succeeds, and the write happens once', async () => {
    const rule = faults().inject({ kind: 'throttle', on: 'batch', times: 2, retryAfterMs: 5 });
    await container.items.create({ id: 'counter-429', pk: 't', n: 0 });

    const response = await container.items.batch(
      [
        {
          operationType: 'Patch',
          id: 'counter-429',
          resourceBody: { operations: [{ op: 'incr', path: '/n', value: 1 }] },
        },
      ],
      't',
    );

    expect(rule.hits).toBe(2);
    expect(response.code).toBe(200);
    expect((await container.item('counter-429', 't').read<{ n: number }>()).resource?.n).toBe(1);
  });

  it('429 beyond the SDK retries: a point write throws 429, a batch throws with a 429 cause, nothing is written', async () => {
    faults().inject({ kind: 'throttle', on: ['write', 'batch'], retryAfterMs: 1 });

    const writeStatus = await statusOf(container.items.create({ id: 'never-429', pk: 't' }));
    const batchStatus = await batchErrorStatus(
      container.items.batch(
        [{ operationType: 'Create', resourceBody: { id: 'never-429-batch', pk: 't' } }],
        't',
      ),
    );
    faults().clear();

    expect(writeStatus).toBe(429);
    expect(batchStatus).toBe(429);
    expect((await container.item('never-429', 't').read()).statusCode).toBe(404);
    expect((await container.item('never-429-batch', 't').read()).statusCode).toBe(404);
  });

  it("a fault scoped to one client (its User-Agent) fails that client's requests and leaves another's alone", async () => {
    const { endpoint, key } = target.server!;
    const scoped = new CosmosClient({ endpoint, key, userAgentSuffix: 'scoped-client' });
    const mine = scoped.database(container.database.id).container(container.id);
    faults().inject({ kind: 'unavailable', on: 'write', userAgent: 'scoped-client' });

    const scopedStatus = await statusOf(mine.items.create({ id: 'scoped-503', pk: 't' }));
    const otherStatus = (await container.items.create({ id: 'unscoped-201', pk: 't' })).statusCode;
    faults().clear();
    scoped.dispose();

    expect([scopedStatus, otherStatus]).toEqual([503, 201]);
    expect((await container.item('scoped-503', 't').read()).statusCode).toBe(404);
  });

  it('503 on a write: the SDK throws 503 and nothing is written', async () => {
    faults().inject({ kind: 'unavailable', on: 'write', times: 1 });

    const status = await statusOf(container.items.create({ id: 'never-503', pk: 't' }));

    expect(status).toBe(503);
    expect((await container.item('never-503', 't').read()).statusCode).toBe(404);
  });

  it('drop the response after commit: the client gets an error although the write committed', async () => {
    faults().inject({ kind: 'dropResponseAfterCommit', on: 'batch', times: 1 });

    const outcome = await container.items
      .batch([{ operationType: 'Create', resourceBody: { id: 'ambiguous', pk: 't' } }], 't')
      .then(
        () => 'answered',
        () => 'failed',
      );

    expect(outcome).toBe('failed');
    expect((await container.item('ambiguous', 't').read()).statusCode).toBe(200);
  });

  it('targets one kind of request: a read fault leaves writes and queries alone', async () => {
    const rule = faults().inject({ kind: 'unavailable', on: 'read' });

    const created = await container.items.create({ id: 'kinds', pk: 't' });
    const { resources } = await container.items.query('SELECT * FROM c WHERE c.id = "kinds"').fetchAll();
    const readStatus = await statusOf(container.item('kinds', 't').read());

    expect(created.statusCode).toBe(201);
    expect(resources).toHaveLength(1);
    expect(readStatus).toBe(503);
    expect(rule.hits).toBeGreaterThan(0);
  });

  it('skip lets the first requests through; remove() ends the rule', async () => {
    const rule = faults().inject({ kind: 'unavailable', on: 'write', skip: 2 });

    const statuses = [];
    for (let i = 0; i < 4; i++)
      statuses.push(await statusOf(container.items.create({ id: `skip-${i}`, pk: 't' })));
    rule.remove();
    const after = await statusOf(container.items.create({ id: 'skip-after', pk: 't' }));

    expect(statuses).toEqual([0, 0, 503, 503]);
    expect(after).toBe(0);
  });

  it('probability hits a share of requests, and every hit is a failure the client saw', async () => {
    const rule = faults().inject({ kind: 'unavailable', on: 'write', probability: 0.5 });

    const statuses = [];
    for (let i = 0; i < 60; i++)
      statuses.push(await statusOf(container.items.create({ id: `p-${i}`, pk: 't' })));

    const failures = statuses.filter((status) => status === 503).length;
    expect(failures).toBe(rule.hits);
    expect(failures).toBeGreaterThan(0);
    expect(failures).toBeLessThan(60);
  });

  it('latency delays the targeted request: a delayed read finishes after a write sent later', async () => {
    await container.items.create({ id: 'slow', pk: 't' });
    faults().inject({ kind: 'latency', on: 'read', ms: 300, times: 1 });
    const finished: string[] = [];

    const read = container
      .item('slow', 't')
      .read()
      .then(() => finished.push('read'));
    const write = container.items.create({ id: 'fast', pk: 't' }).then(() => finished.push('write'));
    await Promise.all([read, write]);

    expect(finished).toEqual(['write', 'read']);
  });

  it('a status on the whole request: the SDK throws it (a batch with it as the cause), nothing is written', async () => {
    faults().inject({ kind: 'status', status: 403, on: 'write', times: 1 });
    faults().inject({ kind: 'status', status: 413, on: 'batch', times: 1 });

    const writeStatus = await statusOf(container.items.create({ id: 'never-403', pk: 't' }));
    const batchStatus = await batchErrorStatus(
      container.items.batch([{ operationType: 'Create', resourceBody: { id: 'never-413', pk: 't' } }], 't'),
    );

    expect([writeStatus, batchStatus]).toEqual([403, 413]);
    expect((await container.item('never-403', 't').read()).statusCode).toBe(404);
    expect((await container.item('never-413', 't').read()).statusCode).toBe(404);
  });

  it("a status on one operation of a batch: that operation's status, 424 for the others, nothing committed", async () => {
    faults().inject({ kind: 'status', status: 429, on: 'batch', operation: 1, times: 1 });

    const response = await container.items.batch(
      [
        { operationType: 'Create', resourceBody: { id: 'op-0', pk: 't' } },
        { operationType: 'Create', resourceBody: { id: 'op-1', pk: 't' } },
        { operationType: 'Create', resourceBody: { id: 'op-2', pk: 't' } },
      ],
      't',
    );

    expect(response.code).toBe(207);
    expect(response.result?.map((result) => result.statusCode)).toEqual([424, 429, 424]);
    expect((await container.item('op-0', 't').read()).statusCode).toBe(404);
  });
});
