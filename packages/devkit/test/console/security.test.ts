// The console's safety, over HTTP as a browser or another page on this machine would try it: npm
// start's console (actions on) and npm run console against the same local stack (read-only), each
// started as a user starts it. Nothing here depends on the sample's subjects.

import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';

import { PROJECT_ROOT } from '../../src/cli/project';
import { StartedApp, userEnvironment } from '../../src/testing/npmStart';

jest.setTimeout(60_000);

const work = mkdtempSync(join(tmpdir(), 'console-security-'));
const env = userEnvironment(join(work, 'local-run.json'));
const ADDRESS = /^Console: (http:\/\/127\.0\.0\.1:(\d+))\/#token=([\w-]+) /m;

interface Console {
  /** The console's page, as a browser names it in a POST's Origin. */
  origin: string;
  port: number;
  token: string;
}

let npmStart: StartedApp;
let readOnly: StartedApp;
let actions: Console;
let viewer: Console;

function consoleOf(app: StartedApp): Console {
  const [, origin, port, token] = ADDRESS.exec(app.output)!;
  return { origin: origin!, port: Number(port), token: token! };
}

/** One HTTP request as any client on this machine can make it (the Host header included). */
function call(
  target: Console,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const sent = request(
      {
        host: '127.0.0.1',
        port: target.port,
        path,
        method: options.method ?? 'GET',
        headers: options.headers,
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, text }));
      },
    );
    sent.on('error', reject);
    sent.end(options.body);
  });
}

/** What the console's own page sends with a POST: the token, JSON, and its origin (as a browser does). */
const json = (target: Console, extra: Record<string, string> = {}): Record<string, string> => ({
  'x-console-token': target.token,
  'content-type': 'application/json',
  origin: target.origin,
  ...extra,
});

beforeAll(async () => {
  npmStart = new StartedApp(
    process.execPath,
    [
      require.resolve('tsx/cli'),
      'packages/devkit/src/tools/start/cli.ts',
      ...['--cosmos-port', '0', '--servicebus-port', '0', '--console-port', '0', '--app', join(work, 'app')],
      '--no-watch',
    ],
    { cwd: PROJECT_ROOT, env },
  );
  await npmStart.shown(/Ready\. Press Ctrl\+C to stop\./, 0, 180_000);
  await npmStart.shown(/^Not watching for changes \(--no-watch\)\.$/m, 0);
  actions = consoleOf(npmStart);
  readOnly = new StartedApp(
    process.execPath,
    [require.resolve('tsx/cli'), 'packages/devkit/src/tools/console/cli.ts', '--port', '0'],
    {
      cwd: PROJECT_ROOT,
      env,
    },
  );
  await readOnly.shown(/Press Ctrl\+C to stop\./, 0, 120_000);
  viewer = consoleOf(readOnly);
}, 240_000);

afterAll(async () => {
  await readOnly?.interrupt().catch(() => readOnly.kill());
  await npmStart?.interrupt().catch(() => npmStart.kill());
  rmSync(work, { recursive: true, force: true });
}, 60_000);

