// Mutation testing of the library (npm run test:mutation; packages/devkit/src/build/README.md#mutation-testing):
// Stryker changes packages/inbox/src one mutant at a time and runs the library's suites that cover it
// (packages/devkit/src/build/jest.mutation.config.js). A mutant no test notices is a behaviour no test pins.

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'jest',
  jest: { projectType: 'custom', configFile: 'packages/devkit/src/build/jest.mutation.config.js' },
  // The testing entry is the tests' own scaffolding (defaults for a delivery, a test consumer): the
  // suites that use it pin it, and a mutant of a default there tests the test, not the library.
  mutate: ['packages/inbox/src/**/*.ts', '!packages/inbox/src/testing.ts'],
  // Each mutant runs only the tests that reach its code.
  coverageAnalysis: 'perTest',
  // A mutant in code that runs when a module loads (a constant, a regular expression) needs every
  // suite run again in a fresh process: minutes each. They are listed as ignored in the report.
  ignoreStatic: true,
  ignorePatterns: ['.cache', '.scratch', 'dist', 'coverage', '.azure'],
  tempDirName: '.cache/stryker/tmp',
  cleanTempDir: 'always',
  reporters: ['clear-text', 'progress', 'html', 'json'],
  // Each survivor with its diff, not the tests each mutant ran (hundreds of lines per run).
  clearTextReporter: { logTests: false, reportTests: false },
  htmlReporter: { fileName: '.cache/stryker/report.html' },
  jsonReporter: { fileName: '.cache/stryker/report.json' },
  incrementalFile: '.cache/stryker/incremental.json',
  // The score (killed and timed-out mutants over those some test runs) below which the run fails.
  thresholds: { high: 95, low: 90, break: 90 },
  timeoutMS: 10_000,
};
