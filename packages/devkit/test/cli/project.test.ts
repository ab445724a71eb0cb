import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';

/**
 * The dev kit finds the app it works on from where the command runs (npm runs a script from the
 * app's folder), not from where the dev kit is installed: a copy of the app that takes the dev kit
 * from a registry has it under node_modules.
 */
const PROJECT = path.join(PROJECT_ROOT, 'packages', 'devkit', 'src', 'cli', 'project.ts');

function projectRootFrom(cwd: string): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(
    process.execPath,
    [require.resolve('tsx/cli'), '-e', `console.log(require(${JSON.stringify(PROJECT)}).PROJECT_ROOT)`],
    { cwd, encoding: 'utf8', timeout: 60_000 },
  );
}

describe('PROJECT_ROOT', () => {
  it('is the nearest folder up from the working directory with the app’s package.json and host.json', () => {
    const app = mkdtempSync(path.join(tmpdir(), 'devkit-app-'));
    writeFileSync(path.join(app, 'package.json'), '{}');
    writeFileSync(path.join(app, 'host.json'), '{}');
    mkdirSync(path.join(app, 'src', 'consumers'), { recursive: true });

    expect(projectRootFrom(path.join(PROJECT_ROOT, 'src')).stdout.trim()).toBe(PROJECT_ROOT);
    expect(projectRootFrom(app).stdout.trim()).toBe(app);
    expect(projectRootFrom(path.join(app, 'src', 'consumers')).stdout.trim()).toBe(app);
  });

  it('is refused, saying where to run from, outside any app', () => {
    const nowhere = mkdtempSync(path.join(tmpdir(), 'devkit-nowhere-'));
    const run = projectRootFrom(nowhere);

    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain(
      `No Functions app here: neither ${nowhere} nor a folder above it has host.json and package.json. Run the command from the app's folder.`,
    );
  });
});
