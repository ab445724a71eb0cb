// The console's tests in a real browser: packages/devkit/src/tools/console/browser.ts finds and launches Chromium.

import {
  findChromium,
  launchBrowser as launch,
} from '@idempotent-consumers/devkit/internal/tools/console/browser';
import type { Browser } from 'playwright-core';

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

export function launchBrowser(): Promise<Browser> {
  return launch(CHROMIUM!);
}
