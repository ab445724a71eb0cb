import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';

/**
 * The azd hook scripts (infra/scripts/*.mjs) run as azd runs them, with Node.js: a fake `azd` on
 * PATH that the real AzureDeveloperCliCredential asks for a token, and a local HTTP server standing
 * in for the Azure service the script calls (the blob service, Resource Manager).
 */
export type FakeAzd =
  { kind: 'absent' } | { kind: 'signed-out' } | { kind: 'failing'; stderr: string } | { kind: 'signed-in' };

/** The token the fake azd hands out. */
export const AZD_TOKEN = 'token-from-azd';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

export interface Answer {
  status: number;
  body: string;
  contentType?: string;
}

export interface HookRun {
  status: number | null;
  stdout: string;
  stderr: string;
  /** Arguments of every `azd` call, in order. */
  azdCalls: string[];
  /** Every request the stand-in received. */
  requests: RecordedRequest[];
}

export interface HookScript {
  /** The script, relative to the project. */
  script: string;
  azd: FakeAzd;
  /** The environment azd gives the hook, given the stand-in's URL (`http://127.0.0.1:<port>/`). */
  env: (endpoint: string) => Record<string, string>;
  /** The stand-in's answer to each request (the requests before it included). */
  answer: (request: RecordedRequest, requests: readonly RecordedRequest[]) => Answer;
}

export async function runHookScript({ script, azd, env, answer }: HookScript): Promise<HookRun> {
  const sandbox = mkdtempSync(path.join(tmpdir(), 'azd-hook-'));
  const requests: RecordedRequest[] = [];
  const server = createServer((request, response) => {
    const recorded = { method: request.method ?? '', url: request.url ?? '', headers: request.headers };
    requests.push(recorded);
    const { status, body, contentType = 'application/json' } = answer(recorded, requests);
    response.writeHead(status, { 'content-type': contentType }).end(body);
  });
  try {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const bin = path.join(sandbox, 'bin');
    mkdirSync(bin);
    const log = path.join(sandbox, 'azd-calls');
    const sh = spawnSync('sh', ['-c', 'command -v sh'], { encoding: 'utf8' }).stdout.trim();
    if (azd.kind !== 'absent') {
      const reply = {
        'signed-in': `printf '%s' '${JSON.stringify({ token: AZD_TOKEN, expiresOn: '2099-01-01T00:00:00Z' })}'; exit 0`,
        'signed-out': "echo 'ERROR: not logged in, run `azd auth login` to login' >&2; exit 1",
        // Only shell builtins: PATH holds nothing else.
        failing: `printf '%s' '${azd.kind === 'failing' ? azd.stderr : ''}' >&2; exit 1`,
      }[azd.kind];
      writeFileSync(path.join(bin, 'azd'), `#!${sh}\nprintf '%s\\n' "$*" >> '${log}'\n${reply}\n`, {
        mode: 0o755,
      });
    }
    const child = spawn(process.execPath, [path.join(PROJECT_ROOT, script)], {
      cwd: PROJECT_ROOT,
      // PATH has the fake azd and nothing else: an `azd` or `az` of this machine must not answer.
      env: { PATH: bin, HOME: sandbox, ...env(endpoint) },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [status] = (await once(child, 'close')) as [number | null];
    let azdCalls: string[] = [];
    try {
      azdCalls = readFileSync(log, 'utf8').trim().split('\n');
    } catch {
      // No call was made.
    }
    return { status, stdout, stderr, azdCalls, requests };
  } finally {
    server.close();
    rmSync(sandbox, { recursive: true, force: true });
  }
}
