// Without a Bicep CLI, a run says once why the infra tests are skipped and what to install; with only
// `dotnet`, the first run restores the pinned CLI and says so while it waits. Both run where only
// basic tools are on PATH (no bicep, no az, no dotnet unless a fake one is given) with an empty cache.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import { pinnedBicepVersion } from '@idempotent-consumers/devkit/internal/testing/bicep';

function sandbox(): { bin: string; env: NodeJS.ProcessEnv; remove: () => void } {
  const root = mkdtempSync(path.join(tmpdir(), 'no-bicep-'));
  const bin = path.join(root, 'bin');
  mkdirSync(bin);
  for (const tool of 'bash uname dirname cut mkdir chmod cat sed sleep du head'.split(' ')) {
    const where = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
    symlinkSync(where, path.join(bin, tool));
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: bin,
    HOME: root,
    BICEP_CACHE_DIR: path.join(root, 'cache'),
  };
  delete env['BICEP_PATH'];
  delete env['BICEP_UNAVAILABLE'];
  return { bin, env, remove: () => rmSync(root, { recursive: true, force: true }) };
}

it('a jest run without a Bicep CLI prints one line saying why the infra tests are skipped and what to install', () => {
  const { env, remove } = sandbox();
  try {
    const run = spawnSync(
      process.execPath,
      [
        require.resolve('jest/bin/jest'),
        '--ci',
        'test/infra/diagnostics.test.ts',
        'test/infra/network.test.ts',
      ],
      { cwd: PROJECT_ROOT, encoding: 'utf8', env, timeout: 120_000 },
    );
    const output = `${run.stdout}${run.stderr}`;
    const lines = output.split('\n').filter((line) => line.includes('test/infra SKIPPED'));

    expect(run.status).toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("no 'dotnet' to restore Azure.Bicep.CommandLine");
    expect(lines[0]).toContain('Install the .NET SDK');
    expect(lines[0]).toContain(`az bicep install --version v${pinnedBicepVersion}`);
    expect(output).toMatch(/Tests: +\d+ skipped, \d+ total/);
  } finally {
    remove();
  }
}, 120_000);

it('find-bicep.sh says it is restoring from NuGet, how long it has waited, what it has written and the time left, while dotnet restores', () => {
  const { bin, env, remove } = sandbox();
  try {
    // A `dotnet` that writes 23 MB at once, then takes 11 s to restore a `bicep` that reports the
    // pinned version.
    const rid = `${process.platform === 'darwin' ? 'osx' : 'linux'}-${process.arch}`;
    const packageDir = `$(dirname "$2")/../packages/azure.bicep.commandline.${rid}/${pinnedBicepVersion}`;
    const bicep = `${packageDir}/tools/bicep`;
    writeFileSync(
      path.join(bin, 'dotnet'),
      [
        `#!${path.join(bin, 'bash')}`,
        'if [ "$1" = --version ]; then echo 8.0.100; exit 0; fi',
        `mkdir -p "${packageDir}"`,
        `head -c ${23 * 1024 * 1024} /dev/zero > "${packageDir}/download"`,
        'sleep 11',
        `mkdir -p "$(dirname "${bicep}")"`,
        `printf '#!${path.join(bin, 'bash')}\\necho "Bicep CLI version ${pinnedBicepVersion} (fake)"\\n' > "${bicep}"`,
      ].join('\n'),
      { mode: 0o755 },
    );
    const run = spawnSync(path.join(bin, 'bash'), [path.join(PROJECT_ROOT, 'infra', 'find-bicep.sh')], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
      env,
      timeout: 60_000,
    });

    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toMatch(
      new RegExp(`azure\\.bicep\\.commandline\\.${rid}/[\\d.]+/tools/bicep$`),
    );
    expect(run.stderr).toContain(
      `restoring Bicep CLI ${pinnedBicepVersion} (Azure.Bicep.CommandLine.${rid}) from NuGet`,
    );
    expect(run.stderr).toContain(
      '(first run only: a download of about 115 MB, about 230 MB on disk; later runs use this copy)',
    );
    expect(run.stderr).toMatch(/still restoring: \d s, 23 MB of about 230 MB written, about \d+ s left/);
    expect(run.stderr).toMatch(/still restoring: 1\d s, 23 MB of about 230 MB written, about \d+ s left/);
    expect(run.stderr).toMatch(/restored in 1\d s/);
  } finally {
    remove();
  }
}, 60_000);
