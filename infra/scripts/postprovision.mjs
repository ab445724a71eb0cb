// The azd postprovision hook (azure.yaml runs `node infra/scripts/postprovision.mjs` on Linux,
// macOS and Windows alike), in two steps, each also runnable alone:
//   1. wait-for-deployment-storage.mjs: wait until the new role assignments are honoured, so that
//      the first deploy of `azd up` does not fail with 403;
//   2. retired-subscriptions.mjs: delete the empty subscriptions of consumers src/topology.json no
//      longer declares, and name the ones that still hold messages.
// Either step stops azd (exit 1) only for a mistake in its own settings; the second runs anyway.
import { runStep } from './common.mjs';
import { retireSubscriptions } from './retired-subscriptions.mjs';
import { waitForDeploymentStorage } from './wait-for-deployment-storage.mjs';

await runStep('wait-for-deployment-storage', waitForDeploymentStorage);
await runStep('retired-subscriptions', retireSubscriptions);
