import {
  copyProject,
  fastSetIn,
  type ProjectCopy,
  unusedConsumer,
  withHistory,
} from '../support/projectCopy';

/**
 * The project stays green when it becomes yours (issue 41): the whole fast set (`npm run
 * test:fast`) passes in a copy of this checkout, with its history as a clone has it, after the first
 * things a user does: `npm run new:consumer`, `npm run remove:samples`, and both. Each test that
 * fails there is named, with its suite and the copy. The copies run one after the other, each on
 * two cores: three runs of the fast set side by side would only share the same two.
 */
const FAST_SET_WORKERS = 2;

/** At most this many failures of one copy are listed; the rest are counted. */
const LISTED_FAILURES = 40;

/** The user's first consumer, as the report added it (named so that it clashes with none). */
function addConsumer(copy: ProjectCopy): void {
  const own = unusedConsumer(copy, {
    name: 'probe.widget-counter',
    topic: 'business-events',
    subject: 'WidgetCounted',
  });
  const added = copy.tool('tools/newConsumer.ts', [
    ...['--name', own.name, '--topic', own.topic, '--subject', own.subject],
  ]);
  expect([added.status, added.stderr]).toEqual([0, '']);
}

function removeSamples(copy: ProjectCopy): void {
  const removed = copy.tool('tools/removeSamples.ts', []);
  expect([removed.status, removed.stderr]).toEqual([0, '']);
}

describe('the fast set in a copy of the project', () => {
  it.each([
    ['after new:consumer', [addConsumer]],
    ['after remove:samples', [removeSamples]],
    ['after remove:samples, then new:consumer', [removeSamples, addConsumer]],
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
