import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { type Container, CosmosClient } from '@azure/cosmos';
import { buildHarness, DOTNET, warnWhenSkipped } from '@idempotent-consumers/engines';

import { type LocalCosmos, start } from '../../src/cosmos/server';
import { ChangeFeedTrigger } from '../../src/host/changeFeedTrigger';
import { type CosmosDBFunction, loadFunctionApp } from '../../src/host/worker';
import { scaledClock } from '../../src/servicebus/clock';
import { onInvocation, received } from '../host/changeFeedFixtureApp';
/**
 * The local Cosmos DB server against the SDK the Functions host's Cosmos DB extension runs:
 * Microsoft.Azure.Cosmos 3.64.0 in gateway mode, other options at their defaults, driven by the
 * test-only program in packages/engines/src/Cosmos. The program prints what the SDK observed; the
 * assertions are here. Without `dotnet` on the machine the suite is skipped, saying so once.
 */
const run = promisify(execFile);

warnWhenSkipped(
  'packages/local-azure/test/engines/cosmos.test.ts',
  'check the local Cosmos DB server against the .NET SDK',
);

type Results = Record<string, { Error?: string } & Record<string, unknown>>;
let harness: string;
let observed: Results;
let server: LocalCosmos;

let relay: Promise<CosmosDBFunction> | undefined;
/** The fixture relay (packages/local-azure/test/host/changeFeedFixtureApp.ts): lease prefix `relay-`, from the beginning. */
function fixtureRelay(): Promise<CosmosDBFunction> {
  relay ??= loadFunctionApp([join(__dirname, '..', 'host', 'changeFeedFixtureApp.ts')]).then((app) =>
    app.cosmosDB.find((f) => f.name === 'fixture-relay')!,
  );
  return relay;
}

/** A database with a relay's two containers, as the harness's relay and processor use them. */
async function relayContainers(
  client: CosmosClient,
  id: string,
): Promise<{ state: Container; leases: Container }> {
  const { database } = await client.databases.createIfNotExists({ id });
  const { container: state } = await database.containers.createIfNotExists({
    id: 'state',
    partitionKey: '/partitionKey',
  });
  const { container: leases } = await database.containers.createIfNotExists({
    id: 'leases',
    partitionKey: '/id',
  });
  return { state, leases };
}

const receivedIds = (): string[] =>
  received.flatMap((r) => (r.documents as { id: string }[]).map((d) => d.id));

