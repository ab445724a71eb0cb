// The test-only .NET harnesses of this package (src/ServiceBus, src/Cosmos): whether `dotnet` is here, and
// each harness built before a suite runs it. Several suites run the same harness, in jest workers
// side by side; two `dotnet build`s of one project at once collide in its obj/ folder, so a build
// takes a lock file first (the second build then finds the first's output and takes seconds).

import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { acquire } from './lock';

const run = promisify(execFile);
/** This package's folder: the harnesses are in its src, their builds in its .cache. */
const PACKAGE = join(__dirname, '..');
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

/** Builds packages/engines/src/<harness> (a first build restores its packages from NuGet) and returns its dll. */
export async function buildHarness(harness: Harness): Promise<string> {
  const output = join(PACKAGE, '.cache', 'engines', harness);
  mkdirSync(join(PACKAGE, '.cache', 'engines'), { recursive: true });
  const lock = join(PACKAGE, '.cache', 'engines', `${harness}.lock`);
  await acquire(lock);
  try {
    await run('dotnet', ['build', join(__dirname, harness), '-o', output, '--nologo', '-v', 'quiet'], {
      timeout: 300_000,
    });
  } finally {
    rmSync(lock, { force: true });
  }
  return join(output, HARNESSES[harness]);
}
