// What the azd hook scripts (infra/scripts/*.mjs) share: bounded echo of outside text, settings
// read from the azd environment, the token of the principal azd signed in as, and HTTPS-only
// endpoints. Plain JavaScript, so that azd runs them with the Node.js the project already needs.
/* global console, URL */

/** A mistake in the hook's own settings: the only thing that stops azd. */
export class SettingsMistake extends Error {}

const MAX_ECHO = 200;

/** At most 200 characters of the first non-blank line of a text that came from outside. */
export function bounded(text) {
  const line = String(text)
    .split(/\r?\n/)
    .find((candidate) => candidate.trim() !== '');
  return (line ?? '').trim().slice(0, MAX_ECHO);
}

/** Printing under the script's name; warnings go to stderr. */
export function reporter(name) {
  return {
    say: (text) => console.log(`${name}: ${text}`),
    warn: (text) => console.warn(`${name}: warning: ${text}`),
  };
}

/** A whole number of seconds from the environment, or the default when unset. */
export function wholeSeconds(name, fallback) {
  const text = process.env[name] ?? '';
  if (text === '') return fallback;
  if (!/^\d{1,6}$/.test(text)) {
    throw new SettingsMistake(
      `${name} must be a whole number of seconds, not '${bounded(text).slice(0, 40)}'`,
    );
  }
  return Number(text);
}

/** A URL a bearer token may go to: HTTPS, or plain HTTP to this machine (tests). */
export function tokenSafeUrl(name, text) {
  let url;
  try {
    url = new URL(text);
  } catch {
    throw new SettingsMistake(`${name} is not a URL: '${bounded(text).slice(0, 80)}'`);
  }
  const loopback = url.hostname === '127.0.0.1' || url.hostname === 'localhost' || url.hostname === '[::1]';
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw new SettingsMistake(`${name} must be an https URL, not '${bounded(text).slice(0, 80)}'`);
  }
  return url.href.endsWith('/') ? url : new URL(`${url.href}/`);
}

/**
 * A token for `scope` of the principal azd is signed in as (AzureDeveloperCliCredential runs
 * `azd auth token`), whatever the Azure CLI is signed in as; `missing` says why there is none.
 */
export async function azdToken(scope) {
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
    const { token } = await credential.getToken(scope);
    return { token };
  } catch (error) {
    return { missing: `azd gave no token (${bounded(error instanceof Error ? error.message : error)})` };
  }
}

/** Why a request failed, bounded: its status and the service's error code, or the network error. */
export function failureOf(error) {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  return bounded(cause instanceof Error ? `${cause.name}: ${cause.message}` : cause);
}

/** Runs a hook step as its own process: a settings mistake or a bug exits 1, with its message. */
export async function runStep(name, step) {
  try {
    await step();
  } catch (error) {
    console.error(
      error instanceof SettingsMistake
        ? `${name}: ${error.message}`
        : `${name}: failed: ${bounded(error instanceof Error ? error.stack : error)}`,
    );
    process.exitCode = 1;
  }
}
