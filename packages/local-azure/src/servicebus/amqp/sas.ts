import { createHmac, timingSafeEqual } from 'node:crypto';

import { CONDITIONS, PeerError } from './errors';

/**
 * Shared access signatures, checked as Service Bus checks them. A client signs
 * `<url-encoded resource URI>\n<expiry in Unix seconds>` with HMAC-SHA256 under a key's UTF-8
 * bytes and puts on $cbs (operation put-token, type servicebus.windows.net:sastoken)
 *   SharedAccessSignature sr=<url-encoded resource URI>&sig=<url-encoded base64>&se=<expiry>&skn=<key name>
 * The signature is checked over `sr` exactly as the token spells it: @azure/service-bus encodes
 * with encodeURIComponent, the .NET client with WebUtility.UrlEncode, and both sign what they send.
 *
 * The peer has one key, the Service Bus emulator's (its connection string names it), with every
 * right (Manage, Send, Listen). A token authorises the links whose entity path starts with the
 * token's resource path, segment by segment and ignoring case; the scheme, host and port of the
 * resource are not compared (a client may say localhost or 127.0.0.1). Azure AD tokens (type jwt)
 * are refused: the peer cannot check them, and nothing here signs in with them.
 */
export const LOCAL_KEY = { name: 'RootManageSharedAccessKey', value: 'SAS_KEY_VALUE' } as const;

export const SAS_TOKEN_TYPE = 'servicebus.windows.net:sastoken';

/** A resource path (lower case, no leading or trailing slash) and when its token expires, ms. */
export interface Grant {
  path: string;
  expiresAt: number;
}

const MAX_TOKEN_LENGTH = 4096;

/** The grant a put-token carries, or a PeerError with amqp:unauthorized-access saying why not. */
export function checkToken(
  type: unknown,
  token: unknown,
  now: number,
  key: { name: string; value: string } = LOCAL_KEY,
): Grant {
  if (type !== SAS_TOKEN_TYPE)
    throw unauthorized(
      `The local peer accepts shared access signatures (${SAS_TOKEN_TYPE}) only, not '${bounded(type)}': ` +
        'connect with the connection string it prints.',
    );
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH)
    throw unauthorized('The token is missing or longer than a shared access signature can be.');
  const prefix = 'SharedAccessSignature ';
  if (!token.startsWith(prefix)) throw unauthorized("The token does not start with 'SharedAccessSignature'.");
  const fields = new Map<string, string>();
  for (const pair of token.slice(prefix.length).split('&')) {
    const at = pair.indexOf('=');
    if (at > 0) fields.set(pair.slice(0, at).toLowerCase(), pair.slice(at + 1));
  }
  const [sr, sig, se, skn] = ['sr', 'sig', 'se', 'skn'].map((name) => fields.get(name));
  if (sr === undefined || sig === undefined || se === undefined || skn === undefined)
    throw unauthorized('The token lacks one of sr, sig, se and skn.');
  if (skn !== key.name)
    throw unauthorized(
      `The key '${bounded(skn)}' is not a key of this namespace (the local peer's is '${key.name}').`,
    );
  if (!/^\d{1,12}$/.test(se)) throw unauthorized('The token expiry (se) is not a number of seconds.');
  const expiresAt = Number(se) * 1000;
  if (expiresAt <= now)
    throw unauthorized(`ExpiredToken: The token expired at ${new Date(expiresAt).toISOString()}.`);
  const expected = createHmac('sha256', Buffer.from(key.value, 'utf8')).update(`${sr}\n${se}`).digest();
  const given = Buffer.from(decode(sig, false), 'base64');
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    throw unauthorized('InvalidSignature: The token has an invalid signature.');
  return { path: resourcePath(decode(sr)), expiresAt };
}

/** Whether a grant, unexpired at `now`, covers the entity a link attaches to. */
export function covers(grants: Iterable<Grant>, entityPath: string, now: number): boolean {
  const path = entityPath.toLowerCase().replace(/^\/+|\/+$/g, '');
  for (const grant of grants) {
    if (grant.expiresAt <= now) continue;
    if (grant.path === '' || path === grant.path || path.startsWith(`${grant.path}/`)) return true;
  }
  return false;
}

export function unauthorized(message: string): PeerError {
  return new PeerError(CONDITIONS.unauthorizedAccess, message);
}

/** sb://host:port/Topic/Subscriptions/Sub → topic/subscriptions/sub */
function resourcePath(resource: string): string {
  return resource
    .replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '')
    .toLowerCase()
    .replace(/^\/+|\/+$/g, '');
}

/** WebUtility.UrlEncode writes a space as '+' (a resource may have one; base64 has '+' of its own). */
function decode(value: string, plusIsSpace = true): string {
  try {
    return decodeURIComponent(plusIsSpace ? value.replace(/\+/g, ' ') : value);
  } catch {
    throw unauthorized('The token is not URL-encoded.');
  }
}

function bounded(value: unknown): string {
  const text = String(value);
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}
