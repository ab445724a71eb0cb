import { appFunctions } from '@idempotent-consumers/devkit';
import { loadFunctionApp, useLocalStack } from '@idempotent-consumers/local-azure';

import { checkWriteRegions, inboxRuntime } from '../../src/app';

/**
 * The app refuses to start against a Cosmos DB account that accepts writes in two regions (issue
 * 25): loaded through the worker's path, its appStart hook reads the account from the local Cosmos
 * DB server in its multi-region-write mode, and the start fails with the reason, before any
 * trigger could run; INBOX_ALLOW_MULTIPLE_WRITE_REGIONS=true lets it start.
 */
const stack = useLocalStack();

it('does not start on an account with two write regions, and says why', async () => {
  await stack.server.setWriteRegions(['westeurope', 'northeurope']);

  await expect(loadFunctionApp(appFunctions())).rejects.toThrow(
    /Invalid configuration:\n {2}- The Cosmos DB account accepts writes in 2 regions \(westeurope, northeurope\)/,
  );
});

it('is not checked by a tool that only reads what the app registered (npm run new:consumer, send)', async () => {
  await stack.server.setWriteRegions(['westeurope', 'northeurope']);

  const app = await loadFunctionApp(appFunctions(), { definitionsOnly: true });

  // The template's own functions, there whatever consumers the project has.
  expect(app.functions.map((f) => f.name)).toEqual(
    expect.arrayContaining(['outbox-relay', 'outbox-sweeper', 'purge-expired-markers']),
  );
  expect(app.warnings).toEqual([]);
});

it('starts on it when the operator has accepted duplicate effects', async () => {
  await stack.server.setWriteRegions(['westeurope', 'northeurope']);
  const runtime = inboxRuntime();
  runtime.settings = {
    ...runtime.settings,
    cosmos: { ...runtime.settings.cosmos, allowMultipleWriteRegions: true },
  };

  await expect(checkWriteRegions()).resolves.toBeUndefined();
});
