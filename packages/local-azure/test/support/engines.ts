// The test-only .NET harnesses of packages/local-azure/test/engines (ServiceBus, Cosmos): whether `dotnet` is here, and
// each harness built before a suite runs it. Several suites run the same harness, in jest workers
// side by side; two `dotnet build`s of one project at once collide in its obj/ folder, so a build
// takes a lock file first (the second build then finds the first's output and takes seconds).

import { execFile, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** This package's folder: the harnesses are in its test/engines, their builds in its .cache. */
const PACKAGE = join(__dirname, '..', '..');
const HARNESSES = { ServiceBus: 'ServiceBusEngine.dll', Cosmos: 'CosmosEngine.dll' } as const;
export type Harness = keyof typeof HARNESSES;

/** Whether `dotnet` runs here. */
export const DOTNET = spawnSync('dotnet', ['--version'], { encoding: 'utf8' }).status === 0;

/**
 * Without dotnet, one line says that `file` is skipped and what it would check; under CI
 * (REQUIRE_ENGINES=1, set by .ci/run) a missing dotnet fails the run instead.
 */
export function warnWhenSkipped(file: string, checks: string): void {
  if (DOTNET) return;
  if (process.env['REQUIRE_ENGINES'] === '1')
    throw new Error('REQUIRE_ENGINES is set and dotnet is not on PATH.');
  console.warn(`Skipped ${file}: no dotnet on PATH (install the .NET SDK 10 to ${checks}).`);
}

/** Builds packages/local-azure/test/engines/<harness> (a first build restores its packages from NuGet) and returns its dll. */
export async function buildHarness(harness: Harness): Promise<string> {
  const output = join(PACKAGE, '.cache', 'engines', harness);
  mkdirSync(join(PACKAGE, '.cache', 'engines'), { recursive: true });
  const lock = join(PACKAGE, '.cache', 'engines', `${harness}.lock`);
  await acquire(lock);
  try {
    await run(
      'dotnet',
      ['build', join(PACKAGE, 'test', 'engines', harness), '-o', output, '--nologo', '-v', 'quiet'],
      {
        timeout: 300_000,
      },
    );
  } finally {
    rmSync(lock, { force: true });
  }
  return join(output, HARNESSES[harness]);
}

/** Creates the lock file, waiting while a live process holds it (a dead holder's lock is taken over). */
async function acquire(lock: string): Promise<void> {
  for (;;) {
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    let holder = Number.NaN;
    try {
      holder = Number(readFileSync(lock, 'utf8'));
    } catch {
      continue;
    }
    if (!alive(holder)) rmSync(lock, { force: true });
    else await sleep(250);
  }
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
