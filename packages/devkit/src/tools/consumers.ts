import path from 'node:path';

import type { Consumer } from '@idempotent-consumers/inbox/internal';
import { loadFunctionApp } from '@idempotent-consumers/local-azure';

import { appFunctions, PROJECT_ROOT } from '../cli/project';

/**
 * The app's consumers, found as the host finds its functions: functions/*.ts loaded through the
 * worker path (packages/local-azure/src/host/worker.ts), each registering its consumer with consumerTrigger.
 * There is no other list of consumers.
 *
 * Loading src/app.ts validates the app's settings. A tool that only reads the consumers'
 * definitions (their names and schemas) and never runs them passes `definitionsOnly`: the app is
 * not started (no appStart hook runs), and without COSMOS_ENDPOINT it is loaded with a local
 * placeholder that refuses connections.
 */
export async function loadConsumers(
  options: { definitionsOnly?: boolean } = {},
): Promise<ReadonlyMap<string, Consumer>> {
  const placeholders =
    options.definitionsOnly === true && !process.env.COSMOS_ENDPOINT?.trim()
      ? Object.entries(PLACEHOLDER_SETTINGS).filter(([name]) => process.env[name] === undefined)
      : [];
  for (const [name, value] of placeholders) process.env[name] = value;
  try {
    await loadFunctionApp(appFunctions(), { definitionsOnly: options.definitionsOnly === true });
  } finally {
    for (const [name] of placeholders) delete process.env[name];
  }
  // The app's module the function files loaded, read at run time (a static import would validate
  // the settings first, and tie the dev kit to one app).
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the app's, loaded after it on purpose
  const app = require(path.join(PROJECT_ROOT, 'src', 'app')) as AppModule;
  return app.registeredConsumers();
}

/** What the dev kit reads of the app's src/app.ts. */
interface AppModule {
  registeredConsumers(): ReadonlyMap<string, Consumer>;
}

const PLACEHOLDER_SETTINGS = {
  COSMOS_ENDPOINT: 'http://127.0.0.1:9/',
  COSMOS_KEY: 'cGxhY2Vob2xkZXIta2V5LWZvci10ZXN0cw==',
};
