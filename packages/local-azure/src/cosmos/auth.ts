import { createHmac, timingSafeEqual } from 'node:crypto';

import { CosmosError } from './errors';

/**
 * Master-key authorization, as the SDK signs it:
 *   authorization = urlencode("type=master&ver=1.0&sig=" + base64(HMAC-SHA256(base64decode(key), text)))
 *   text = verb + "\n" + resourceType + "\n" + resourceLink + "\n" + x-ms-date + "\n\n"   (verb, type, date lower-cased)
 * where resourceLink is the name-based path, or, for a request addressed by resource ids, the last
 * id lower-cased.
 * https://learn.microsoft.com/rest/api/cosmos-db/access-control-on-cosmosdb-resources
 */
export interface SignedResource {
  verb: string;
  /** `dbs`, `colls`, `docs`, `pkranges`, or '' for the account. */
  resourceType: string;
  /** Decoded path of the resource the request is about, without leading slash (`dbs/db/colls/c`). */
  resourceLink: string;
}

export function verifyMasterKey(
  headers: Record<string, string | string[] | undefined>,
  resource: SignedResource,
  keyBytes: Buffer,
): void {
  const header = single(headers.authorization);
  if (header === undefined) {
    throw new CosmosError(
      401,
      'Required Header authorization is missing. Ensure a valid Authorization token is passed.',
    );
  }
  const date = single(headers['x-ms-date']) ?? single(headers.date);
  if (date === undefined) {
    throw new CosmosError(401, 'Required Header x-ms-date is missing. Ensure a valid x-ms-date is passed.');
  }
  const fields = parseToken(header);
  if (fields.type !== 'master' || fields.ver !== '1.0' || fields.sig === undefined) {
    throw new CosmosError(
      401,
      `The authorization token is not a master key token (type=master&ver=1.0&sig=...).`,
    );
  }
  const signed = (link: string): string =>
    `${resource.verb.toLowerCase()}\n${resource.resourceType.toLowerCase()}\n${link}\n${date.toLowerCase()}\n\n`;
  const text = signed(resource.resourceLink);
  // A request addressed by resource ids (dbs/<rid>/colls/<rid>/..., as the .NET SDK reads partition
  // key ranges) is signed over the last id alone, lower-cased.
  const ridText = signed(resource.resourceLink.split('/').at(-1)?.toLowerCase() ?? '');
  const given = Buffer.from(fields.sig, 'base64');
  const matches = (payload: string): boolean => {
    const expected = createHmac('sha256', keyBytes).update(payload, 'utf8').digest();
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  if (!matches(text) && !(resource.resourceLink.includes('/') && matches(ridText))) {
    throw new CosmosError(
      401,
      "The input authorization token can't serve the request. The wrong key is being used or the expected payload is not built as per the protocol. " +
        `Server used the following payload to sign: '${text.replace(/\n/g, '\\n')}'`,
    );
  }
}

function parseToken(header: string): Record<string, string> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(header);
  } catch {
    return {};
  }
  const fields: Record<string, string> = {};
  for (const part of decoded.split('&')) {
    const at = part.indexOf('=');
    if (at > 0) fields[part.slice(0, at)] = part.slice(at + 1);
  }
  return fields;
}

const single = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value;
