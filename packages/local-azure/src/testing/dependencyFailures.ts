import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

import type { LocalStack } from './localStack';

/**
 * Real failures of what a handler calls itself, each carrying a `code` as Cosmos DB's errors do:
 * a fetch that timed out, a refused connection, an HTTP client's status, the handler's own Cosmos
 * DB client refusing or throttled. Each call rejects with the error its library really throws.
 * Rows for `it.each`: a name, and the call.
 */
export function dependencyFailures(stack: LocalStack): [string, () => Promise<unknown>][] {
  return [
    ['a fetch timeout (DOMException TimeoutError, code 23)', fetchTimeout],
    ['a refused connection (ECONNREFUSED)', refusedConnection],
    ['an HTTP client error with code 400', () => Promise.reject(withCode(new Error('Bad Request'), 400))],
    ['an HTTP client error with code 503', () => Promise.reject(withCode(new Error('Unavailable'), 503))],
    [
      "the handler's own Cosmos DB client refusing a query (400)",
      () => stack.container.items.query('SELECT * FROM WHERE').fetchAll(),
    ],
    [
      "the handler's own Cosmos DB client throttled past its retries (429)",
      () => {
        const throttled = stack.server.faults.inject({ kind: 'throttle', on: 'query', retryAfterMs: 1 });
        return stack.container.items
          .query('SELECT * FROM c')
          .fetchAll()
          .finally(() => throttled.remove());
      },
    ],
  ];
}

function withCode(error: Error, code: number): Error {
  return Object.assign(error, { code });
}

/** A fetch of a server that never answers, given up after 20 ms: rejects with DOMException TimeoutError. */
async function fetchTimeout(): Promise<unknown> {
  const silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const { port } = silent.address() as AddressInfo;
  try {
    return await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(20) });
  } finally {
    silent.closeAllConnections();
    silent.close();
  }
}

/** A request to a port nobody listens on: rejects with Node's ECONNREFUSED. */
async function refusedConnection(): Promise<unknown> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port }, resolve).on('error', reject).end();
  });
}
