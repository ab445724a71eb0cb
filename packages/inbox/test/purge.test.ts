import { setTimeout as sleep } from 'node:timers/promises';

import { CosmosClient } from '@azure/cosmos';
import { MARKER_TYPE, processDelivery, runPurge } from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { delivery, dependencies, testConsumer } from '../src/testing';

const stack = useLocalStack();
afterEach(async () => {
  // Each test starts from an empty inbox.
  const { resources } = await stack.container.items
    .query<{ id: string; partitionKey: string }>('SELECT c.id, c.partitionKey FROM c')
    .fetchAll();
  for (const doc of resources) await stack.container.item(doc.id, doc.partitionKey).delete();
});

const DAY_MS = 86_400_000;
const now = new Date('2026-11-29T12:00:00Z');
const consumer = testConsumer((message, tx) => tx.upsert({ id: 'balance', amount: message.amount }));

/** Markers processed `ageDays` ago, spread over `partitions` accounts; each also writes a business document. */
async function processMessages(
  count: number,
  ageDays: number,
  partitions = 3,
  prefix = `m${ageDays}`,
): Promise<void> {
  const deps = dependencies(stack.container, { now: () => new Date(now.getTime() - ageDays * DAY_MS) });
  for (let i = 0; i < count; i++) {
    await processDelivery(
      consumer,
      delivery({ accountId: `p${i % partitions}`, amount: i }, { messageId: `${prefix}-${i}` }),
      deps,
    );
  }
}

async function stored(): Promise<{ markers: number; business: number }> {
  const { resources } = await stack.container.items
    .query<{ type?: string }>('SELECT c.type FROM c')
    .fetchAll();
  return {
    markers: resources.filter((doc) => doc.type === MARKER_TYPE).length,
    business: resources.filter((doc) => doc.type !== MARKER_TYPE).length,
  };
}

