// The Bicep CLI itself: infra/ lints clean and is formatted as `bicep format` writes it, main.bicep
// builds at subscription scope, and infra/find-bicep.sh finds a CLI of the pinned version (or says
// clearly why it cannot).

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import {
  type CliResult,
  describeInfra,
  infraDir,
  lint,
  unformattedFiles,
} from '@idempotent-consumers/devkit/internal/testing/bicep';

const findBicepScript = path.join(infraDir, 'find-bicep.sh');
const pinnedBicepVersion = /BICEP_VERSION="\$\{BICEP_VERSION:-([0-9.]+)\}"/.exec(
  readFileSync(findBicepScript, 'utf8'),
)?.[1];

/**
 * Runs find-bicep.sh where only basic tools are on PATH (no dotnet, no az, an empty cache) and,
 * when a version is given, a fake `bicep` that reports it.
 */
function findBicepInSandbox(fakeVersion?: string): {
  status: number | null;
  stdout: string;
  stderr: string;
  fakeBicep: string;
} {
  const sandbox = mkdtempSync(path.join(tmpdir(), 'find-bicep-'));
  try {
    const bin = path.join(sandbox, 'bin');
    mkdirSync(bin);
    for (const tool of ['bash', 'uname', 'dirname', 'cut', 'mkdir', 'chmod', 'cat', 'sed']) {
      const where = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
      symlinkSync(where, path.join(bin, tool));
    }
    const fakeBicep = path.join(bin, 'bicep');
    if (fakeVersion) {
      writeFileSync(
        fakeBicep,
        `#!${path.join(bin, 'bash')}\necho "Bicep CLI version ${fakeVersion} (fake)"\n`,
        { mode: 0o755 },
      );
    }
    const environment = { ...process.env };
    delete environment['BICEP_PATH'];
    const script = spawnSync(path.join(bin, 'bash'), [findBicepScript], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
      env: { ...environment, PATH: bin, HOME: sandbox, BICEP_CACHE_DIR: path.join(sandbox, 'cache') },
    });
    return { status: script.status, stdout: script.stdout, stderr: script.stderr, fakeBicep };
  } finally {
    rmSync(sandbox, { recursive: true, force: true });
  }
}

describeInfra(
  'the Bicep CLI',
  () => ({}),
  ({ cli, compiled }) => {
    let linted: CliResult = { exitCode: -1, output: 'infra/ was not linted' };
    let unformatted: string[] = ['infra/ was not checked'];

    beforeAll(async () => {
      if (cli.found) {
        [linted, unformatted] = await Promise.all([lint(cli.path), unformattedFiles(cli.path)]);
      }
    }, 300_000);

    it('lints every file of infra/ with no error and no warning', () => {
      expect(linted.output.trim()).toBe('');
      expect(linted.exitCode).toBe(0);
    });

    it('finds every .bicep file formatted as `bicep format` writes it', () => {
      expect(unformatted).toEqual([]);
    });

    it('builds main.bicep without diagnostics, at subscription scope', () => {
      expect(compiled().diagnostics).toBe('');
      expect(compiled().template.$schema).toContain('subscriptionDeploymentTemplate.json');
    });

    it('finds a Bicep CLI through infra/find-bicep.sh and prints only its absolute path', () => {
      const script = spawnSync('bash', [findBicepScript], {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
      });

      expect(script.status).toBe(0);
      expect(script.stdout.trim().split('\n')).toHaveLength(1);
      expect(path.isAbsolute(script.stdout.trim())).toBe(true);
    });

    it('makes find-bicep.sh fail with one clear line when no Bicep CLI can be had', () => {
      const script = findBicepInSandbox();

      expect(script.status).not.toBe(0);
      expect(script.stdout).toBe('');
      expect(script.stderr.trim().split('\n')).toEqual([expect.stringContaining('no Bicep CLI found')]);
    });

    it('takes a bicep on PATH of the pinned version, and one of another version only as a last resort', () => {
      const pinned = findBicepInSandbox(pinnedBicepVersion);
      const other = findBicepInSandbox('0.1.0');

      expect([pinned.status, pinned.stdout.trim()]).toEqual([0, pinned.fakeBicep]);
      expect([other.status, other.stdout.trim()]).toEqual([0, other.fakeBicep]);
      expect(other.stderr).toContain(
        `skipping ${other.fakeBicep}: version 0.1.0, the checks are pinned to ${pinnedBicepVersion}`,
      );
      expect(other.stderr).toContain("warning: no 'dotnet' to restore");
    });
  },
);