describe("npm start's console", () => {
  it('serves the page under a policy that allows its own script and style only, and nothing from a cache', async () => {
    const page = await call(actions, '/');
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.text).toContain('<script type="module" src="/app.js"></script>');
    // The token is in the address printed, never in the page itself.
    expect(page.text).not.toContain(actions.token);
    const script = await call(actions, '/app.js');
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(script.text).not.toContain('innerHTML');
  });

  it('answers the API only with the token', async () => {
    expect((await call(actions, '/api/overview')).status).toBe(401);
    const wrong = await call(actions, '/api/overview', {
      headers: { 'x-console-token': `${actions.token}x` },
    });
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.text)).toEqual({
      error: 'This page has no valid token: open the address with its #token that the console printed.',
    });
    const right = await call(actions, '/api/overview', { headers: { 'x-console-token': actions.token } });
    expect(right.status).toBe(200);
    expect(JSON.parse(right.text)).toMatchObject({ actions: true, feed: true });
  });

  it('answers no other Host name: a DNS-rebinding page cannot reach it', async () => {
    const rebound = await call(actions, '/api/overview', {
      headers: { host: `attacker.example:${actions.port}`, 'x-console-token': actions.token },
    });
    expect(rebound.status).toBe(421);
    expect((await call(actions, '/', { headers: { host: `localhost:${actions.port}` } })).status).toBe(200);
  });

  it('takes actions from its own origin only, as JSON, of bounded size', async () => {
    const body = JSON.stringify({ subject: 'Anything', body: {} });
    const crossSite = await call(actions, '/api/send', {
      method: 'POST',
      headers: json(actions, { origin: 'https://attacker.example' }),
      body,
    });
    expect(crossSite.status).toBe(403);
    const unnamed = json(actions);
    delete unnamed.origin;
    expect((await call(actions, '/api/send', { method: 'POST', headers: unnamed, body })).status).toBe(403);
    // A page can post text/plain without asking first: refused as well.
    const plain = await call(actions, '/api/send', {
      method: 'POST',
      headers: json(actions, { 'content-type': 'text/plain' }),
      body,
    });
    expect(plain.status).toBe(415);
    const huge = await call(actions, '/api/send', {
      method: 'POST',
      headers: json(actions),
      body: JSON.stringify({ subject: 'x', rawBody: 'x'.repeat(400 * 1024) }),
    });
    expect(huge.status).toBe(413);
  });

  it('echoes an untrusted name bounded, and queries nothing for a name the topology does not declare', async () => {
    const name = `evil${'<script>'.repeat(100)}`;
    const answer = await call(actions, `/api/consumers/${encodeURIComponent(name)}`, {
      headers: { 'x-console-token': actions.token },
    });
    expect(answer.status).toBe(404);
    const { error } = JSON.parse(answer.text) as { error: string };
    expect(error.length).toBeLessThan(120);
    expect(error).toMatch(/^No consumer is named 'evil<script>/);
  });

  it('listens on the loopback address only', async () => {
    const outside = Object.values(networkInterfaces())
      .flat()
      .find((address) => address?.family === 'IPv4' && !address.internal)?.address;
    if (outside === undefined) return; // no other interface here: nothing else to try
    const refused = await new Promise<boolean>((resolve) => {
      const sent = request({ host: outside, port: actions.port, path: '/', timeout: 2000 }, () =>
        resolve(false),
      );
      sent.on('error', () => resolve(true));
      sent.on('timeout', () => {
        sent.destroy();
        resolve(true);
      });
      sent.end();
    });
    expect(refused).toBe(true);
  });
});

describe('npm run console, read-only by default', () => {
  it('reads the same stack, with no live feed, and counts by peeking, saying so', async () => {
    const overview = JSON.parse(
      (await call(viewer, '/api/overview', { headers: { 'x-console-token': viewer.token } })).text,
    ) as {
      actions: boolean;
      feed: boolean;
      problems: string[];
      topics: { subscriptions: { counts: unknown }[] }[];
    };
    expect(overview).toMatchObject({ actions: false, feed: false });
    expect(overview.problems).toEqual(['Counted by peeking (up to 500 per queue; in flight not known).']);
    expect(overview.topics.flatMap((t) => t.subscriptions).every((s) => s.counts !== undefined)).toBe(true);
  });

  it('refuses to send, resubmit or discard, and says how to allow it; a plan (a dry run) is allowed', async () => {
    const [subscription] = (
      JSON.parse(
        (await call(viewer, '/api/overview', { headers: { 'x-console-token': viewer.token } })).text,
      ) as {
        topics: { subscriptions: { name: string }[] }[];
      }
    ).topics.flatMap((t) => t.subscriptions.map((s) => s.name));
    const refusal = {
      error:
        'The console is read-only: start it with npm run console -- --allow-actions to resubmit, discard or send.',
    };
    const send = await call(viewer, '/api/send', { method: 'POST', headers: json(viewer), body: '{}' });
    expect([send.status, JSON.parse(send.text)]).toEqual([403, refusal]);
    const choice = JSON.stringify({ action: 'discard', sequences: ['1'] });
    const act = await call(viewer, `/api/dead-letters/${subscription}/act`, {
      method: 'POST',
      headers: json(viewer),
      body: choice,
    });
    expect([act.status, JSON.parse(act.text)]).toEqual([403, refusal]);
    const plan = await call(viewer, `/api/dead-letters/${subscription}/plan`, {
      method: 'POST',
      headers: json(viewer),
      body: choice,
    });
    expect(plan.status).toBe(200);
    expect(JSON.parse(plan.text)).toEqual({
      action: 'discard',
      lines: [
        {
          verdict: 'not-found',
          sequence: '1',
          text: 'not found: no dead letter #1 (resubmitted or discarded meanwhile?)',
        },
      ],
      acting: 0,
      fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/) as string,
    });
  });
});
