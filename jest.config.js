/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  setupFiles: ['<rootDir>/test/support/setup.ts'],
  // Finds the Bicep CLI once per run that includes test/infra, showing a first restore's progress.
  globalSetup: '<rootDir>/test/support/bicepSetup.ts',
  // The module the Azure Functions Node.js worker injects (see offline/functions/worker.ts, which
  // does the same for plain Node.js): jest does not go through Module.prototype.require.
  moduleNameMapper: { '^@azure/functions-core$': '<rootDir>/offline/functions/core.ts' },
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  testTimeout: 30_000,
};
