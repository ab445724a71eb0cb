/** A test runner's hooks, as jest (and mocha, vitest with globals) define them. */
export interface TestHooks {
  beforeAll: (fn: () => unknown) => void;
  afterAll: (fn: () => unknown) => void;
  beforeEach: (fn: () => unknown) => void;
  afterEach: (fn: () => unknown) => void;
}

/**
 * The running test runner's hooks, looked up when a fixture is set up in a test file: local Azure
 * itself runs without one (npm start), so its entry neither needs nor types the runner's globals.
 */
export function testHooks(): TestHooks {
  const runner = globalThis as Partial<TestHooks>;
  const { beforeAll, afterAll, beforeEach, afterEach } = runner;
  if (!beforeAll || !afterAll || !beforeEach || !afterEach)
    throw new Error(
      'A test fixture of local Azure is set up in a test file, under jest (its hooks are missing here).',
    );
  return { beforeAll, afterAll, beforeEach, afterEach };
}
