// The azd postprovision hook (azure.yaml → infra/scripts/postprovision.mjs) and its first step,
// wait-for-deployment-storage.mjs, which waits until the blob service honours the new role
// assignments so that the first deploy of `azd up` does not fail with 403. It runs here as azd runs it, with Node.js, against a local HTTP server
// standing in for the blob service (refusing with 403 a number of times, or until the time-out) and a
// fake `azd` on PATH that the real AzureDeveloperCliCredential asks for the token (signed in, signed
// out, absent). What no fake can show (that Azure's propagation ends, and that the app's identity is
// then honoured too) is argued in infra/README.md, "The first deployment".

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import { at, describeInfra } from '@idempotent-consumers/devkit/internal/testing/bicep';
import { parse } from 'yaml';

import { AZD_TOKEN, type FakeAzd, type HookRun, runHookScript } from '../support/azdHook';

const scriptPath = 'infra/scripts/wait-for-deployment-storage.mjs';
const scripts = ['common.mjs', 'wait-for-deployment-storage.mjs', 'retired-subscriptions.mjs'].map((file) =>
  readFileSync(path.join(PROJECT_ROOT, 'infra', 'scripts', file), 'utf8'),
);
const container = 'app-package-func-deploy1-abc1234';
const tenant = '0f3c1b0e-3333-4444-8555-a66677778888';
const refusalXml =
  '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationPermissionMismatch</Code><Message>This request is not authorized to perform this operation using this permission.</Message></Error>';

interface HookOptions {
  azd: FakeAzd;
  /** Listings the blob service refuses with 403 before it answers. */
  refusals?: number;
  /** More of the environment azd gives the hook (it overrides the outputs). */
  env?: Record<string, string>;
  /** Leave out the outputs azd would set. */
  withoutOutputs?: boolean;
}

/** The first step alone, against a stand-in blob service that refuses `refusals` listings. */
function runHook({ azd, refusals = 0, env = {}, withoutOutputs = false }: HookOptions): Promise<HookRun> {
  return runHookScript({
    script: scriptPath,
    azd,
    env: (endpoint) => ({
      ...(withoutOutputs
        ? {}
        : { STORAGE_BLOB_ENDPOINT: endpoint, DEPLOYMENT_CONTAINER_NAME: container, AZURE_TENANT_ID: tenant }),
      ...env,
    }),
    answer: (_request, requests) =>
      requests.length <= refusals
        ? { status: 403, body: refusalXml, contentType: 'application/xml' }
        : {
            status: 200,
            body: '<EnumerationResults><Blobs /></EnumerationResults>',
            contentType: 'application/xml',
          },
  });
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
      expect(headers.authorization).toBe(`Bearer ${AZD_TOKEN}`);
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

describe('infra/scripts/postprovision.mjs', () => {
  it('runs both steps in order, the second also when the first stops on a settings mistake', async () => {
    const run = (env: Record<string, string>): Promise<HookRun> =>
      runHookScript({
        script: 'infra/scripts/postprovision.mjs',
        azd: { kind: 'signed-in' },
        env: () => ({ RETIRED_SUBSCRIPTIONS: 'off', ...env }),
        answer: () => ({ status: 500, body: '' }),
      });
    const skipped = await run({ DEPLOYMENT_STORAGE_WAIT_SECONDS: '0' });
    const mistaken = await run({ DEPLOYMENT_STORAGE_WAIT_SECONDS: 'soon' });

    expect(skipped.status).toBe(0);
    expect(skipped.stdout).toBe(
      'wait-for-deployment-storage: skipped: DEPLOYMENT_STORAGE_WAIT_SECONDS is 0.\n' +
        'retired-subscriptions: skipped: RETIRED_SUBSCRIPTIONS is off.\n',
    );
    expect(mistaken.status).toBe(1);
    expect(mistaken.stderr).toContain(
      "wait-for-deployment-storage: DEPLOYMENT_STORAGE_WAIT_SECONDS must be a whole number of seconds, not 'soon'",
    );
    expect(mistaken.stdout).toBe('retired-subscriptions: skipped: RETIRED_SUBSCRIPTIONS is off.\n');
  });
});

describe('azure.yaml hooks', () => {
  const azureYaml = parse(readFileSync(path.join(PROJECT_ROOT, 'azure.yaml'), 'utf8')) as Record<
    string,
    unknown
  >;

  it('runs the one Node.js script after every provision on POSIX and on Windows, stopping azd when it fails', () => {
    const command = 'node infra/scripts/postprovision.mjs';

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
    it('is output by infra/main.bicep (or set by azd itself), the container name taken from the container itself', () => {
      const { outputs } = compiled().template;
      const storage = at(compiled().template, 'resources.storage.properties.template');
      const read = [
        ...new Set(
          scripts
            .flatMap((source) => [...source.matchAll(/'([A-Z][A-Z_]+)'|process\.env\.([A-Z_]+)/g)])
            .map((match) => match[1] ?? match[2] ?? ''),
        ),
      ]
        .filter((name) => /^[A-Z]+_[A-Z_]+$/.test(name))
        .sort();
      // azd sets these itself; the rest are settings of the hook, with defaults (infra/README.md).
      const fromAzd = ['AZURE_SUBSCRIPTION_ID'];
      const settings = [
        'AZURE_RESOURCE_MANAGER_ENDPOINT',
        'DEPLOYMENT_STORAGE_POLL_SECONDS',
        'DEPLOYMENT_STORAGE_WAIT_SECONDS',
        'RETIRED_SUBSCRIPTIONS',
      ];

      expect(read).toEqual(
        [
          'AZURE_RESOURCE_GROUP',
          'AZURE_TENANT_ID',
          'DEPLOYMENT_CONTAINER_NAME',
          'DEVELOPER_ROLES_GRANTED',
          'SERVICEBUS_NAMESPACE',
          'STORAGE_BLOB_ENDPOINT',
          ...fromAzd,
          ...settings,
        ].sort(),
      );
      expect(Object.keys(outputs)).toEqual(
        expect.arrayContaining(read.filter((name) => !fromAzd.includes(name) && !settings.includes(name))),
      );
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
