import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

import { build } from 'esbuild';

import { bounded, ToolError } from '../../cli/errors';
import type { ConsoleBackend } from './backend';
import { ConsoleError } from './errors';
import type { ActionRequest, SendRequest } from './types';

/**
 * The console's web server: the page and a small JSON API over a backend (npm start's local stack,
 * or a deployment). Safe by default:
 * - it listens on the loopback address only, and answers only requests whose Host names it (a
 *   DNS-rebinding page cannot reach it under another name);
 * - every API call needs the per-run token, which the page receives in the URL's fragment (never
 *   sent to a server, never in a log) and sends back in a header: a cross-site page can neither read
 *   it nor send that header without a CORS preflight, which this server never allows;
 * - a POST must name one of its own origins (a browser always does), with a JSON body of bounded
 *   size; what acts is refused outright while actions are off;
 * - the page runs under a Content-Security-Policy that allows its own script and style only, and
 *   builds its DOM from text (never HTML), so an echoed value cannot become markup.
 */

const HOST = '127.0.0.1';
const TOKEN_HEADER = 'x-console-token';
const MAX_BODY_BYTES = 300 * 1024;
/** How long a feed request waits for an event before it answers with none. */
const FEED_WAIT_MS = 20_000;

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

export interface ConsoleOptions {
  /** 0 picks a free port. */
  port: number;
  backend: ConsoleBackend;
}

export interface RunningConsole {
  /** The page's address with the token in its fragment: what to open. */
  url: string;
  stop(): Promise<void>;
}

type Handler = (request: ApiRequest) => Promise<unknown>;

interface ApiRequest {
  params: string[];
  query: URLSearchParams;
  body: unknown;
  signal: AbortSignal;
}

interface Route {
  method: 'GET' | 'POST';
  pattern: RegExp;
  handler: Handler;
  /** Sends, resubmits or discards: refused while actions are off. */
  acts: boolean;
}

const PAGE_DIRECTORY = join(__dirname, 'page');

let script: Promise<string> | undefined;

/** The page's script: page/app.ts with its types stripped and its imports bundled, once per process. */
function pageScript(): Promise<string> {
  script ??= build({
    entryPoints: [join(PAGE_DIRECTORY, 'app.ts')],
    bundle: true,
    write: false,
    format: 'esm',
    target: 'es2022',
    logLevel: 'silent',
  }).then((result) => result.outputFiles[0]!.text);
  return script;
}