/** Waits until our trigger model has handed the fixture relay document `id`. */
async function deliveredByModel(id: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!receivedIds().includes(id)) {
    if (Date.now() > deadline) throw new Error(`Our trigger model delivered no ${id} in 30 s.`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

(DOTNET ? describe : describe.skip)(
  'Microsoft.Azure.Cosmos (the extension’s SDK, gateway mode) against the local server',
  () => {
    beforeAll(async () => {
      harness = await buildHarness('Cosmos');
      server = await start();
      const { stdout } = await run('dotnet', [harness, server.endpoint, server.key], {
        timeout: 240_000,
      });
      observed = (JSON.parse(stdout) as { results: Results }).results;
    }, 600_000);

    afterAll(async () => {
      await server?.stop();
    });

    const result = <T>(check: string): T => {
      const seen = observed[check];
      expect({ check, error: seen?.Error }).toEqual({ check, error: undefined });
      return seen as T;
    };

    it('creates a database and a container, and works on items with ETags (a stale one gets 412)', () => {
      expect(result('setup')).toEqual({ Database: 'engine', Container: 'state' });
      expect(result('pointOperations')).toEqual({
        Created: 201,
        ReadBalance: 10,
        Replaced: 200,
        ReplacedBalance: 20,
        StaleReplace: 412,
      });
    });

    it('runs transactional batches (HybridRow on the wire) all or nothing: a conflict or a stale ETag fails the batch, the other operations 424, none of them written', () => {
      expect(result('batch')).toEqual({
        Succeeded: {
          Status: 200,
          Operations: [201, 201, 200, 200, 200],
          // Each result carries its resource body; the read sees the create before it.
          Bodies: ['item-1:1', 'item-2:2', 'item-3:3', 'item-3:4', 'item-1:1'],
          UpsertETagIsCurrent: true,
          ReplaceETagIsNew: true,
          Charged: true,
          ReadBack: ['item-1:1', 'item-2:2', 'item-3:4'],
        },
        // The first create would have succeeded alone: it is not written, item-2 keeps its value.
        Conflict: {
          Status: 409,
          IsSuccess: false,
          Operations: [424, 409, 424],
          ReadBack: ['item-5:404', 'item-1:1', 'item-2:2'],
        },
        Stale: { Status: 412, Operations: [424, 412], ReadBack: ['item-6:404', 'item-3:4'] },
      });
    });

    it('runs a parameterized query with ORDER BY in one partition and across partitions: the query plan, the partition key ranges by resource id', () => {
      expect(result('query')).toEqual({
        AcrossPartitions: ['doc-1:20', 'doc-2:5'],
        OnePartition: ['doc-1:20'],
      });
    });

    it('runs GROUP BY across partitions as Azure does: the plan’s rewritten query, the groups merged by the SDK', () => {
      expect(result('groupBy')).toEqual({ Groups: ['account-1:1:20', 'account-2:1:5'] });
    });

    it('refuses a query it does not support at its query plan, with a 400 that names the feature', () => {
      const seen = result<{ Refused: number; Message: string }>('unsupportedQuery');

      expect(seen.Refused).toBe(400);
      expect(seen.Message).toContain(
        'The local server does not support GROUP BY over anything but one container alias',
      );
    });

    it('reads the change feed as the SDK does: from the beginning, the latest version of each item, until 304; then resumes from the continuation', () => {
      expect(result('changeFeed')).toEqual({
        FromBeginning: ['doc-1:20', 'doc-2:5'],
        AfterContinuation: ['doc-3:1'],
      });
    });

    it("runs the extension's change feed processor: it takes a lease, delivers each change once, checkpoints, and a second instance resumes from the lease", () => {
      const seen = result<{ First: string[]; Second: string[]; Leases: string[] }>('processor');

      expect(seen.First).toEqual(['doc-1:20', 'doc-2:5', 'doc-3:1']);
      // Asked to start from the beginning too, the second instance resumes from the checkpoint.
      expect(seen.Second).toEqual(['doc-4:4']);
      // One lease for the one partition key range, and the processor's info document, named as
      // the trigger model names them: <prefix><host>_<database rid>_<container rid>..<range>, .info.
      expect(seen.Leases.map((id) => id.replace(/_[^_.]+_[^_.]+(?=\.)/, '_<db>_<coll>'))).toEqual(
        expect.arrayContaining(['relay-127.0.0.1_<db>_<coll>..0', 'relay-127.0.0.1_<db>_<coll>.info']),
      );
      expect(seen.Leases).toHaveLength(2);
    });

    it('resumes our trigger model (packages/local-azure/src/host/changeFeedTrigger.ts) from the leases the .NET processor wrote: nothing it checkpointed comes again', async () => {
      result('processor');
      const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
      const database = client.database('engine');
      const relay = await fixtureRelay();
      // The fixture relay starts from the beginning when it has no lease: only the lease stops it.
      const trigger = new ChangeFeedTrigger(relay, {
        clock: scaledClock(1000),
        monitored: database.container('state'),
        leases: database.container('leases'),
      });
      received.length = 0;
      try {
        await trigger.start();
        await database
          .container('state')
          .items.upsert({ id: 'doc-5', partitionKey: 'account-5', balance: 5 });
        await deliveredByModel('doc-5');
      } finally {
        await trigger.stop();
        client.dispose();
      }

      expect(receivedIds()).toEqual(['doc-5']);
    });

    it("pages, retries, checkpoints and restarts as the extension's trigger does: a page that fails every attempt is passed, and a restart resumes after it", async () => {
      const documents = ['a', 'b', 'c', 'd', 'e'].map((id) => ({
        id: `doc-${id}`,
        partitionKey: id,
        ...(id === 'c' ? { fail: true } : {}),
      }));
      const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
      const containers = async (id: string) => {
        const { state, leases } = await relayContainers(client, id);
        for (const document of documents) await state.items.create(document);
        return { state, leases };
      };
      type Page = { ids: string[]; attempts: number; outcome: string };
      let engine: {
        First: { Ids: string[]; Attempts: number; Outcome: string }[];
        Second: typeof engine.First;
      };
      let model: { first: Page[]; second: Page[] };
      try {
        await containers('engine-relay');
        const { stdout } = await run(
          'dotnet',
          [harness, server.endpoint, server.key, '--relay', 'engine-relay'],
          { timeout: 120_000 },
        );
        engine = (JSON.parse(stdout) as { results: Results }).results['relay'] as typeof engine;

        // The same script through our trigger model, with the fixture relay's own settings.
        const { state, leases } = await containers('engine-relay-model');
        onInvocation((docs) =>
          docs.some((d) => d['fail'] === true)
            ? Promise.reject(new Error('the page fails'))
            : Promise.resolve(),
        );
        const runModel = async (lastId: string): Promise<Page[]> => {
          const trigger = new ChangeFeedTrigger(await fixtureRelay(), {
            clock: scaledClock(1000),
            monitored: state,
            leases,
          });
          await trigger.start();
          try {
            const deadline = Date.now() + 30_000;
            while (!trigger.invocations.some((i) => i.ids.includes(lastId))) {
              if (Date.now() > deadline) throw new Error(`Our trigger model handled no ${lastId} in 30 s.`);
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
          } finally {
            await trigger.stop();
          }
          return trigger.invocations.map(({ ids, attempts, outcome }) => ({ ids, attempts, outcome }));
        };
        const first = await runModel('doc-e');
        await state.items.create({ id: 'doc-f', partitionKey: 'f' });
        model = { first, second: await runModel('doc-f') };
      } finally {
        onInvocation(() => Promise.resolve());
        client.dispose();
      }
      const asModel = (pages: typeof engine.First): Page[] =>
        pages.map((p) => ({ ids: p.Ids, attempts: p.Attempts, outcome: p.Outcome }));

      // The engine: pages of maxItemsPerInvocation; the failing page tried 1 + maxRetryCount times,
      // then passed (checkpointed); after a restart only what came since.
      expect(asModel(engine.First)).toEqual([
        { ids: ['doc-a', 'doc-b', 'doc-c'], attempts: 3, outcome: 'failed' },
        { ids: ['doc-d', 'doc-e'], attempts: 1, outcome: 'succeeded' },
      ]);
      expect(asModel(engine.Second)).toEqual([{ ids: ['doc-f'], attempts: 1, outcome: 'succeeded' }]);
      expect(model).toEqual({ first: asModel(engine.First), second: asModel(engine.Second) });
    }, 180_000);

    it('resumes the .NET change feed processor from the leases our trigger model wrote: only the change after its checkpoint', async () => {
      const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
      const { state, leases } = await relayContainers(client, 'engine-model');
      let modelLeases: string[];
      try {
        await state.items.upsert({ id: 'doc-a', partitionKey: 'account-a', balance: 1 });
        await state.items.upsert({ id: 'doc-b', partitionKey: 'account-b', balance: 2 });
        const trigger = new ChangeFeedTrigger(await fixtureRelay(), {
          clock: scaledClock(1000),
          monitored: state,
          leases,
        });
        received.length = 0;
        try {
          await trigger.start();
          await deliveredByModel('doc-b');
        } finally {
          await trigger.stop();
        }
        modelLeases = (await leases.items.readAll<{ id: string }>().fetchAll()).resources.map((l) => l.id);
        await state.items.upsert({ id: 'doc-c', partitionKey: 'account-c', balance: 3 });
      } finally {
        client.dispose();
      }
      const { stdout } = await run(
        'dotnet',
        [harness, server.endpoint, server.key, '--resume', 'engine-model'],
        { timeout: 120_000 },
      );
      const resumed = (JSON.parse(stdout) as { results: Results }).results['resumeFromModel'] as {
        Delivered: string[];
        Leases: string[];
      };

      expect(receivedIds()).toEqual(['doc-a', 'doc-b']);
      // Asked to start from the beginning, it starts from our model's checkpoint instead.
      expect(resumed.Delivered).toEqual(['doc-c:3']);
      // It took over our model's lease and info documents: it created none of its own.
      expect([...resumed.Leases].sort()).toEqual([...modelLeases].sort());
      expect(modelLeases).toHaveLength(2);
    }, 120_000);
  },
);
