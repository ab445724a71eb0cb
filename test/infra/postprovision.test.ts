// The azd postprovision hook (azure.yaml → infra/scripts/wait-for-deployment-storage.sh), which waits
// until the blob service honours the new role assignments so that the first deploy of `azd up` does
// not fail with 403. It runs here under POSIX sh with only basic tools on PATH and a fake `az` that
// refuses a number of times before answering, is signed out, or is not there at all. What no fake can
// show (that Azure's propagation ends, and that the app's identity is then honoured too) is argued
// in infra/README.md, "The first deployment".

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { parse } from 'yaml';

import { PROJECT_ROOT } from '../../local/project';
import { at, describeInfra } from '../support/bicep';

const scriptPath = 'infra/scripts/wait-for-deployment-storage.sh';
const script = path.join(PROJECT_ROOT, scriptPath);
const account = 'stdeploy1';
const container = 'app-package-func-deploy1-abc1234';
const outputs = { STORAGE_ACCOUNT_NAME: account, DEPLOYMENT_CONTAINER_NAME: container };
const refusal =
  'ERROR: You do not have the required permissions needed to perform this operation.\nDepending on your operation, you may need to be assigned one of the following roles: ...';

type FakeAz =
  | { kind: 'absent' }
  | { kind: 'signed-out' }
  /** Refuses the first `refusals` listings with `error` on stderr, then lists. */
  | { kind: 'propagating'; refusals: number; error?: string };

interface HookRun {
  status: number | null;
  stdout: string;
  stderr: string;
  /** Arguments of every `az` call, in order. */
  azCalls: string[];
}

/** Runs the hook with sh, only the tools it needs on PATH, and the given fake Azure CLI. */
function runHook(az: FakeAz, env: Record<string, string>): HookRun {
  const sandbox = mkdtempSync(path.join(tmpdir(), 'postprovision-'));
  try {
    const bin = path.join(sandbox, 'bin');
    mkdirSync(bin);
    for (const tool of ['sh', 'date', 'sed', 'cut', 'sleep', 'cat']) {
      const where = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
      symlinkSync(where, path.join(bin, tool));
    }
    const log = path.join(sandbox, 'az-calls');
    const count = path.join(sandbox, 'az-refusals');
    if (az.kind !== 'absent') {
      writeFileSync(path.join(sandbox, 'az-error'), az.kind === 'propagating' ? (az.error ?? refusal) : '');
      writeFileSync(
        path.join(bin, 'az'),
        [
          `#!${path.join(bin, 'sh')}`,
          `printf '%s\\n' "$*" >> '${log}'`,
          `case "$1 $2" in`,
          `  'account show') exit ${az.kind === 'signed-out' ? 1 : 0} ;;`,
          `  'storage blob')`,
          `    refused=$(cat '${count}' 2>/dev/null || echo 0)`,
          `    if [ "$refused" -lt ${az.kind === 'propagating' ? az.refusals : 0} ]; then`,
          `      echo $((refused + 1)) > '${count}'`,
          `      cat '${path.join(sandbox, 'az-error')}' >&2`,
          `      exit 1`,
          `    fi`,
          `    exit 0 ;;`,
          `esac`,
          `exit 2`,
          '',
        ].join('\n'),
        { mode: 0o755 },
      );
    }
    const run = spawnSync(path.join(bin, 'sh'), [script], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
      env: { PATH: bin, HOME: sandbox, ...env },
    });
    let azCalls: string[] = [];
    try {
      azCalls = readFileSync(log, 'utf8').trim().split('\n');
    } catch {
      // No call was made.
    }
    return { status: run.status, stdout: run.stdout, stderr: run.stderr, azCalls };
  } finally {
    rmSync(sandbox, { recursive: true, force: true });
  }
}

const listing = `storage blob list --auth-mode login --account-name ${account} --container-name ${container} --num-results 1 --only-show-errors --output none`;

