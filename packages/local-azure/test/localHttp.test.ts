import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { answersTo, localListener } from '../src/localHttp';

/**
 * The guard every local HTTP endpoint runs its handler in (packages/local-azure/src/localHttp.ts), on a server of its
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
        listenHost: '127.0.0.1',
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

describe('answersTo', () => {
  it('takes the loopback names, with or without a port, in any case', () => {
    const hosts = ['localhost', 'LOCALHOST:8081', '127.0.0.1', '127.0.0.1:5672', '[::1]', '[::1]:443'];
    expect(hosts.filter((host) => answersTo(host))).toEqual(hosts);
  });

  it('refuses any other name, a missing Host, and what is no Host at all', () => {
    const hosts = [
      undefined,
      '',
      'rebound.example',
      'rebound.example:8081',
      'localhost.rebound.example',
      'app.localhost',
      '127.0.0.2',
      '127.0.0.1.nip.io',
      '[::2]',
      '::1',
      'localhost:8081:1',
      'localhost:port',
    ];
    expect(hosts.filter((host) => answersTo(host))).toEqual([]);
  });

  it('takes the name a server was told to listen on, not a wildcard; and with a port, that port only', () => {
    expect(answersTo('devbox.lan:8081', { listenHost: 'devbox.lan' })).toBe(true);
    expect(answersTo('[fd00::5]:8081', { listenHost: 'fd00::5' })).toBe(true);
    expect(answersTo('devbox.lan:8081', { listenHost: '0.0.0.0' })).toBe(false);
    expect(answersTo('localhost:8081', { port: 8081 })).toBe(true);
    expect(answersTo('localhost:8082', { port: 8081 })).toBe(false);
    expect(answersTo('localhost', { port: 8081 })).toBe(false);
  });
});

it('refuses a foreign Host with 421 before the handler runs', async () => {
  const answer = await new Promise<number>((resolve, reject) => {
    const outgoing = httpRequest(`${base}/fine`, { headers: { host: 'rebound.example' } }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
  expect(answer).toBe(421);
});
