// Headless Chromium for the tests that drive the console as a user does: Debian's chromium package
// (what .ci/run installs when it is missing), driven by playwright-core, which downloads no browser
// of its own. CHROMIUM_PATH names another binary.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

import { type Browser, chromium } from 'playwright-core';

function findChromium(): string | undefined {
  const named = process.env['CHROMIUM_PATH'];
  if (named) return named;
  for (const candidate of ['chromium', 'chromium-browser', 'google-chrome']) {
    const found = spawnSync('sh', ['-c', `command -v ${candidate}`], { encoding: 'utf8' }).stdout.trim();
    if (found && existsSync(found)) return found;
  }
  return undefined;
}

/** The Chromium binary, when this machine has one. */
export const CHROMIUM = findChromium();

/**
 * Without Chromium, one line says that `file` is skipped and what it would check; under CI
 * (REQUIRE_BROWSER=1, set by .ci/run) a missing Chromium fails the run instead.
 */
export function warnWhenNoBrowser(file: string, checks: string): void {
  if (CHROMIUM !== undefined) return;
  if (process.env['REQUIRE_BROWSER'] === '1')
    throw new Error(
      'REQUIRE_BROWSER is set and no Chromium was found (apt-get install chromium, or CHROMIUM_PATH).',
    );
  console.warn(`Skipped ${file}: no Chromium (apt-get install chromium, or set CHROMIUM_PATH) to ${checks}.`);
}

/** Headless Chromium; as root (CI containers) without its sandbox, which needs user namespaces. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM!,
    headless: true,
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
}
