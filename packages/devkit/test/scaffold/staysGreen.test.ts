import {
  addUserConsumers,
  copyProject,
  fastSetIn,
  type ProjectCopy,
  withHistory,
} from '../../src/testing/projectCopy';

/**
 * The project stays green when it becomes yours (issue 41): the root tier as far as the app's
 * changes reach it (the app's suites, the sample's fast ones among them; the library's suites do not
 * read the app: see fastSetIn) passes in a copy of this checkout, with its history as a clone has
 * it, after the first things a user does: `npm run new:consumer` and `npm run remove:samples`. Both
 * in turn are the remove:samples copy's (sample/test/removeSamples.test.ts), which runs the same set
 * at its end. Each test that fails there is named, with its suite and the copy. The copies run one
 * after the other, each on two cores: two runs of the fast set side by side would only share them.
 */
const FAST_SET_WORKERS = 2;

/** At most this many failures of one copy are listed; the rest are counted. */
const LISTED_FAILURES = 40;

function removeSamples(copy: ProjectCopy): void {
  const removed = copy.tool('packages/devkit/src/tools/removeSamples.ts', []);
  expect([removed.status, removed.stderr]).toEqual([0, '']);
}

describe('the fast set in a copy of the project', () => {
  it.each([
    ['after new:consumer', [addUserConsumers]],
    ['after remove:samples', [removeSamples]],
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
