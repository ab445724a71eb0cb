import { appendFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { type Topology, validateTopology } from '@idempotent-consumers/inbox/internal';

import { PROJECT_ROOT } from '../../src/cli/project';
import {
  checkProject,
  declaredSubscriptions,
  deployedSubscriptions,
  jestIn,
  type NewConsumer,
  unusedConsumer,
  useProjectCopy,
} from '../../src/testing/projectCopy';
import { withSubscription } from '../../src/tools/newConsumer';

/**
 * `npm run new:consumer` as a user runs it on a fresh clone: in a copy of this checkout, one inbox
 * and one versioned consumer (on a new topic and on an existing one), then the copy's own checks.
 *
 * Of the suite, only what the scaffold touches runs in the copy: the type-check, ESLint and Prettier
 * over the whole project (any file could break them), and the jest suites that read what it writes
 * (the new consumers' tests, the topology test that compares functions/ with src/topology.json, the
 * emulator config test), plus what the Bicep deploys. The other suites do not read the new files;
 * running them all again (about six minutes on two cores) would test nothing new. The consumers are
 * named so that they clash with none the project has (unusedConsumer), the sample's or a user's,
 * and the fan-out reads the first of them: it holds after npm run remove:samples too.
 */
const copy = useProjectCopy();
/** What the scaffold test added: an inbox consumer, a versioned one, and a fan-out of the first. */
let parcels: NewConsumer;
let credit: NewConsumer;
let points: NewConsumer;

/** The export new:consumer writes for a function (billing-credit-limit → billingCreditLimit). */
const exportOf = (functionName: string): string =>
  functionName.replace(/-([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());

const files = (): string[] =>
  readdirSync(copy().root, { recursive: true, encoding: 'utf8' })
    .filter((file) => !file.startsWith('node_modules') && !file.startsWith('.cache'))
    .sort();

describe('npm run new:consumer in a copy of the project', () => {
  it('scaffolds consumers that pass the checks, their tests and the topology test, and the Bicep deploys', async () => {
    const before = JSON.parse(copy().read('src/topology.json')) as Topology;
    parcels = unusedConsumer(copy(), {
      name: 'shipping.parcel-counter',
      topic: 'parcel-events',
      subject: 'ParcelShipped',
      newTopic: true,
    });
    const inbox = copy().tool('packages/devkit/src/tools/newConsumer.ts', [
      ...['--name', parcels.name, '--topic', parcels.topic, '--subject', parcels.subject],
    ]);
    credit = unusedConsumer(copy(), {
      name: 'billing.credit-limit',
      topic: 'business-events',
      subject: 'CreditLimitSet',
    });
    const versioned = copy().tool('packages/devkit/src/tools/newConsumer.ts', [
      ...['--name', credit.name, '--topic', credit.topic, '--subject', credit.subject],
      ...['--kind', 'versioned'],
    ]);

    // A second consumer of the parcels (fan-out): the parcel counter's schema and partition key.
    points = {
      ...unusedConsumer(copy(), { name: 'loyalty.points-keeper', topic: parcels.topic, subject: 'Unused' }),
      subject: parcels.subject,
    };
    const fanOut = copy().tool('packages/devkit/src/tools/newConsumer.ts', [
      ...['--name', points.name, '--topic', points.topic, '--subject', points.subject],
      ...['--fan-out', '--example-body', '{"id":"P-1","quantity":2}'],
    ]);

    expect([inbox.status, inbox.stderr, versioned.status, versioned.stderr]).toEqual([0, '', 0, '']);
    expect([fanOut.status, fanOut.stderr]).toEqual([0, '']);
    expect(fanOut.stdout).toContain(`(fan-out: ${parcels.name} reads it too`);
    // The consumer takes the other one as a parameter: src/consumers never imports another consumer.
    expect(copy().read(`functions/${points.function}.ts`)).toContain(
      `app.serviceBusTopic(...consumerTrigger(${exportOf(points.function)}Of(${exportOf(parcels.function)})));`,
    );
    expect(inbox.stdout).toContain(`functions/${parcels.function}.ts`);
    expect(inbox.stdout).toContain(`on the new topic ${parcels.topic}`);
    // Its subscription is a Bicep resource: only a provision creates it.
    expect(inbox.stdout).toMatch(/^ {2}azd up \(or azd provision, then azd deploy\): /m);
    expect(inbox.stdout).not.toMatch(/^ {2}azd deploy\b/m);
    expect(versioned.stdout).toContain(`test/functions/${credit.function}.test.ts`);
    expect(copy().read(`functions/${parcels.function}.ts`)).toContain(
      `app.serviceBusTopic(...consumerTrigger(${exportOf(parcels.function)}));`,
    );
    expect(declaredSubscriptions(copy())).toEqual(
      expect.arrayContaining([credit, points, parcels].map((added) => `${added.topic}/${added.name}`)),
    );
    // A topic's publishers stay as they were; a new topic (the parcels', and the credit limit's
    // after remove:samples) has none.
    const publishers = (declared: Topology): [string, string[]][] =>
      declared.topics.map((t) => [t.name, t.publishers ?? []]);
    const after = JSON.parse(copy().read('src/topology.json')) as Topology;
    const newTopics = after.topics.filter((t) => !before.topics.some((b) => b.name === t.name));
    expect(newTopics.map((t) => t.name)).toContain(parcels.topic);
    expect(publishers(after)).toEqual([
      ...publishers(before),
      ...newTopics.map((t): [string, string[]] => [t.name, []]),
    ]);
    const emulator = JSON.parse(copy().read('emulators/servicebus-config.json')) as {
      UserConfig: { Namespaces: { Topics: { Name: string; Subscriptions: { Name: string }[] }[] }[] };
    };
    expect(
      emulator.UserConfig.Namespaces[0]?.Topics.flatMap((t) =>
        t.Subscriptions.map((s) => `${t.Name}/${s.Name}`),
      ).sort(),
    ).toEqual(declaredSubscriptions(copy()));

    // The send tool validates the new subject with the new consumer's schema, before connecting.
    const invalid = copy().tool('packages/devkit/src/tools/send.ts', [
      '--subject',
      parcels.subject,
      '--body',
      '{"id":"A","quantity":"x"}',
    ]);
    const valid = copy().tool('packages/devkit/src/tools/send.ts', [
      '--subject',
      parcels.subject,
      '--body',
      '{"id":"A","quantity":1}',
    ]);
    expect([invalid.status, invalid.stderr]).toEqual([
      2,
      // Two consumers read the parcels: the one that refuses it is named.
      expect.stringMatching(/invalid event for [\w.-]+:\n {2}- quantity/),
    ]);
    expect([valid.status, valid.stderr]).toEqual([2, expect.stringMatching(/Set SERVICEBUS_NAMESPACE/)]);

    expect(checkProject(copy())).toEqual([]);
    const suites = jestIn(copy(), [
      ...[parcels, credit, points].map((added) => `test/functions/${added.function}.test.ts`),
      'packages/inbox/test/topology.test.ts',
      'packages/devkit/test/emulators/config.test.ts',
    ]);
    expect(suites.ok ? 'passed' : suites.output).toBe('passed');
    expect(suites.output).toMatch(/Test Suites: 5 passed, 5 total/);

    const deployed = await deployedSubscriptions(copy());
    expect(deployed.subscriptions).toEqual(declaredSubscriptions(copy()));
    expect(deployed.filters[`${parcels.topic}/${parcels.name}`]).toEqual({ label: parcels.subject });
    expect(path.basename(copy().root)).toMatch(/^template-copy-/);
  }, 900_000);

  it('takes a subject the topic declared unsubscribed out of that list: a subscription takes it now', () => {
    const declared: Topology = {
      topics: [
        {
          name: 'shipping-events',
          publishers: ['shipping.planner'],
          unsubscribedSubjects: ['ShipmentPlanned', 'ShipmentAudited'],
          subscriptions: [{ name: 'shipping.planner', subjects: ['Order'] }],
        },
      ],
    };
    const request = { name: 'shipping.notifier', topic: 'shipping-events', subject: 'ShipmentPlanned' };

    const once = withSubscription(declared, { ...request, kind: 'inbox' });
    const twice = withSubscription(
      { topics: [{ ...declared.topics[0]!, unsubscribedSubjects: ['ShipmentPlanned'] }] },
      { ...request, kind: 'inbox' },
    );

    expect(once.topics[0]?.unsubscribedSubjects).toEqual(['ShipmentAudited']);
    expect(once.topics[0]?.subscriptions.at(-1)).toEqual({
      name: 'shipping.notifier',
      subjects: ['ShipmentPlanned'],
    });
    expect(validateTopology(once)).toBe(once);
    expect(twice.topics[0]).not.toHaveProperty('unsubscribedSubjects');
  });

  // After the scaffold above, so that its consumer is there to collide with.
  it('refuses usage errors and collisions with its usage and exit code 2, writing nothing', () => {
    const before = files();
    const topology = copy().read('src/topology.json');

    // Another name for the parcel counter's function: shipping.parcel-counter → shipping-parcel.counter.
    const [area = '', first = '', ...rest] = parcels.name.split(/[.-]/);
    const sameFunction = `${area}-${first}.${rest.join('-')}`;
    expect(sameFunction).not.toBe(parcels.name);

    for (const args of [
      [],
      ['--name', 'shipping.parcel-counter', '--topic', 'shipping-events'],
      ['--name', 'Shipping.Parcel', '--topic', 'shipping-events', '--subject', 'ParcelShipped'],
      ['--name', parcels.name, '--topic', 'shipping-events', '--subject', 'ParcelShipped'],
      ['--name', sameFunction, '--topic', 'shipping-events', '--subject', 'ParcelShipped'],
      ['--name', 'shipping.box-counter', '--topic', 'bad/topic', '--subject', 'ParcelShipped'],
      ['--name', 'shipping.box-counter', '--topic', 'shipping-events', '--subject', 'parcel shipped'],
      ['--name', 'shipping.box-counter', '--topic', 't', '--subject', 'ParcelShipped', '--kind', 'saga'],
      ['--name', 'shipping.parcel-counter', '--unknown'],
      // A subject another consumer reads, without --fan-out.
      ['--name', 'billing.parcel-auditor', '--topic', parcels.topic, '--subject', parcels.subject],
    ]) {
      const result = copy().tool('packages/devkit/src/tools/newConsumer.ts', args);

      expect({ args, status: result.status }).toEqual({ args, status: 2 });
      expect(result.stderr).toContain('Usage:\n  npm run new:consumer -- --name <area.consumer>');
    }
    expect(files()).toEqual(before);
    expect(copy().read('src/topology.json')).toBe(topology);
  });

  // After the scaffold above: undo what it wrote, and refuse to lose an edit.
  it('--remove deletes what it wrote, and refuses a file changed since unless --force', () => {
    const source = path.join(copy().root, 'src', 'consumers', `${credit.function}.ts`);
    appendFileSync(source, '// my change\n');

    // The fan-out first: its function file imports the parcel counter.
    const fanOut = copy().tool('packages/devkit/src/tools/newConsumer.ts', ['--remove', points.name]);
    const removed = copy().tool('packages/devkit/src/tools/newConsumer.ts', ['--remove', parcels.name]);
    const refused = copy().tool('packages/devkit/src/tools/newConsumer.ts', ['--remove', credit.name]);
    const edited = existsSync(source);
    const forced = copy().tool('packages/devkit/src/tools/newConsumer.ts', [
      '--remove',
      credit.name,
      '--force',
    ]);

    expect([removed.status, removed.stderr]).toEqual([0, '']);
    // A fan-out is read back (its example body is in its test's JSON file) and removed as written.
    expect([fanOut.status, fanOut.stderr]).toEqual([0, '']);
    expect(fanOut.stdout).toContain(`test/functions/${points.function}.example.json   deleted`);
    expect(removed.stdout).toContain(
      `without the subscription ${parcels.name}, and without the topic ${parcels.topic}, now empty`,
    );
    expect([refused.status, refused.stderr]).toEqual([
      2,
      expect.stringContaining(`src/consumers/${credit.function}.ts changed since new:consumer wrote it`),
    ]);
    expect(edited).toBe(true);
    expect(forced.status).toBe(0);
    // Back to the checkout's: the topology, the emulator config, and no file of either consumer.
    expect(copy().read('src/topology.json')).toBe(
      readFileSync(path.join(PROJECT_ROOT, 'src/topology.json'), 'utf8'),
    );
    expect(copy().read('emulators/servicebus-config.json')).toBe(
      readFileSync(path.join(PROJECT_ROOT, 'emulators/servicebus-config.json'), 'utf8'),
    );
    const added = [parcels, credit, points].map((consumer) => consumer.function);
    expect(files().filter((file) => added.some((name) => file.includes(name)))).toEqual([]);
  });
});