describe('runPurge', () => {
  it('deletes expired markers only: unexpired markers and business documents stay', async () => {
    await processMessages(7, 40);
    await processMessages(4, 2);

    const report = await runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000 });

    expect(report).toMatchObject({
      purged: 7,
      skipped: 0,
      expiredRemaining: 0,
      markers: 4,
      stoppedBy: 'done',
    });
    expect(await stored()).toEqual({ markers: 4, business: 3 });
  });

  it('keeps a marker until its retention has fully passed', async () => {
    await processMessages(2, 29.9);

    const report = await runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000 });

    expect(report.purged).toBe(0);
    expect((await stored()).markers).toBe(2);
  });

  it('stops at maxItems, reports what remains, and the next run continues', async () => {
    await processMessages(12, 45);

    const first = await runPurge(stack.container, {
      now,
      maxItems: 5,
      maxDurationMs: 60_000,
      pageSize: 2,
    });
    const second = await runPurge(stack.container, {
      now,
      maxItems: 5,
      maxDurationMs: 60_000,
      pageSize: 2,
    });
    const third = await runPurge(stack.container, {
      now,
      maxItems: 5,
      maxDurationMs: 60_000,
      pageSize: 2,
    });

    expect([first.purged, first.expiredRemaining, first.stoppedBy]).toEqual([5, 7, 'item-cap']);
    expect([second.purged, second.expiredRemaining, second.stoppedBy]).toEqual([5, 2, 'item-cap']);
    expect([third.purged, third.expiredRemaining, third.stoppedBy]).toEqual([2, 0, 'done']);
  });

  it('stops when its time is up', async () => {
    await processMessages(6, 45);
    let ticks = 0;

    const report = await runPurge(stack.container, {
      now,
      maxItems: 1000,
      maxDurationMs: 2_500,
      pageSize: 2,
      clock: () => ++ticks * 1_000,
    });

    expect(report.stoppedBy).toBe('time-cap');
    expect(report.purged).toBeGreaterThan(0);
    expect(report.expiredRemaining).toBe(6 - report.purged);
  });

  it('two purges at once delete every expired marker once between them, without failing', async () => {
    await processMessages(30, 50, 4);

    const [a, b] = await Promise.all([
      runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000, pageSize: 10 }),
      runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000, pageSize: 10 }),
    ]);

    expect(a.purged + b.purged).toBe(30);
    expect((await stored()).markers).toBe(0);
  });

  it('leaves alone a marker written again after the purge read it (its ETag changed)', async () => {
    await processMessages(1, 40, 1, 'again');
    const slowDeletes = stack.server.faults.inject({ kind: 'latency', on: 'batch', ms: 300, times: 1 });

    const purge = runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000 });
    while (slowDeletes.hits === 0) await sleep(5);
    // While the purge's delete is in flight, the message is processed again (a resubmit after the
    // retention): the marker is rewritten with a fresh expiry.
    const { resources } = await stack.container.items
      .query<Record<string, unknown>>(`SELECT * FROM c WHERE c.type = "${MARKER_TYPE}"`)
      .fetchAll();
    const marker = resources[0]!;
    await stack.container.items.upsert({
      ...marker,
      expiresAtEpochSeconds: now.getTime() / 1000 + 30 * 86_400,
    });
    const report = await purge;

    expect(report).toMatchObject({ purged: 0, skipped: 1 });
    expect((await stored()).markers).toBe(1);
  });

  it('spends no more than maxRequestUnitsPerSecond on average, on its own clock, and the server counts no less', async () => {
    await processMessages(60, 45, 4);
    const purgeClient = new CosmosClient({
      endpoint: stack.server.endpoint,
      key: stack.server.key,
      userAgentSuffix: 'purge-budget-test',
    });
    const budget = 300;
    // A clock that moves only when the run waits: the pacing is checked without real time.
    let clockMs = 0;
    const container = purgeClient.database('app').container('state');

    const report = await runPurge(container, {
      now,
      maxItems: 1000,
      maxDurationMs: 60_000,
      pageSize: 10,
      maxRequestUnitsPerSecond: budget,
      clock: () => clockMs,
      sleep: (ms) => {
        clockMs += ms;
        return Promise.resolve();
      },
    });
    purgeClient.dispose();
    const usage = stack.server
      .usageByClient()
      .find((client) => client.userAgent.endsWith(' purge-budget-test'));
    const largestCharge = usage!.maxRequestCharge;

    expect(report).toMatchObject({ purged: 60, stoppedBy: 'done', throttled: 0 });
    expect(report.waitedMs).toBe(clockMs);
    expect(clockMs).toBeGreaterThan(0);
    // The server also counts the SDK's query-plan requests (1 RU each here), which no response reports.
    expect(usage!.requestCharge).toBeGreaterThanOrEqual(report.requestCharge);
    // A request's charge is known only once it has run: the run may be one request over its budget.
    expect(report.requestCharge).toBeLessThanOrEqual((budget * clockMs) / 1000 + largestCharge);
    // And it waited no longer than the budget needs, give or take that one request.
    expect(report.requestCharge).toBeGreaterThan((budget * clockMs) / 1000 - largestCharge);
  });

  it("backs off on a 429 that outlasts the SDK's retries, then finishes the run", async () => {
    await processMessages(12, 45, 2);
    // The SDK tries a request 10 times (9 retries): the 11th attempt of the first batch gets through.
    const throttle = stack.server.faults.inject({
      kind: 'throttle',
      on: 'batch',
      times: 10,
      retryAfterMs: 1,
    });
    const waits: number[] = [];

    const report = await runPurge(stack.container, {
      now,
      maxItems: 1000,
      maxDurationMs: 60_000,
      sleep: (ms) => {
        waits.push(ms);
        return sleep(ms);
      },
    });

    expect(throttle.hits).toBe(10);
    expect(report).toMatchObject({ purged: 12, expiredRemaining: 0, stoppedBy: 'done' });
    expect(report.throttled).toBeGreaterThanOrEqual(1);
    expect(waits).toEqual([1]);
    expect((await stored()).markers).toBe(0);
  });

  it('stops at its time cap rather than fail when it is throttled past it, and the next run resumes', async () => {
    await processMessages(5, 45, 1);
    stack.server.faults.inject({ kind: 'throttle', on: 'batch', times: 10, retryAfterMs: 1 });
    let ticks = 0;

    const throttled = await runPurge(stack.container, {
      now,
      maxItems: 1000,
      maxDurationMs: 2_500,
      clock: () => ++ticks * 1_000,
    });
    const next = await runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000 });

    expect(throttled).toMatchObject({ purged: 0, expiredRemaining: 5, stoppedBy: 'time-cap' });
    expect(throttled.throttled).toBeGreaterThanOrEqual(1);
    expect(next).toMatchObject({ purged: 5, expiredRemaining: 0, stoppedBy: 'done' });
  });

  it('fails, not "time-cap", when Cosmos DB fails its query (503): nothing is deleted, the timer retries', async () => {
    await processMessages(3, 40);
    stack.server.faults.inject({ kind: 'unavailable', on: 'query' });

    const failure = await runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000 }).then(
      (report) => `reported ${report.stoppedBy}`,
      (error: unknown) => `failed ${(error as { code?: number }).code}`,
    );
    stack.server.faults.clear();

    expect(failure).toBe('failed 503');
    expect(await stored()).toEqual({ markers: 3, business: 3 });
  });

  it('skips a marker gone or changed (404, 412) but fails on any other status of a single delete', async () => {
    await processMessages(2, 40, 1);
    // The partition's batch fails (one marker gone since the query), so each is deleted on its own;
    // the first of those fails with 503.
    stack.server.faults.inject({ kind: 'status', status: 404, on: 'batch', operation: 0, times: 1 });
    stack.server.faults.inject({ kind: 'status', status: 503, on: 'write', times: 1 });

    const failure = await runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000 }).then(
      (report) => `reported ${report.purged} purged, ${report.skipped} skipped`,
      (error: unknown) => `failed ${(error as { code?: number }).code}`,
    );
    const retried = await runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000 });

    expect(failure).toBe('failed 503');
    expect(retried).toMatchObject({ purged: 2, skipped: 0, markers: 0, stoppedBy: 'done' });
  });

  it('counts a single delete that finds its marker gone (404) as skipped, and goes on', async () => {
    await processMessages(2, 40, 1);
    stack.server.faults.inject({ kind: 'status', status: 404, on: 'batch', operation: 1, times: 1 });
    stack.server.faults.inject({ kind: 'status', status: 404, on: 'write', times: 1 });

    const report = await runPurge(stack.container, { now, maxItems: 1000, maxDurationMs: 60_000 });

    expect(report).toMatchObject({ purged: 1, skipped: 1, stoppedBy: 'done' });
  });
});
