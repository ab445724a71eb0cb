// jest globalSetup: finds the Bicep CLI once per run, before any test file starts, when the run
// includes the infra tests. A first run with `dotnet` restores the pinned CLI from NuGet (about a
// minute): find-bicep.sh's progress is shown as it comes. Without a CLI, one line says why the infra
// tests are skipped and what to install. Test files read the outcome from the environment
// (BICEP_PATH, or BICEP_UNAVAILABLE with the reason), which jest's workers inherit.

import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import {
  locateBicepShowingProgress,
  skippedInfraTests,
} from '@idempotent-consumers/devkit/internal/testing/bicep';

/** The part of jest's global config this reads. */
interface RunConfig {
  rootDir: string;
  testPathPatterns: { toExecutor(options: { rootDir: string }): { isMatch(absolutePath: string): boolean } };
}

export default async function findBicepOnce({ rootDir, testPathPatterns }: RunConfig): Promise<void> {
  if (process.env['BICEP_PATH'] || process.env['BICEP_UNAVAILABLE']) {
    shareResultsInThisRun();
    return;
  }
  const infraTests = path.join(PROJECT_ROOT, 'test', 'infra');
  const selected = testPathPatterns.toExecutor({ rootDir });
  const runsInfraTests = readdirSync(infraTests).some(
    (file) => file.endsWith('.test.ts') && selected.isMatch(path.join(infraTests, file)),
  );
  if (!runsInfraTests) return;

  shareResultsInThisRun();
  const cli = await locateBicepShowingProgress();
  if (cli.found) {
    process.env['BICEP_PATH'] = cli.path;
    return;
  }
  process.env['BICEP_UNAVAILABLE'] = cli.reason;
  process.stderr.write(`\n${skippedInfraTests(cli.reason)}\n`);
}

/**
 * A folder for this run's builds and snapshots (test/support/bicep.ts sharedInRun), which the
 * workers inherit. Runs may overlap (the scaffold tests run jest in a copy that shares .cache), so
 * only the folders of runs over a day old are removed.
 */
function shareResultsInThisRun(): void {
  const results = path.join(PROJECT_ROOT, '.cache', 'bicep', 'results');
  const dayAgo = Date.now() - 86_400_000;
  for (const run of existsSync(results) ? readdirSync(results) : []) {
    const folder = path.join(results, run);
    if (statSync(folder).mtimeMs < dayAgo) rmSync(folder, { recursive: true, force: true });
  }
  process.env['BICEP_RUN_RESULTS'] = path.join(results, randomUUID());
}
