// The azd postprovision hook (azure.yaml → infra/scripts/wait-for-deployment-storage.mjs), which
// waits until the blob service honours the new role assignments so that the first deploy of `azd up`
// does not fail with 403. It runs here as azd runs it, with Node.js, against a local HTTP server
// standing in for the blob service (refusing with 403 a number of times, or until the time-out) and a
// fake `azd` on PATH that the real AzureDeveloperCliCredential asks for the token (signed in, signed
// out, absent). What no fake can show (that Azure's propagation ends, and that the app's identity is
// then honoured too) is argued in infra/README.md, "The first deployment".

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { parse } from 'yaml';

import { PROJECT_ROOT } from '../../local/project';
import { at, describeInfra } from '../support/bicep';

const scriptPath = 'infra/scripts/wait-for-deployment-storage.mjs';
const script = path.join(PROJECT_ROOT, scriptPath);
const container = 'app-package-func-deploy1-abc1234';
const tenant = '0f3c1b0e-3333-4444-8555-a66677778888';
const token = 'token-from-azd';
const refusalXml =
  '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationPermissionMismatch</Code><Message>This request is not authorized to perform this operation using this permission.</Message></Error>';

type FakeAzd =
  { kind: 'absent' } | { kind: 'signed-out' } | { kind: 'failing'; stderr: string } | { kind: 'signed-in' };

interface BlobRequest {
  url: string;
  headers: IncomingHttpHeaders;
}

interface HookRun {
  status: number | null;
  stdout: string;
  stderr: string;
  /** Arguments of every `azd` call, in order. */
  azdCalls: string[];
  /** Every request the blob service stand-in received. */
  requests: BlobRequest[];
}

interface HookOptions {
  azd: FakeAzd;
  /** Listings the blob service refuses with 403 before it answers. */
  refusals?: number;
  /** More of the environment azd gives the hook (it overrides the outputs). */
  env?: Record<string, string>;
  /** Leave out the outputs azd would set. */
  withoutOutputs?: boolean;
}

