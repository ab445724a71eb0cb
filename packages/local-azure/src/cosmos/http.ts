import type { IncomingMessage, ServerResponse } from 'node:http';

import { badRequest, CosmosError, errorBody } from './errors';
import { FAILED_REQUEST_CHARGE } from './requestCharge';

/** What the server answers to one request, before it is written to the wire. */
export interface Reply {
  status: number;
  body?: unknown;
  requestCharge: number;
  headers?: Record<string, string>;
}

export type RequestHeaders = IncomingMessage['headers'];

const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

export async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_REQUEST_BYTES)
      throw new CosmosError(413, `Request size is too large (over ${MAX_REQUEST_BYTES} bytes).`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export function parseJson(raw: Buffer): unknown {
  if (raw.length === 0)
    throw badRequest('The request payload is empty. Ensure to provide a valid request payload.');
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw badRequest('The request payload is invalid. Ensure to provide a valid request payload.');
  }
}

/** `sessionToken`: the session token of the account's latest committed write. */
export function send(response: ServerResponse, reply: Reply, activityId: string, sessionToken: string): void {
  // A Buffer is sent as it is (a .NET SDK batch's HybridRow results, hybridRow.ts); anything else as JSON.
  const binary = Buffer.isBuffer(reply.body);
  const payload =
    reply.body === undefined ? '' : binary ? (reply.body as Buffer) : JSON.stringify(reply.body);
  response.writeHead(reply.status, {
    'content-type': binary ? 'application/octet-stream' : 'application/json',
    'x-ms-activity-id': activityId,
    'x-ms-request-charge': String(reply.requestCharge),
    'x-ms-session-token': sessionToken,
    ...reply.headers,
  });
  response.end(payload);
}

export const throttled = (retryAfterMs: number): CosmosError =>
  Object.assign(
    new CosmosError(
      429,
      'Request rate is large. More Request Units may be needed, so no changes were made. Please retry this request later.',
      3200,
    ),
    { retryAfterMs },
  );

export function errorReply(error: unknown, activityId: string, url: string): Reply {
  // Another error is the server's own failure (logged where it is caught): its message may quote
  // the request, so it is not echoed.
  const cosmos =
    error instanceof CosmosError
      ? error
      : new CosmosError(500, 'The local server failed on this request; its log says where.');
  const retryAfterMs = (error as { retryAfterMs?: number }).retryAfterMs;
  return {
    status: cosmos.status,
    body: errorBody(cosmos, activityId, url),
    requestCharge: cosmos.status === 429 ? 0 : FAILED_REQUEST_CHARGE,
    headers: {
      ...(cosmos.substatus === undefined ? {} : { 'x-ms-substatus': String(cosmos.substatus) }),
      ...(retryAfterMs === undefined ? {} : { 'x-ms-retry-after-ms': String(retryAfterMs) }),
    },
  };
}

export const single = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value;
export const flag = (value: string | string[] | undefined): boolean =>
  single(value)?.toLowerCase() === 'true';
