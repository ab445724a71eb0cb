// The first step of the azd postprovision hook (postprovision.mjs): waits until the blob service
// honours the role assignments this provision created, so that the first deploy of `azd up` does not
// fail with 403 (Azure/azure-dev#8026). The platform writes the package with the app's identity,
// which this script cannot act as; it waits instead until the principal azd signed in as
// (AZURE_PRINCIPAL_ID, who got the developer roles) can list the deployment container through its
// read role, which the template creates after the app's. The token comes from azd itself, so it is
// that principal whatever the Azure CLI is signed in as. See infra/README.md, "The first deployment".
//
// It never stops `azd up` for Azure's sake: when the identity is missing or the wait times out it
// warns and lets the deploy go on (the deploy's own answer decides). It stops it only for a
// mistake in its own settings.
//
// Reads the azd environment: STORAGE_BLOB_ENDPOINT, DEPLOYMENT_CONTAINER_NAME and
// DEVELOPER_ROLES_GRANTED (outputs of infra/main.bicep), AZURE_TENANT_ID (optional),
// DEPLOYMENT_STORAGE_WAIT_SECONDS (default 600; 0 skips the wait) and
// DEPLOYMENT_STORAGE_POLL_SECONDS (default 10).
/* global AbortSignal, fetch, setTimeout, URL */
import { pathToFileURL } from 'node:url';

import {
  azdToken,
  bounded,
  failureOf,
  reporter,
  runStep,
  SettingsMistake,
  tokenSafeUrl,
  wholeSeconds,
} from './common.mjs';

const { say, warn } = reporter('wait-for-deployment-storage');
// A blob service version that takes Entra ID tokens (2017-11-09 or later).
const STORAGE_API_VERSION = '2025-01-05';
const STORAGE_SCOPE = 'https://storage.azure.com/.default';
const AGAIN =
  "If the deploy fails with 403 (role assignments still propagating), run 'azd deploy' again in a minute.";

/** Lists at most one blob: null when the container answers, otherwise why not (bounded). */
async function refusal(url, token) {
  let response;
  try {
    response = await fetch(url, {
      headers: {
        Authorization: `Bearer ${token}`,
        'x-ms-version': STORAGE_API_VERSION,
        'x-ms-date': new Date().toUTCString(),
      },
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    return failureOf(error);
  }
  const body = await response.text().catch(() => '');
  if (response.ok) return null;
  const code = /<Code>([^<]{1,100})<\/Code>/.exec(body)?.[1];
  return bounded(`${response.status}${code ? ` ${code}` : ''}`);
}

const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

export async function waitForDeploymentStorage() {
  const timeoutSeconds = wholeSeconds('DEPLOYMENT_STORAGE_WAIT_SECONDS', 600);
  const pollSeconds = wholeSeconds('DEPLOYMENT_STORAGE_POLL_SECONDS', 10);
  if (timeoutSeconds === 0) {
    say('skipped: DEPLOYMENT_STORAGE_WAIT_SECONDS is 0.');
    return;
  }
  if (process.env.DEVELOPER_ROLES_GRANTED === 'false') {
    say('skipped: the developer roles are off (grantDeveloperRoles), so there is no read role to wait on.');
    return;
  }
  const endpoint = process.env.STORAGE_BLOB_ENDPOINT ?? '';
  const container = process.env.DEPLOYMENT_CONTAINER_NAME ?? '';
  if (endpoint === '' || container === '') {
    throw new SettingsMistake(
      'STORAGE_BLOB_ENDPOINT and DEPLOYMENT_CONTAINER_NAME are not set; azd sets them from the outputs of infra/main.bicep when it runs this hook after provisioning.',
    );
  }
  const blobs = tokenSafeUrl('STORAGE_BLOB_ENDPOINT', endpoint);
  if (!/^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])$/.test(container)) {
    throw new SettingsMistake(
      `DEPLOYMENT_CONTAINER_NAME is not a container name: '${bounded(container).slice(0, 80)}'`,
    );
  }
  const url = new URL(`${container}?restype=container&comp=list&maxresults=1`, blobs);

  const { token, missing } = await azdToken(STORAGE_SCOPE);
  if (token === undefined) {
    warn(`not waiting: ${missing}. ${AGAIN}`);
    return;
  }

  say(
    `waiting up to ${timeoutSeconds} s until container '${container}' answers the principal azd signed in as (role assignments propagating)`,
  );
  const started = Date.now();
  for (let attempt = 1; ; attempt += 1) {
    const reason = await refusal(url, token);
    const elapsed = Math.round((Date.now() - started) / 1000);
    if (reason === null) {
      say(`ready after ${elapsed} s (attempt ${attempt}).`);
      return;
    }
    if (elapsed + pollSeconds > timeoutSeconds) {
      warn(
        `container '${container}' still refuses the principal azd signed in as after ${elapsed} s (${attempt} attempts): ${reason || 'no reason given'}. ` +
          `Going on with the deploy. If it fails with 403, run 'azd deploy' in a few minutes, or raise DEPLOYMENT_STORAGE_WAIT_SECONDS; if public network access is disabled, deploy from inside the network.`,
      );
      return;
    }
    say(
      `not yet after ${elapsed} s (attempt ${attempt}): ${reason || 'no reason given'}; next try in ${pollSeconds} s`,
    );
    await sleep(pollSeconds);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await runStep('wait-for-deployment-storage', waitForDeploymentStorage);
}
