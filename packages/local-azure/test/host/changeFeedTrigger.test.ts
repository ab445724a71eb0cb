// The Cosmos DB trigger's change feed processor model (packages/local-azure/src/host/changeFeedTrigger.ts):
// the real @azure/cosmos SDK against the local server, a fixture app invoked through the worker path.

import { join } from 'node:path';

import { type Container, CosmosClient } from '@azure/cosmos';

import { type LocalCosmos, start } from '../../src/cosmos';
import { type ChangeFeedFaults, ChangeFeedTrigger, retryDelays } from '../../src/host/changeFeedTrigger';
import { type CosmosDBFunction, loadFunctionApp } from '../../src/host/worker';
import { seededRandom } from '../../src/random';
import { scaledClock } from '../../src/servicebus/clock';
import { onInvocation, received } from './changeFeedFixtureApp';

/** 1000 model ms per real ms: a 5 s poll delay is 5 ms, a 60 s lease expiration 60 ms. */
const clock = scaledClock(1000);
let server: LocalCosmos;
let client: CosmosClient;
let relay: CosmosDBFunction;
let fromNow: CosmosDBFunction;
const running: ChangeFeedTrigger[] = [];

beforeAll(async () => {
  server = await start({ seed: 1 });
  client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
  const loaded = await loadFunctionApp([join(__dirname, 'changeFeedFixtureApp.ts')]);
  const find = (name: string): CosmosDBFunction => {
    const found = loaded.cosmosDB.find((f) => f.name === name);
    if (!found) throw new Error(`The fixture app did not register ${name}.`);
    return found;
  };
  relay = find('fixture-relay');
  fromNow = find('fixture-now');
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((trigger) => trigger.stop()));
  onInvocation(() => Promise.resolve());
  received.length = 0;
});

afterAll(async () => {
  client.dispose();
  await server.stop();
});

let databases = 0;
/** A fresh database with the monitored container (`state`, /partitionKey) and `leases` (/id). */
async function containers(): Promise<{ state: Container; leases: Container }> {
  const { database } = await client.databases.create({ id: `cf-${++databases}` });
  const { container: state } = await database.containers.create({
    id: 'state',
    partitionKey: { paths: ['/partitionKey'] },
  });
  const { container: leases } = await database.containers.create({
    id: 'leases',
    partitionKey: { paths: ['/id'] },
  });
  return { state, leases };
}

function trigger(
  registration: CosmosDBFunction,
  { state, leases }: { state: Container; leases: Container },
  faults: ChangeFeedFaults = {},
  seed = 1,
): ChangeFeedTrigger {
  const created = new ChangeFeedTrigger(registration, {
    clock,
    monitored: state,
    leases,
    faults,
    random: seededRandom(seed),
  });
  running.push(created);
  return created;
}

async function write(state: Container, ids: readonly string[]): Promise<void> {
  for (const id of ids) await state.items.create({ id, partitionKey: 'p' });
}

const range = (count: number, from = 1): string[] =>
  Array.from({ length: count }, (_, i) => `d${String(from + i).padStart(2, '0')}`);

const idsOf = (documents: unknown): string[] => (documents as { id: string }[]).map((d) => d.id);

