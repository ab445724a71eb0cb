/**
 * The Cosmos DB account the shell names (COSMOS_ENDPOINT and COSMOS_KEY, as `npm run test:live`
 * sets them for the conformance suite), read first among local Azure's setup files (jest.config.js),
 * before the project's setup (test/support/setup.ts) replaces them with placeholders.
 */
export const namedCosmosAccount: { endpoint: string; key: string } | undefined =
  process.env.COSMOS_ENDPOINT && process.env.COSMOS_KEY
    ? { endpoint: process.env.COSMOS_ENDPOINT, key: process.env.COSMOS_KEY }
    : undefined;