export async function startConsole({ port, backend }: ConsoleOptions): Promise<RunningConsole> {
  const token = randomBytes(24).toString('base64url');
  const assets = {
    '/': { type: 'text/html; charset=utf-8', body: readFileSync(join(PAGE_DIRECTORY, 'index.html')) },
    '/style.css': { type: 'text/css; charset=utf-8', body: readFileSync(join(PAGE_DIRECTORY, 'style.css')) },
    '/app.js': { type: 'text/javascript; charset=utf-8', body: Buffer.from(await pageScript()) },
  } as Record<string, { type: string; body: Buffer }>;
  const routes = apiRoutes(backend);
  let origin = '';
  /** The names the console answers to, as `host:port`. */
  let hosts: string[] = [];
  const server = createServer((request, response) => {
    void serve(request, response).catch((error: unknown) => {
      send(response, 500, { error: `The console failed: ${bounded(String(error), 200)}` });
    });
  });

  async function serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    // Only under the names this server has: another name is a DNS-rebinding page's.
    if (!hosts.includes(request.headers.host ?? '')) {
      send(response, 421, { error: 'Unknown Host: open the console at the address npm start printed.' });
      return;
    }
    const url = new URL(request.url ?? '/', origin);
    const asset = request.method === 'GET' ? assets[url.pathname] : undefined;
    if (asset !== undefined) {
      response.writeHead(200, { ...SECURITY_HEADERS, 'content-type': asset.type });
      response.end(asset.body);
      return;
    }
    if (!url.pathname.startsWith('/api/')) {
      send(response, 404, { error: 'Not found.' });
      return;
    }
    if (!tokenMatches(request.headers[TOKEN_HEADER], token)) {
      send(response, 401, {
        error: 'This page has no valid token: open the address with its #token that the console printed.',
      });
      return;
    }
    const route = routes.find((r) => r.method === request.method && r.pattern.test(url.pathname));
    if (route === undefined) {
      send(response, 404, { error: 'No such API call.' });
      return;
    }
    // A browser names the page that posts; the console's own page is under one of its hosts.
    if (request.method === 'POST' && !hosts.some((host) => request.headers.origin === `http://${host}`)) {
      send(response, 403, { error: 'Actions are accepted from the console page only.' });
      return;
    }
    if (route.acts && !backend.actions) {
      send(response, 403, { error: backend.readOnlyReason });
      return;
    }
    const aborted = new AbortController();
    response.on('close', () => aborted.abort());
    try {
      const body = request.method === 'POST' ? await jsonBody(request) : undefined;
      const params = route.pattern.exec(url.pathname)!.slice(1).map(decodeParam);
      const result = await route.handler({ params, query: url.searchParams, body, signal: aborted.signal });
      if (!response.writableEnded) send(response, 200, result);
    } catch (error) {
      // Messages come bounded from where they are made; this is the last cap.
      if (error instanceof ConsoleError)
        send(response, error.status, { error: error.message.slice(0, 4000) });
      else if (error instanceof ToolError) send(response, 400, { error: bounded(error.message, 2000) });
      else throw error;
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, HOST, () => resolve());
  });
  const actual = (server.address() as AddressInfo).port;
  origin = `http://${HOST}:${actual}`;
  hosts = [`${HOST}:${actual}`, `localhost:${actual}`];
  return {
    url: `${origin}/#token=${token}`,
    stop: async () => {
      backend.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The API: one route per thing the page shows or does; parameters come URL-encoded. */
function apiRoutes(backend: ConsoleBackend): Route[] {
  const segment = '([^/]+)';
  const get = (path: string, handler: Handler): Route => ({
    method: 'GET',
    pattern: new RegExp(`^/api/${path}$`),
    handler,
    acts: false,
  });
  const post = (path: string, handler: Handler, acts = true): Route => ({
    method: 'POST',
    pattern: new RegExp(`^/api/${path}$`),
    handler,
    acts,
  });
  return [
    get('overview', () => backend.overview()),
    get('feed', ({ query, signal }) =>
      backend.feed(integer(query.get('after') ?? '0', 'after'), FEED_WAIT_MS, signal),
    ),
    get(`feed/${segment}/body`, ({ params }) => backend.feedBody(integer(params[0]!, 'seq'))),
    get(`consumers/${segment}`, ({ params }) => backend.consumer(params[0]!)),
    get(`partitions/${segment}`, ({ params, query }) =>
      backend.partition(params[0]!, query.get('continuation') ?? undefined),
    ),
    get(`documents/${segment}/${segment}`, ({ params }) => backend.document(params[0]!, params[1]!)),
    get(`dead-letters/${segment}`, ({ params, query }) =>
      backend.tools.deadLetters(backend.topology(), params[0]!, query.get('from') ?? undefined),
    ),
    get(`dead-letters/${segment}/${segment}/body`, ({ params }) =>
      backend.tools.deadLetterBody(backend.topology(), params[0]!, params[1]!),
    ),
    // A plan is a dry run: allowed read-only too (POST only for its JSON body).
    post(
      `dead-letters/${segment}/plan`,
      ({ params, body }) => backend.tools.plan(backend.topology(), params[0]!, actionRequest(body)),
      false,
    ),
    post(`dead-letters/${segment}/act`, ({ params, body }) =>
      backend.tools.act(backend.topology(), params[0]!, actionRequest(body)),
    ),
    get('send-form', () => backend.tools.sendForm(backend.topology())),
    // As a dead-letter plan: what a send would do, allowed read-only too.
    post('send/plan', ({ body }) => backend.tools.planSend(backend.topology(), sendRequest(body)), false),
    post('send', ({ body }) => backend.tools.send(backend.topology(), sendRequest(body))),
  ];
}

function actionRequest(body: unknown): ActionRequest {
  const value = (body ?? {}) as Record<string, unknown>;
  const { action, sequences } = value;
  if (action !== 'resubmit' && action !== 'discard')
    throw new ConsoleError(400, 'action must be resubmit or discard.');
  if (
    !Array.isArray(sequences) ||
    sequences.length === 0 ||
    sequences.length > 1000 ||
    !sequences.every((s) => typeof s === 'string' && /^\d{1,19}$/.test(s))
  ) {
    throw new ConsoleError(400, 'sequences must name 1 to 1000 dead letters by sequence number.');
  }
  return {
    action,
    sequences: sequences as string[],
    force: value.force === true,
    includePoison: value.includePoison === true,
    ...fingerprintOf(value),
  };
}

/** The form's fields go on to npm run send's own checks (parseEvent), which say what is wrong. */
function sendRequest(body: unknown): SendRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new ConsoleError(400, 'A send is a JSON object: { "subject": ..., "body": ... }.');
  const value = body as Record<string, unknown>;
  return {
    subject: value.subject as string,
    body: value.body,
    rawBody: value.rawBody as string | undefined,
    messageId: value.messageId as string | undefined,
    allowInvalid: value.allowInvalid === true,
    ...fingerprintOf(value),
  };
}

function fingerprintOf(value: Record<string, unknown>): { fingerprint?: string } {
  const { fingerprint } = value;
  if (fingerprint === undefined) return {};
  if (!(typeof fingerprint === 'string' && /^[0-9a-f]{64}$/.test(fingerprint)))
    throw new ConsoleError(400, "fingerprint must be the plan's.");
  return { fingerprint };
}

function tokenMatches(given: string | string[] | undefined, token: string): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

function decodeParam(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new ConsoleError(400, 'A parameter is not valid URL encoding.');
  }
}

function integer(text: string, name: string): number {
  if (!/^\d{1,15}$/.test(text)) throw new ConsoleError(400, `${name} must be a whole number.`);
  return Number(text);
}

async function jsonBody(request: IncomingMessage): Promise<unknown> {
  if (!(request.headers['content-type'] ?? '').startsWith('application/json'))
    throw new ConsoleError(415, 'Send JSON (Content-Type: application/json).');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      // The rest is not read: this connection ends with the answer (send closes it on 413).
      throw new ConsoleError(413, `The request is over ${MAX_BODY_BYTES} bytes.`);
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw new ConsoleError(400, 'The request body is not JSON.');
  }
}

function send(response: ServerResponse, status: number, value: unknown): void {
  if (response.headersSent) {
    response.end();
    return;
  }
  response.writeHead(status, {
    ...SECURITY_HEADERS,
    'content-type': 'application/json; charset=utf-8',
    ...(status === 413 ? { connection: 'close' } : {}),
  });
  response.end(JSON.stringify(value ?? null));
}
