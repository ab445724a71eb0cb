// azd postprovision hook (azure.yaml, the same command on Linux, macOS and Windows): waits until the
// blob service honours the role assignments this provision created, so that the first deploy of
// `azd up` does not fail with 403 (Azure/azure-dev#8026). The platform writes the package with the
// app's identity, which this script cannot act as; it waits instead until the principal azd signed
// in as (AZURE_PRINCIPAL_ID, who got the developer roles) can list the deployment container through
// its read role, which the template creates after the app's. The token comes from azd itself
// (AzureDeveloperCliCredential runs `azd auth token`), so it is that principal whatever the Azure
// CLI is signed in as. See infra/README.md, "The first deployment".
//
// It never stops `azd up` for Azure's sake: when the identity is missing or the wait times out it
// warns and lets the deploy go on (the deploy's own answer decides). It stops it only for a
// mistake in its own settings.
//
// Reads the azd environment: STORAGE_BLOB_ENDPOINT, DEPLOYMENT_CONTAINER_NAME and
// DEVELOPER_ROLES_GRANTED (outputs of infra/main.bicep), AZURE_TENANT_ID (optional),
// DEPLOYMENT_STORAGE_WAIT_SECONDS (default 600; 0 skips the wait) and
// DEPLOYMENT_STORAGE_POLL_SECONDS (default 10).
//
// Plain JavaScript, so that azd runs it with the Node.js the project already needs, on any shell.
/* global AbortSignal, console, fetch, setTimeout, URL */

const NAME = 'wait-for-deployment-storage';
// A blob service version that takes Entra ID tokens (2017-11-09 or later).
const STORAGE_API_VERSION = '2025-01-05';
const STORAGE_SCOPE = 'https://storage.azure.com/.default';
const MAX_ECHO = 200;
const AGAIN =
  "If the deploy fails with 403 (role assignments still propagating), run 'azd deploy' again in a minute.";

class SettingsMistake extends Error {}

function say(text) {
  console.log(`${NAME}: ${text}`);
}

function warn(text) {
  console.warn(`${NAME}: warning: ${text}`);
}

/** At most MAX_ECHO characters of the first non-blank line of a text that came from outside. */
function bounded(text) {
  const line = String(text)
    .split(/\r?\n/)
    .find((candidate) => candidate.trim() !== '');
  return (line ?? '').trim().slice(0, MAX_ECHO);
}

function wholeSeconds(name, fallback) {
  const text = process.env[name] ?? '';
  if (text === '') return fallback;
  if (!/^\d{1,6}$/.test(text)) {
    throw new SettingsMistake(
      `${name} must be a whole number of seconds, not '${bounded(text).slice(0, 40)}'`,
    );
  }
  return Number(text);
}

/** The container's URL, from the blob endpoint azd read from the Bicep outputs. */
function containerUrl(endpoint, container) {
  let url;
  try {
    url = new URL(endpoint);
  } catch {
    throw new SettingsMistake(`STORAGE_BLOB_ENDPOINT is not a URL: '${bounded(endpoint).slice(0, 80)}'`);
  }
  // A bearer token goes over HTTPS only (plain HTTP is allowed to this machine, for tests).
  const loopback = url.hostname === '127.0.0.1' || url.hostname === 'localhost' || url.hostname === '[::1]';
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw new SettingsMistake(
      `STORAGE_BLOB_ENDPOINT must be an https URL, not '${bounded(endpoint).slice(0, 80)}'`,
    );
  }
  if (!/^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])$/.test(container)) {
    throw new SettingsMistake(
      `DEPLOYMENT_CONTAINER_NAME is not a container name: '${bounded(container).slice(0, 80)}'`,
    );
  }
  return new URL(
    `${container}?restype=container&comp=list&maxresults=1`,
    url.href.endsWith('/') ? url : `${url.href}/`,
  );
}

/** Asks azd for a storage token of the principal it is signed in as; a text saying why not, when it cannot. */
async function azdToken() {
  let identity;
  try {
    identity = await import('@azure/identity');
  } catch {
    return {
      missing:
        "@azure/identity is not installed here (run 'npm ci' first; `azd up` does it before provisioning)",
    };
  }
  const tenantId = process.env.AZURE_TENANT_ID || undefined;
  try {
    const credential = new identity.AzureDeveloperCliCredential({ tenantId, processTimeoutInMs: 60_000 });
    const { token } = await credential.getToken(STORAGE_SCOPE);
    return { token };
  } catch (error) {
    return { missing: `azd gave no token (${bounded(error instanceof Error ? error.message : error)})` };
  }
}

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
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
    return bounded(cause instanceof Error ? `${cause.name}: ${cause.message}` : cause);
  }
  const body = await response.text().catch(() => '');
  if (response.ok) return null;
  const code = /<Code>([^<]{1,100})<\/Code>/.exec(body)?.[1];
  return bounded(`${response.status}${code ? ` ${code}` : ''}`);
}

const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

async function main() {
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
  const url = containerUrl(endpoint, container);

  const { token, missing } = await azdToken();
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

main().catch((error) => {
  if (error instanceof SettingsMistake) {
    console.error(`${NAME}: ${error.message}`);
  } else {
    console.error(`${NAME}: failed: ${bounded(error instanceof Error ? error.stack : error)}`);
  }
  process.exitCode = 1;
});