describe(scriptPath, () => {
  it('waits while the container refuses the signed-in identity, then lets the deploy go on', () => {
    const run = runHook(
      { kind: 'propagating', refusals: 3 },
      { ...outputs, DEPLOYMENT_STORAGE_POLL_SECONDS: '0' },
    );

    expect(run.status).toBe(0);
    expect(run.azCalls).toEqual(['account show --output none', listing, listing, listing, listing]);
    expect(
      run.stdout.match(/not yet after \d+ s \(attempt \d\): ERROR: You do not have the required/g),
    ).toHaveLength(3);
    expect(run.stdout).toMatch(/ready after \d+ s \(attempt 4\)\.\n$/);
  });

  it('goes straight on when the roles are already honoured (a later provision)', () => {
    const run = runHook({ kind: 'propagating', refusals: 0 }, outputs);

    expect(run.status).toBe(0);
    expect(run.azCalls).toEqual(['account show --output none', listing]);
    expect(run.stdout).toContain('(attempt 1).');
  });

  it('gives up at the timeout with a non-zero exit and says what to do', () => {
    const run = runHook(
      { kind: 'propagating', refusals: 1000 },
      { ...outputs, DEPLOYMENT_STORAGE_WAIT_SECONDS: '1', DEPLOYMENT_STORAGE_POLL_SECONDS: '1' },
    );

    expect(run.status).toBe(1);
    expect(run.azCalls.filter((call) => call === listing).length).toBeGreaterThanOrEqual(2);
    expect(run.stderr).toMatch(
      new RegExp(
        `container '${container}' still refuses the signed-in identity after \\d+ s \\(\\d+ attempts\\): ERROR: You do not have`,
      ),
    );
    expect(run.stderr).toContain("run 'azd deploy' in a few minutes");
    expect(run.stderr).toContain('DEPLOYMENT_STORAGE_WAIT_SECONDS=0 to skip');
  });

  it("echoes at most 200 characters of the CLI's error, its first non-blank line only", () => {
    const long = `ERROR: ${'x'.repeat(1000)}`;
    const run = runHook(
      { kind: 'propagating', refusals: 1, error: `\n\n${long}\nsecond line\n` },
      { ...outputs, DEPLOYMENT_STORAGE_POLL_SECONDS: '0' },
    );
    const line = run.stdout.split('\n').find((candidate) => candidate.includes('not yet')) ?? '';

    expect(run.status).toBe(0);
    expect(line).toContain(`: ${long.slice(0, 200)}; next try in 0 s`);
    expect(run.stdout).not.toContain('x'.repeat(201));
    expect(run.stdout).not.toContain('second line');
  });

  it('is skipped, with a message, when there is no Azure CLI', () => {
    const run = runHook({ kind: 'absent' }, outputs);

    expect(run.status).toBe(0);
    expect(run.stdout).toContain('skipped: no Azure CLI (az) on PATH');
    expect(run.stdout).toContain("run 'azd deploy' again in a minute");
  });

  it('is skipped, with a message, when the Azure CLI is not signed in, and lists nothing', () => {
    const run = runHook({ kind: 'signed-out' }, outputs);

    expect(run.status).toBe(0);
    expect(run.azCalls).toEqual(['account show --output none']);
    expect(run.stdout).toContain('skipped: the Azure CLI is not signed in');
  });

  it('is skipped when DEPLOYMENT_STORAGE_WAIT_SECONDS is 0', () => {
    const run = runHook(
      { kind: 'propagating', refusals: 1000 },
      { ...outputs, DEPLOYMENT_STORAGE_WAIT_SECONDS: '0' },
    );

    expect(run.status).toBe(0);
    expect(run.azCalls).toEqual([]);
    expect(run.stdout).toContain('skipped: DEPLOYMENT_STORAGE_WAIT_SECONDS is 0.');
  });

  it('fails clearly without the outputs it reads, or with a wait that is not a number', () => {
    const noOutputs = runHook({ kind: 'propagating', refusals: 0 }, {});
    const notANumber = runHook(
      { kind: 'propagating', refusals: 0 },
      { ...outputs, DEPLOYMENT_STORAGE_WAIT_SECONDS: '5m' },
    );

    expect(noOutputs.status).toBe(1);
    expect(noOutputs.stderr).toContain('STORAGE_ACCOUNT_NAME and DEPLOYMENT_CONTAINER_NAME are not set');
    expect(notANumber.status).toBe(1);
    expect(notANumber.stderr).toContain(
      "DEPLOYMENT_STORAGE_WAIT_SECONDS must be a whole number of seconds, not '5m'",
    );
    expect([...noOutputs.azCalls, ...notANumber.azCalls]).toEqual([]);
  });
});

describe('azure.yaml hooks', () => {
  const azureYaml = parse(readFileSync(path.join(PROJECT_ROOT, 'azure.yaml'), 'utf8')) as Record<
    string,
    unknown
  >;

  it('runs the script with sh after every provision, stopping azd when it fails', () => {
    expect(at(azureYaml, 'hooks.postprovision')).toEqual({
      shell: 'sh',
      run: scriptPath,
      interactive: true,
      continueOnError: false,
    });
  });

  it('points at an executable POSIX sh script', () => {
    expect(statSync(script).mode & 0o111).toBe(0o111);
    expect(readFileSync(script, 'utf8').split('\n')[0]).toBe('#!/bin/sh');
  });
});

describeInfra(
  'what the hook reads from the azd environment',
  () => ({}),
  ({ compiled }) => {
    it('is output by infra/main.bicep, the container name taken from the container itself', () => {
      const read = [...readFileSync(script, 'utf8').matchAll(/\$\{([A-Z_]+):-\}/g)].map((match) => match[1]);
      const storage = at(compiled().template, 'resources.storage.properties.template');

      expect(read).toEqual(['STORAGE_ACCOUNT_NAME', 'DEPLOYMENT_CONTAINER_NAME']);
      expect(Object.keys(compiled().template.outputs)).toEqual(expect.arrayContaining(read));
      expect(compiled().template.outputs['DEPLOYMENT_CONTAINER_NAME']?.value).toBe(
        "[reference('storage').outputs.deploymentContainerName.value]",
      );
      expect(at(storage, 'outputs.deploymentContainerName.value')).toBe(
        "[parameters('deploymentContainerName')]",
      );
    });
  },
);
