const { existsSync } = require('node:fs');
const { join } = require('node:path');

/**
 * The suites that take minutes, not seconds: the Bicep CLI, the docs (compiled), copies of the
 * project (the scaffold, remove:samples, the fast set again in copies made yours), the commands run as a user runs them (usage errors, npm
 * start's walkthrough and its console in a browser, the demo and the benchmark), the deployment
 * package, and the whole-pipeline scenarios with the property test. The projects below run
 * everything else, by owner.
 */
const SLOW = [
  '<rootDir>/test/infra/',
  '<rootDir>/test/docs/',
  '<rootDir>/packages/devkit/test/scaffold/',
  '<rootDir>/packages/devkit/test/tools/usage.test.ts',
  '<rootDir>/packages/devkit/test/tools/localUsage.test.ts',
  '<rootDir>/packages/devkit/test/tools/ownConsumer.test.ts',
  '<rootDir>/packages/devkit/test/verify/planted.test.ts',
  '<rootDir>/packages/devkit/test/engines/',
  '<rootDir>/packages/local-azure/test/engines/',
  '<rootDir>/sample/test/scenario/',
  '<rootDir>/sample/test/commands.test.ts',
  '<rootDir>/sample/test/package.test.ts',
  '<rootDir>/sample/test/walkthrough.test.ts',
  '<rootDir>/sample/test/console.test.ts',
  '<rootDir>/packages/devkit/test/console/security.test.ts',
  '<rootDir>/sample/test/removeSamples.test.ts',
  '<rootDir>/sample/test/purgeUnderLoad.test.ts',
];

/** Whether a folder of the project is there: sample/ goes with npm run remove:samples, packages/ in an app that installs them. */
const here = (folder) => existsSync(join(__dirname, folder));

/** What every suite shares. */
const suite = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test', ...['packages', 'sample'].filter(here).map((folder) => `<rootDir>/${folder}`)],
  setupFiles: ['<rootDir>/test/support/setup.ts'],
  // The module the Azure Functions Node.js worker injects (see local Azure's host/worker.ts, which
  // does the same for plain Node.js): jest does not go through Module.prototype.require.
  // Local Azure's own folder where it is one (Stryker's sandbox has its own copy of it, which the
  // project's node_modules link does not reach), else the installed package.
  moduleNameMapper: {
    '^@azure/functions-core$': here('packages/local-azure')
      ? '<rootDir>/packages/local-azure/src/host/core.ts'
      : '<rootDir>/node_modules/@idempotent-consumers/local-azure/src/host/core.ts',
  },
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // The workspace packages are TypeScript sources: installed from tarballs (not linked), they are in
  // node_modules, which jest otherwise leaves untransformed.
  transformIgnorePatterns: ['/node_modules/(?!@idempotent-consumers/)'],
};

/**
 * One test project per owner. The tiers are package.json's: `npm test` runs `app` and `inbox` (the
 * app's own suites, the sample's fast ones among them, and the library's fast suites: no .NET, no
 * browser); `npm run test:all` runs every project (CI runs it).
 */
const OWNERS = [
  { displayName: 'app', roots: ['<rootDir>/test', ...(here('sample') ? ['<rootDir>/sample'] : [])] },
  { displayName: 'inbox', roots: ['<rootDir>/packages/inbox'] },
  {
    displayName: 'local-azure',
    roots: ['<rootDir>/packages/local-azure'],
    // The account a live run names, read before the project's setup replaces it.
    setupFiles: ['<rootDir>/packages/local-azure/test/support/namedAccount.ts', ...suite.setupFiles],
  },
  { displayName: 'devkit', roots: ['<rootDir>/packages/devkit'] },
  { displayName: 'engines', roots: ['<rootDir>/packages/engines'] },
];

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    // A package's project only where the package is a folder of this project (not installed).
    ...OWNERS.filter((owner) => owner.roots.every((root) => here(root.replace('<rootDir>/', '')))).map(
      (owner) => ({
        ...suite,
        ...owner,
        testMatch: ['**/*.test.ts'],
        testPathIgnorePatterns: ['/node_modules/', ...SLOW],
      }),
    ),
    {
      ...suite,
      displayName: 'slow',
      testMatch: SLOW.map((path) => (path.endsWith('/') ? `${path}**/*.test.ts` : path)),
    },
  ],
  // Every core: the suites start their own servers on free ports and share nothing else.
  maxWorkers: '100%',
  // Finds the Bicep CLI once per run that includes test/infra, showing a first restore's progress.
  globalSetup: '<rootDir>/test/support/bicepSetup.ts',
  testTimeout: 30_000,
};