/** Runs the hook with Node.js as azd does, a fake `azd` on PATH and a local blob service. */
async function runHook({
  azd,
  refusals = 0,
  env = {},
  withoutOutputs = false,
}: HookOptions): Promise<HookRun> {
  const sandbox = mkdtempSync(path.join(tmpdir(), 'postprovision-'));
  const requests: BlobRequest[] = [];
  const server = createServer((request, response) => {
    requests.push({ url: request.url ?? '', headers: request.headers });
    if (requests.length <= refusals) {
      response.writeHead(403, { 'content-type': 'application/xml' }).end(refusalXml);
    } else {
      response
        .writeHead(200, { 'content-type': 'application/xml' })
        .end('<EnumerationResults><Blobs /></EnumerationResults>');
    }
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
      const answer = {
        'signed-in': `printf '%s' '${JSON.stringify({ token, expiresOn: '2099-01-01T00:00:00Z' })}'; exit 0`,
        'signed-out': "echo 'ERROR: not logged in, run `azd auth login` to login' >&2; exit 1",
        // Only shell builtins: PATH holds nothing else.
        failing: `printf '%s' '${azd.kind === 'failing' ? azd.stderr : ''}' >&2; exit 1`,
      }[azd.kind];
      writeFileSync(path.join(bin, 'azd'), `#!${sh}\nprintf '%s\\n' "$*" >> '${log}'\n${answer}\n`, {
        mode: 0o755,
      });
    }
    const outputs = withoutOutputs
      ? {}
      : { STORAGE_BLOB_ENDPOINT: endpoint, DEPLOYMENT_CONTAINER_NAME: container, AZURE_TENANT_ID: tenant };
    const child = spawn(process.execPath, [script], {
      cwd: PROJECT_ROOT,
      // PATH has the fake azd and nothing else: an `azd` or `az` of this machine must not answer.
      env: { PATH: bin, HOME: sandbox, ...outputs, ...env },
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

const tokenRequest = `auth token --output json --no-prompt --scope https://storage.azure.com/.default --tenant-id ${tenant}`;
const listing = `/${container}?restype=container&comp=list&maxresults=1`;

describe(scriptPath, () => {
  it('waits while the container refuses the principal azd signed in as, then lets the deploy go on', async () => {
    const run = await runHook({
      azd: { kind: 'signed-in' },
      refusals: 3,
      env: { DEPLOYMENT_STORAGE_POLL_SECONDS: '0' },
    });

    expect(run.status).toBe(0);
    expect(run.azdCalls).toEqual([tokenRequest]);
    expect(run.requests.map((request) => request.url)).toEqual([listing, listing, listing, listing]);
    for (const { headers } of run.requests) {
      expect(headers.authorization).toBe(`Bearer ${token}`);
      expect(headers['x-ms-version']).toMatch(/^20\d\d-\d\d-\d\d$/);
      expect(Date.parse(String(headers['x-ms-date']))).not.toBeNaN();
    }
    expect(
      run.stdout.match(/not yet after \d+ s \(attempt \d\): 403 AuthorizationPermissionMismatch;/g),
    ).toHaveLength(3);
    expect(run.stdout).toMatch(/ready after \d+ s \(attempt 4\)\.\n$/);
    expect(run.stderr).toBe('');
  });

  it('goes straight on when the roles are already honoured (a later provision)', async () => {
    const run = await runHook({ azd: { kind: 'signed-in' } });

    expect(run.status).toBe(0);
    expect(run.requests).toHaveLength(1);
    expect(run.stdout).toContain('(attempt 1).');
  });

  it('warns at the time-out and lets the deploy go on, which decides for itself', async () => {
    const run = await runHook({
      azd: { kind: 'signed-in' },
      refusals: 1000,
      env: { DEPLOYMENT_STORAGE_WAIT_SECONDS: '1', DEPLOYMENT_STORAGE_POLL_SECONDS: '1' },
    });

    expect(run.status).toBe(0);
    expect(run.requests.length).toBeGreaterThanOrEqual(2);
    expect(run.stderr).toMatch(
      new RegExp(
        `warning: container '${container}' still refuses the principal azd signed in as after \\d+ s \\(\\d+ attempts\\): 403 AuthorizationPermissionMismatch\\. Going on with the deploy\\.`,
      ),
    );
    expect(run.stderr).toContain("run 'azd deploy' in a few minutes");
  });

  it('warns and goes on without probing when azd is not signed in, or not installed', async () => {
    const signedOut = await runHook({ azd: { kind: 'signed-out' }, refusals: 1000 });
    const absent = await runHook({ azd: { kind: 'absent' }, refusals: 1000 });

    expect(signedOut.status).toBe(0);
    expect(signedOut.azdCalls).toEqual([tokenRequest]);
    expect(signedOut.stderr).toContain(
      "warning: not waiting: azd gave no token (Please run 'azd auth login'",
    );
    expect(absent.status).toBe(0);
    expect(absent.stderr).toContain(
      "warning: not waiting: azd gave no token (Azure Developer CLI couldn't be found.",
    );
    for (const run of [signedOut, absent]) {
      expect(run.requests).toEqual([]);
      expect(run.stderr).toContain("run 'azd deploy' again in a minute");
    }
  });

  it("echoes at most 200 characters of azd's error, its first non-blank line only", async () => {
    const long = `ERROR: ${'x'.repeat(1000)}`;
    const run = await runHook({ azd: { kind: 'failing', stderr: `\n\n${long}\nsecond line\n` } });
    const line = run.stderr.split('\n').find((candidate) => candidate.includes('not waiting')) ?? '';

    expect(run.status).toBe(0);
    expect(line).toContain(`azd gave no token (${long.slice(0, 200)})`);
    expect(run.stderr).not.toContain('x'.repeat(201));
    expect(run.stderr).not.toContain('second line');
  });

  it('is skipped when DEPLOYMENT_STORAGE_WAIT_SECONDS is 0, or when the developer roles are off', async () => {
    const zero = await runHook({ azd: { kind: 'signed-in' }, env: { DEPLOYMENT_STORAGE_WAIT_SECONDS: '0' } });
    const off = await runHook({ azd: { kind: 'signed-in' }, env: { DEVELOPER_ROLES_GRANTED: 'false' } });

    expect(zero.stdout).toContain('skipped: DEPLOYMENT_STORAGE_WAIT_SECONDS is 0.');
    expect(off.stdout).toContain('skipped: the developer roles are off (grantDeveloperRoles)');
    for (const run of [zero, off]) {
      expect(run.status).toBe(0);
      expect(run.azdCalls).toEqual([]);
      expect(run.requests).toEqual([]);
    }
  });

  it('stops azd, saying why, only for a mistake in its own settings', async () => {
    const noOutputs = await runHook({ azd: { kind: 'signed-in' }, withoutOutputs: true });
    const notANumber = await runHook({
      azd: { kind: 'signed-in' },
      env: { DEPLOYMENT_STORAGE_WAIT_SECONDS: '5m' },
    });
    const plainHttp = await runHook({
      azd: { kind: 'signed-in' },
      env: { STORAGE_BLOB_ENDPOINT: 'http://stdeploy1.blob.core.windows.net/' },
    });

    expect(noOutputs.stderr).toContain('STORAGE_BLOB_ENDPOINT and DEPLOYMENT_CONTAINER_NAME are not set');
    expect(notANumber.stderr).toContain(
      "DEPLOYMENT_STORAGE_WAIT_SECONDS must be a whole number of seconds, not '5m'",
    );
    // A bearer token is never sent in the clear.
    expect(plainHttp.stderr).toContain(
      "STORAGE_BLOB_ENDPOINT must be an https URL, not 'http://stdeploy1.blob.core.windows.net/'",
    );
    for (const run of [noOutputs, notANumber, plainHttp]) {
      expect(run.status).toBe(1);
      expect(run.azdCalls).toEqual([]);
      expect(run.requests).toEqual([]);
    }
  });
});

describe('azure.yaml hooks', () => {
  const azureYaml = parse(readFileSync(path.join(PROJECT_ROOT, 'azure.yaml'), 'utf8')) as Record<
    string,
    unknown
  >;

  it('runs the one Node.js script after every provision on POSIX and on Windows, stopping azd when it fails', () => {
    const command = `node ${scriptPath}`;

    expect(at(azureYaml, 'hooks.postprovision')).toEqual({
      posix: { shell: 'sh', run: command, interactive: true, continueOnError: false },
      windows: { shell: 'pwsh', run: command, interactive: true, continueOnError: false },
    });
  });

  it('keeps shell scripts LF in every checkout, so that a Windows clone runs them', () => {
    const shellScripts = spawnSync('git', ['ls-files', '*.sh', '.ci/run'], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
    })
      .stdout.trim()
      .split('\n');
    const attributes = spawnSync('git', ['check-attr', 'eol', '--', ...shellScripts], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
    }).stdout;

    expect(shellScripts).toEqual(expect.arrayContaining(['infra/find-bicep.sh', '.ci/run']));
    expect(attributes.trim().split('\n')).toEqual(shellScripts.map((file) => `${file}: eol: lf`));
  });
});

describeInfra(
  'what the hook reads from the azd environment',
  () => ({}),
  ({ compiled }) => {
    it('is output by infra/main.bicep, the container name taken from the container itself', () => {
      const read = [...readFileSync(script, 'utf8').matchAll(/process\.env\.([A-Z_]+)/g)].map(
        (match) => match[1],
      );
      const { outputs } = compiled().template;
      const storage = at(compiled().template, 'resources.storage.properties.template');

      expect([...new Set(read)].sort()).toEqual([
        'AZURE_TENANT_ID',
        'DEPLOYMENT_CONTAINER_NAME',
        'DEVELOPER_ROLES_GRANTED',
        'STORAGE_BLOB_ENDPOINT',
      ]);
      expect(Object.keys(outputs)).toEqual(expect.arrayContaining(read));
      expect(outputs['STORAGE_BLOB_ENDPOINT']?.value).toBe(
        "[reference('storage').outputs.blobEndpoint.value]",
      );
      expect(outputs['DEVELOPER_ROLES_GRANTED']?.value).toBe("[not(empty(variables('developer').id))]");
      expect(outputs['DEPLOYMENT_CONTAINER_NAME']?.value).toBe(
        "[reference('storage').outputs.deploymentContainerName.value]",
      );
      expect(at(storage, 'outputs.deploymentContainerName.value')).toBe(
        "[parameters('deploymentContainerName')]",
      );
    });
  },
);
