import { existsSync } from 'node:fs';
import path from 'node:path';

import {
  addUserConsumers,
  checkProject,
  declaredSubscriptions,
  deployedSubscriptions,
  fastSetIn,
  jestIn,
  useProjectCopy,
} from '@idempotent-consumers/devkit/internal/testing/projectCopy';
import { withoutSamples } from '@idempotent-consumers/devkit/internal/tools/removeSamples';
import { markdownFiles, withoutSamplePassages } from '@idempotent-consumers/devkit/internal/tools/sampleDocs';
import { SAMPLE } from '@idempotent-consumers/devkit/internal/tools/samples';
import { type Topology } from '@idempotent-consumers/inbox/internal';

import { topology } from '../../src/topology';

/**
 * `npm run remove:samples` as a user runs it on a fresh clone, in a copy of this checkout (with
 * whatever consumers of the user's own it has: they stay); then the copy's type-check, ESLint and
 * Prettier over the whole project, its docs without their sample passages, the slow suites that read
 * what the removal changes (the docs test, the roles test that reads the live test, the commands'
 * usage, a consumer of your own under npm start), what the Bicep deploys; then the user's first
 * consumers added with new:consumer, and the root tier's app suites (fastSetIn) with them. The same
 * set runs after remove:samples alone and after new:consumer alone in
 * packages/devkit/test/scaffold/staysGreen.test.ts. The other infra suites do not read anything the removal
 * changes but src/topology.json, whose deployment is checked here with bicep snapshot; running them
 * again (minutes on two cores) would test nothing new.
 */
const copy = useProjectCopy();

describe('npm run remove:samples in a copy of the project', () => {
  it('leaves a project without the sample that builds, passes its checks and suites, and deploys what remains', async () => {
    const declared = JSON.parse(copy().read('src/topology.json')) as Topology;
    const remaining = declaredSubscriptions(copy()).filter(
      (entity) => !SAMPLE.consumers.some((name) => entity.endsWith(`/${name}`)),
    );
    const dryRun = copy().tool('packages/devkit/src/tools/removeSamples.ts', ['--dry-run']);
    expect(dryRun.status).toBe(0);
    expect(existsSync(path.join(copy().root, 'sample'))).toBe(true);

    const removed = copy().tool('packages/devkit/src/tools/removeSamples.ts', []);

    expect([removed.status, removed.stderr]).toEqual([0, '']);
    expect(removed.stdout).toContain(dryRun.stdout.split('\n').slice(1, 4).join('\n'));
    // Only advice that applies: the Docker emulators' file is updated, their restart not urged.
    expect(removed.stdout).toContain('(only for the Docker emulators, if you use them)');
    expect(removed.stdout).not.toContain('docker compose');
    for (const file of ['functions/billing-payment-applier.ts', ...SAMPLE.files]) {
      expect({ file, exists: existsSync(path.join(copy().root, file)) }).toEqual({ file, exists: false });
    }
    expect(existsSync(path.join(copy().root, 'packages', 'inbox', 'src', 'index.ts'))).toBe(true);
    expect(existsSync(path.join(copy().root, 'functions', 'purge-expired-markers.ts'))).toBe(true);
    expect(declaredSubscriptions(copy())).toEqual(remaining);
    expect(JSON.parse(copy().read('src/topology.json'))).toEqual(withoutSamples(declared));
    expect(SAMPLE.consumers.filter((name) => copy().read('src/topology.json').includes(`"${name}"`))).toEqual(
      [],
    );
    expect(JSON.parse(copy().read('package.json'))).not.toHaveProperty(['scripts', 'demo']);
    expect(copy().read('.github/workflows/ci.yml')).not.toContain('live-tests');
    // What it suggests next runs: every script it names is still there.
    const scripts = Object.keys((JSON.parse(copy().read('package.json')) as { scripts: object }).scripts);
    const suggested = [...(removed.stdout.split('Next:')[1] ?? '').matchAll(/npm run ([\w:-]+)/g)].map(
      (m) => m[1],
    );
    expect(suggested.length).toBeGreaterThan(0);
    expect(suggested.filter((script) => !scripts.includes(script!))).toEqual([]);
    expect(copy().tool('packages/devkit/src/tools/removeSamples.ts', []).stdout).toContain(
      'nothing to remove',
    );

    const markedDocs = markdownFiles(copy().root).filter((file) => {
      const text = copy().read(file);
      const { text: stripped, problems } = withoutSamplePassages(text);
      return stripped !== text || problems.length > 0;
    });
    expect(markedDocs).toEqual([]);
    expect(copy().read('README.md')).not.toContain('npm run demo');

    expect(checkProject(copy())).toEqual([]);
    const suites = jestIn(copy(), [
      'test/docs',
      'test/infra/roles.test.ts',
      'packages/devkit/test/tools/usage.test.ts',
      'packages/devkit/test/tools/localUsage.test.ts',
      'packages/devkit/test/tools/ownConsumer.test.ts',
    ]);
    expect(suites.ok ? 'passed' : suites.output).toBe('passed');
    expect((await deployedSubscriptions(copy())).subscriptions).toEqual(remaining);

    // Then the user's first consumers, and the root tier as far as the app's changes reach it.
    addUserConsumers(copy());
    expect(fastSetIn(copy(), 2)).toEqual([]);
  }, 900_000);

  it('drops the sample consumers from subscriptions and publishers, keeping a topic either still holds', () => {
    const declared: Topology = {
      topics: [
        {
          name: 'business-events',
          publishers: ['inventory.stock-reserver', 'sales.order-taker'],
          subscriptions: [
            { name: 'shipping.shipment-planner', subjects: ['StockReserved'] },
            { name: 'sales.order-taker', subjects: ['Basket'] },
          ],
        },
        { name: 'outgoing', publishers: ['sales.order-taker'], subscriptions: [] },
        {
          name: 'sample-only',
          publishers: ['inventory.stock-reserver'],
          subscriptions: [{ name: 'billing.payment-applier', subjects: ['PaymentReceived'] }],
        },
      ],
    };

    expect(withoutSamples(declared)).toEqual({
      topics: [
        {
          name: 'business-events',
          publishers: ['sales.order-taker'],
          subscriptions: [{ name: 'sales.order-taker', subjects: ['Basket'] }],
        },
        { name: 'outgoing', publishers: ['sales.order-taker'], subscriptions: [] },
      ],
    });
    // The checkout's own: every subscription but the sample's stays (a user's consumers).
    expect(withoutSamples(topology).topics.flatMap((t) => t.subscriptions.map((s) => s.name))).toEqual(
      topology.topics
        .flatMap((t) => t.subscriptions.map((s) => s.name))
        .filter((name) => !SAMPLE.consumers.includes(name)),
    );
  });

  it('refuses an unknown flag with its usage and exit code 2, removing nothing', () => {
    const before = copy().read('src/topology.json');
    const result = copy().tool('packages/devkit/src/tools/removeSamples.ts', ['--all']);

    expect(result.status).toBe(2);
    expect(result.stderr).toContain('Usage:\n  npm run remove:samples');
    expect(copy().read('src/topology.json')).toBe(before);
  });
});
