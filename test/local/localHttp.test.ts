import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { localListener } from '../../local/localHttp';

/**
 * The guard every local HTTP endpoint runs its handler in (local/localHttp.ts), on a server of its
 * own: a handler that throws, or rejects, answers that request 500 and logs where it failed but
 * nothing of the request; the next request is served.
 */
let server: Server;
let base: string;
const logged: string[] = [];

beforeEach(async () => {
  server = createServer(
    localListener(
      {
        name: 'test endpoint',
        refuse: (response, status, message) => {
          response.writeHead(status, { 'content-type': 'text/plain' });
          response.end(message);
        },
      },
      async (request, response) => {
        if (request.url?.startsWith('/throws/')) throw new TypeError(`cannot read ${request.url}`);
        if (request.url?.startsWith('/rejects/')) {
          await Promise.resolve();
          throw new RangeError(`out of range: ${request.url}`);
        }
        response.end('fine');
      },
    ),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  logged.length = 0;
  jest.spyOn(console, 'error').mockImplementation((...line: unknown[]) => void logged.push(line.join(' ')));
});
afterEach(async () => {
  jest.restoreAllMocks();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

it.each(['throws', 'rejects'])(
  'a handler that %s answers 500, logs without the request, and the server serves on',
  async (how) => {
    const failed = await fetch(`${base}/${how}/secret-in-the-path`);
    const text = await failed.text();
    const next = await fetch(`${base}/fine`);

    expect(failed.status).toBe(500);
    expect(text).not.toContain('secret');
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatch(/^test endpoint: a request failed unexpectedly \((TypeError|RangeError), at /);
    expect(logged[0]).not.toContain('secret');
    expect(await next.text()).toBe('fine');
  },
);
