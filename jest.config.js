const { existsSync } = require('node:fs');
const { join } = require('node:path');

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  // sample/ holds the sample's own tests; npm run remove:samples deletes it.
  roots: ['<rootDir>/test', ...(existsSync(join(__dirname, 'sample')) ? ['<rootDir>/sample'] : [])],
  testMatch: ['**/*.test.ts'],
  setupFiles: ['<rootDir>/test/support/setup.ts'],
  // Finds the Bicep CLI once per run that includes test/infra, showing a first restore's progress.
  globalSetup: '<rootDir>/test/support/bicepSetup.ts',
  // The module the Azure Functions Node.js worker injects (see local/host/worker.ts, which
  // does the same for plain Node.js): jest does not go through Module.prototype.require.
  moduleNameMapper: { '^@azure/functions-core$': '<rootDir>/local/host/core.ts' },
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  testTimeout: 30_000,
};
