import { existsSync } from 'node:fs';
import path from 'node:path';

import { type Topology, topology } from '../../src/topology';
import {
  checkProject,
  declaredSubscriptions,
  deployedSubscriptions,
  jestIn,
  useProjectCopy,
} from '../../test/support/projectCopy';
import { withoutSamples } from '../../tools/removeSamples';
import { markdownFiles, withoutSamplePassages } from '../../tools/sampleDocs';
import { SAMPLE } from '../../tools/samples';

/**
 * `npm run remove:samples` as a user runs it on a fresh clone, in a copy of this checkout; then
 * the copy's type-check, ESLint and Prettier over the whole project, its docs without their sample
 * passages, the jest suites that remain and do not exercise the Cosmos DB server's conformance (the
 * library, the topology, the emulator config, the workflow, the worker, the Service Bus models, the
 * generic tools, the roles test that reads the live test, the docs test), what the Bicep deploys, and a consumer of the user's own added with
 * new:consumer. The Cosmos DB conformance and the other infra suites do not read anything the
 * removal changes but src/topology.json, whose deployment is checked here with bicep snapshot;
 * running them again (minutes on two cores) would test nothing new.
 */
const copy = useProjectCopy();

describe('npm run remove:samples in a copy of the project', () => {
  it('leaves a project without the sample that builds, passes its checks and suites, and deploys no subscription', async () => {
    const dryRun = copy().tool('tools/removeSamples.ts', ['--dry-run']);
    expect(dryRun.status).toBe(0);
    expect(existsSync(path.join(copy().root, 'sample'))).toBe(true);

    const removed = copy().tool('tools/removeSamples.ts', []);

    expect([removed.status, removed.stderr]).toEqual([0, '']);
    expect(removed.stdout).toContain(dryRun.stdout.split('\n').slice(1, 4).join('\n'));
    for (const file of ['functions/billing-payment-applier.ts', ...SAMPLE.files]) {
      expect({ file, exists: existsSync(path.join(copy().root, file)) }).toEqual({ file, exists: false });
    }
    expect(existsSync(path.join(copy().root, 'src', 'inbox', 'index.ts'))).toBe(true);
    expect(existsSync(path.join(copy().root, 'functions', 'purge-expired-markers.ts'))).toBe(true);
    expect(declaredSubscriptions(copy())).toEqual([]);
    expect(JSON.parse(copy().read('src/topology.json'))).toEqual({ topics: [] });
    expect(JSON.parse(copy().read('package.json'))).not.toHaveProperty(['scripts', 'demo']);
    expect(copy().read('.github/workflows/ci.yml')).not.toContain('live-tests');
    // What it suggests next runs: every script it names is still there.
    const scripts = Object.keys((JSON.parse(copy().read('package.json')) as { scripts: object }).scripts);
    const suggested = [...(removed.stdout.split('Next:')[1] ?? '').matchAll(/npm run ([\w:-]+)/g)].map(
      (m) => m[1],
    );
    expect(suggested.length).toBeGreaterThan(0);
    expect(suggested.filter((script) => !scripts.includes(script!))).toEqual([]);
    expect(copy().tool('tools/removeSamples.ts', []).stdout).toContain('nothing to remove');

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
      'test/inbox',
      'test/emulators',
      'test/local/host',
      'test/local/servicebus',
      'test/tools',
      'test/infra/roles.test.ts',
    ]);
    expect(suites.ok ? 'passed' : suites.output).toBe('passed');
    expect((await deployedSubscriptions(copy())).subscriptions).toEqual([]);

    const added = copy().tool('tools/newConsumer.ts', [
      ...['--name', 'shipping.parcel-counter', '--topic', 'shipping-events', '--subject', 'ParcelShipped'],
    ]);
    expect([added.status, added.stderr]).toEqual([0, '']);
    const own = jestIn(copy(), [
      'test/functions/shipping-parcel-counter.test.ts',
      'test/inbox/topology.test.ts',
    ]);
    expect(own.ok ? 'passed' : own.output).toBe('passed');
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
    expect(withoutSamples(topology)).toEqual({ topics: [] });
  });

  it('refuses an unknown flag with its usage and exit code 2, removing nothing', () => {
    const before = copy().read('src/topology.json');
    const result = copy().tool('tools/removeSamples.ts', ['--all']);

    expect(result.status).toBe(2);
    expect(result.stderr).toContain('Usage:\n  npm run remove:samples');
    expect(copy().read('src/topology.json')).toBe(before);
  });
});
