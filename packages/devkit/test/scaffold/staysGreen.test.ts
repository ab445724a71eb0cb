import {
  copyProject,
  fastSetIn,
  type ProjectCopy,
  unusedConsumer,
  withHistory,
} from '../../src/testing/projectCopy';

/**
 * The project stays green when it becomes yours (issue 41): the root tier (the jest projects the
 * copy's `npm test` selects: the app's and the library's fast suites; a copy changes only the app,
 * issue 42) passes in a copy of this checkout, with its history as a clone has it, after the first
 * things a user does: `npm run new:consumer`, `npm run remove:samples`, and both. Each test that
 * fails there is named, with its suite and the copy. The copies run one after the other, each on
 * two cores: three runs of the fast set side by side would only share the same two.
 */
const FAST_SET_WORKERS = 2;

/** At most this many failures of one copy are listed; the rest are counted. */
const LISTED_FAILURES = 40;

/**
 * A user's first consumers: the issue's report's, and the docs' examples (README's and
 * tools/README's, an inbox and a versioned one), each named so that it clashes with none the copy
 * already has.
 */
const USER_CONSUMERS = [
  { name: 'probe.widget-counter', topic: 'business-events', subject: 'WidgetCounted' },
  { name: 'shipping.label-printer', topic: 'business-events', subject: 'OrderShipped' },
  { name: 'shipping.parcel-counter', topic: 'shipping-events', subject: 'ParcelShipped' },
  { name: 'billing.credit-limit', topic: 'business-events', subject: 'CreditLimitSet', kind: 'versioned' },
];

function addConsumers(copy: ProjectCopy): void {
  for (const { kind, ...wanted } of USER_CONSUMERS) {
    const own = unusedConsumer(copy, wanted);
    const added = copy.tool('packages/devkit/src/tools/newConsumer.ts', [
      ...['--name', own.name, '--topic', own.topic, '--subject', own.subject],
      ...(kind === undefined ? [] : ['--kind', kind]),
    ]);
    expect([own.name, added.status, added.stderr]).toEqual([own.name, 0, '']);
  }
}

function removeSamples(copy: ProjectCopy): void {
  const removed = copy.tool('packages/devkit/src/tools/removeSamples.ts', []);
  expect([removed.status, removed.stderr]).toEqual([0, '']);
}

describe('the fast set in a copy of the project', () => {
  it.each([
    ['after new:consumer', [addConsumers]],
    ['after remove:samples', [removeSamples]],
    ['after remove:samples, then new:consumer', [removeSamples, addConsumers]],
  ])(
    'passes %s',
    (made, steps) => {
      const copy = copyProject();
      try {
        withHistory(copy);
        for (const step of steps) step(copy);

        const failures = fastSetIn(copy, FAST_SET_WORKERS);

        const listed = failures.slice(0, LISTED_FAILURES).map((failure) => `${made}: ${failure}`);
        if (failures.length > LISTED_FAILURES)
          listed.push(`${made}: and ${failures.length - LISTED_FAILURES} more failed tests`);
        expect(listed).toEqual([]);
      } finally {
        copy.remove();
      }
    },
    1_200_000,
  );
});