/** Resolves once `condition` holds, polling in real time. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 2));
}

describe('registration', () => {
  it("lists the trigger's options and its retry policy as the host gets them (whole seconds)", () => {
    expect(relay).toEqual({
      name: 'fixture-relay',
      connection: 'CosmosDBConnection',
      databaseName: 'app',
      containerName: 'state',
      leaseContainerName: 'leases',
      leaseContainerPrefix: 'relay-',
      createLeaseContainerIfNotExists: false,
      maxItemsPerInvocation: 3,
      startFromBeginning: true,
      feedPollDelay: 1000,
      retry: { strategy: 'fixedDelay', maxRetryCount: 2, delayIntervalMs: 2000 },
    });
    expect(fromNow).toMatchObject({
      leaseContainerPrefix: '',
      startFromBeginning: false,
      retry: {
        strategy: 'exponentialBackoff',
        maxRetryCount: -1,
        minimumIntervalMs: 5000,
        maximumIntervalMs: 300_000,
      },
    });
    expect(fromNow.maxItemsPerInvocation).toBeUndefined();
  });
});

describe('what the function receives', () => {
  it('an array of the documents as stored, system properties included, dates as Json.NET rewrites them', async () => {
    const cosmos = await containers();
    await cosmos.state.items.create({
      id: 'dated',
      partitionKey: 'p',
      utc: '2026-11-29T10:00:00.120Z',
      offset: '2026-11-29T12:00:00.000+02:00',
      local: '2026-11-29T10:00:00.5000000',
      nested: { at: ['2026-11-29T10:00:00.000Z'] },
      notADate: '2026-13-29T10:00:00Z',
      dateOnly: '2026-11-29',
    });
    await trigger(relay, cosmos).start();
    await until(() => received.length > 0);

    const [first] = received;
    expect(Array.isArray(first?.documents)).toBe(true);
    const [document] = first?.documents as Record<string, unknown>[];
    expect(document).toMatchObject({
      id: 'dated',
      partitionKey: 'p',
      utc: '2026-11-29T10:00:00.12Z',
      offset: '2026-11-29T10:00:00+00:00',
      local: '2026-11-29T10:00:00.5',
      nested: { at: ['2026-11-29T10:00:00Z'] },
      notADate: '2026-13-29T10:00:00Z',
      dateOnly: '2026-11-29',
    });
    expect(typeof document?._lsn).toBe('number');
    expect(typeof document?._etag).toBe('string');
    expect(typeof document?._ts).toBe('number');
    expect(first?.retryCount).toBe(0);
    // The extension has no binding data: the host sends an empty map.
    expect(first?.triggerMetadata).toEqual({});
  });
});

describe('checkpoints', () => {
  it('writes the lease (the real id and shape) only after the invocation succeeded', async () => {
    const cosmos = await containers();
    await write(cosmos.state, ['a', 'b']);
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    onInvocation(() => gate);
    const processor = trigger(relay, cosmos);
    await processor.start();
    await until(() => received.length === 1);

    const during = await processor.lease();
    expect(processor.leasePrefix).toMatch(/^relay-127\.0\.0\.1_[\w+/=]+_[\w+/=]+$/);
    expect(during).toMatchObject({
      id: `${processor.leasePrefix}..0`,
      version: 0,
      LeaseToken: '0',
      FeedRange: { Range: { min: '', max: 'FF' } },
      Owner: expect.any(String) as unknown,
      ContinuationToken: null,
    });
    const marker = `${processor.leasePrefix}.info`;
    expect((await cosmos.leases.item(marker, marker).read<{ id: string }>()).resource?.id).toBe(marker);

    release();
    await processor.drained();
    const lastLsn = (received[0]?.documents as { _lsn: number }[])[1]?._lsn;

    // The change feed's etag after the page's last commit, as the .NET lease stores it.
    expect((await processor.lease())?.ContinuationToken).toBe(`"${lastLsn}"`);
    expect(processor.invocations.map(({ ids, outcome, attempts }) => ({ ids, outcome, attempts }))).toEqual([
      { ids: ['a', 'b'], outcome: 'succeeded', attempts: 1 },
    ]);
  });

  it('retries a failing page per the policy, then checkpoints past it and goes on', async () => {
    const cosmos = await containers();
    await write(cosmos.state, ['p1', 'p2', 'p3', 'after']);
    onInvocation((documents) =>
      documents.some((d) => d.id === 'p1') ? Promise.reject(new Error('poison')) : Promise.resolve(),
    );
    const processor = trigger(relay, cosmos);
    await processor.start();
    await processor.drained();

    // fixedDelay, maxRetryCount 2: three attempts, the host's retry count on each.
    expect(received.map((r) => [idsOf(r.documents), r.retryCount])).toEqual([
      [['p1', 'p2', 'p3'], 0],
      [['p1', 'p2', 'p3'], 1],
      [['p1', 'p2', 'p3'], 2],
      [['after'], 0],
    ]);
    expect(
      processor.invocations.map(({ outcome, attempts, error }) => ({ outcome, attempts, error })),
    ).toEqual([
      { outcome: 'failed', attempts: 3, error: 'Error: poison' },
      { outcome: 'succeeded', attempts: 1, error: undefined },
    ]);
  });

  it('a stop while the function runs: no checkpoint, and the next processor gets the page again from the stored lease', async () => {
    const cosmos = await containers();
    await write(cosmos.state, range(5));
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    onInvocation((documents) => (documents.some((d) => d.id === 'd04') ? gate : Promise.resolve()));
    const first = trigger(relay, cosmos);
    await first.start();
    await until(() => received.length === 2);
    const stopping = first.stop();
    release();
    await stopping;
    const stored = await first.lease();

    await write(cosmos.state, ['d06']);
    received.length = 0;
    const second = trigger(relay, cosmos);
    await second.start();
    await second.drained();

    expect(first.invocations.map(({ ids, outcome }) => ({ ids, outcome }))).toEqual([
      { ids: ['d01', 'd02', 'd03'], outcome: 'succeeded' },
      { ids: ['d04', 'd05'], outcome: 'stopped' },
    ]);
    expect(stored?.Owner).toBeNull();
    // From the checkpoint after d03, not from the beginning: startFromBeginning applies to a lease without one.
    expect(received.map((r) => idsOf(r.documents))).toEqual([['d04', 'd05', 'd06']]);
  });
});

describe('where a new lease starts', () => {
  it('startFromBeginning: what was there; otherwise only what is written after the first read', async () => {
    const cosmos = await containers();
    await write(cosmos.state, ['old']);
    const beginning = trigger(relay, cosmos);
    const now = trigger(fromNow, cosmos);
    await Promise.all([beginning.start(), now.start()]);
    await until(() => now.idle);
    await write(cosmos.state, ['new']);
    await Promise.all([beginning.drained(), now.drained()]);

    const seen = (name: string): string[] =>
      received.filter((r) => r.function === name).flatMap((r) => idsOf(r.documents));
    expect(seen('fixture-relay')).toEqual(['old', 'new']);
    expect(seen('fixture-now')).toEqual(['new']);
    // Two functions on one lease container: their prefixes keep the leases apart.
    expect(beginning.leasePrefix).not.toBe(now.leasePrefix);
  });
});

describe('faults', () => {
  async function faultyRun(seed: number): Promise<{ ids: string[]; outcome: string; attempts: number }[]> {
    received.length = 0;
    const cosmos = await containers();
    await write(cosmos.state, range(15));
    const processor = trigger(
      relay,
      cosmos,
      { crashAfterInvoke: 0.2, checkpointLost: 0.2, restart: 0.2 },
      seed,
    );
    await processor.start();
    await processor.drained();
    await processor.stop();
    return processor.invocations.map(({ ids, outcome, attempts }) => ({ ids, outcome, attempts }));
  }

  it('crashes, lost checkpoints and restarts redeliver a page: every change at least once, some twice; a seed replays', async () => {
    const pages = await faultyRun(9);
    const replay = await faultyRun(9);

    const delivered = pages.flatMap((p) => p.ids);
    expect(new Set(delivered)).toEqual(new Set(range(15)));
    expect(delivered.length).toBeGreaterThan(15);
    const outcomes = new Set(pages.map((p) => p.outcome));
    for (const outcome of ['crashed', 'checkpoint-lost', 'restarted']) expect(outcomes).toContain(outcome);
    // A page not checkpointed comes again, whole, as the next page; only a checkpoint moves on.
    pages.forEach((page, i) => {
      if (page.outcome !== 'succeeded') expect(pages[i + 1]?.ids).toEqual(page.ids);
    });
    expect(pages.filter((p) => p.outcome === 'succeeded').flatMap((p) => p.ids)).toEqual(range(15));
    expect(replay).toEqual(pages);
  });
});

describe('the Cosmos DB side', () => {
  it('refuses to start without the lease container, as the extension does', async () => {
    const { database } = await client.databases.create({ id: `cf-${++databases}` });
    const { container: state } = await database.containers.create({
      id: 'state',
      partitionKey: { paths: ['/partitionKey'] },
    });

    await expect(trigger(relay, { state, leases: database.container('leases') }).start()).rejects.toThrow(
      "the lease container 'leases' does not exist",
    );
  });

  it('rides out failed change feed reads and lease writes: every change delivered, the errors recorded', async () => {
    const cosmos = await containers();
    await write(cosmos.state, range(7));
    // After the start (the listener's start does not ride out errors: the host retries it).
    const processor = trigger(relay, cosmos);
    await processor.start();
    const reads = server.faults.inject({ kind: 'unavailable', on: 'query', skip: 1, times: 3 });
    const writes = server.faults.inject({ kind: 'unavailable', on: 'write', skip: 1, times: 1 });
    try {
      await until(() => new Set(received.flatMap((r) => idsOf(r.documents))).size === 7);
      await processor.drained();

      expect([reads.hits, writes.hits]).toEqual([3, 1]);
      expect(processor.errors).toContainEqual(expect.stringMatching(/^503: /));
      // The failed checkpoint: that page came again.
      expect(processor.invocations.map((p) => p.outcome)).toContain('checkpoint-lost');
      expect(processor.invocations.filter((p) => p.outcome === 'succeeded').flatMap((p) => p.ids)).toEqual(
        range(7),
      );
    } finally {
      reads.remove();
      writes.remove();
    }
  });
});

describe('retry delays', () => {
  it('fixedDelay: the same each time; exponentialBackoff: the minimum, then randomized doubling up to the maximum', () => {
    const fixed = retryDelays(
      { strategy: 'fixedDelay', maxRetryCount: 3, delayIntervalMs: 2000 },
      Math.random,
    );
    expect([fixed(), fixed(), fixed()]).toEqual([2000, 2000, 2000]);

    const next = retryDelays(
      {
        strategy: 'exponentialBackoff',
        maxRetryCount: -1,
        minimumIntervalMs: 5000,
        maximumIntervalMs: 300_000,
      },
      seededRandom(3),
    );
    const delays = Array.from({ length: 10 }, () => next());
    expect(delays[0]).toBe(5000);
    for (let n = 1; n < delays.length; n++) {
      const doubling = 2 ** (n - 1) * 5000;
      expect(delays[n]).toBeGreaterThanOrEqual(Math.min(5000 + 0.8 * doubling, 300_000));
      expect(delays[n]).toBeLessThanOrEqual(Math.min(5000 + 1.2 * doubling, 300_000));
    }
    expect(delays.at(-1)).toBe(300_000);
  });
});
