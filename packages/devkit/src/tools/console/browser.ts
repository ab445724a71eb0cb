// Headless Chromium for the console's browser test, its screenshots and its benchmark: Debian's
// chromium package (what .ci/run installs when it is missing), or google-chrome, or CHROMIUM_PATH,
// driven by playwright-core, which downloads no browser of its own.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

import { type Browser, chromium } from 'playwright-core';

/** The Chromium binary, when this machine has one. */
export function findChromium(): string | undefined {
  const named = process.env['CHROMIUM_PATH'];
  if (named) return named;
  for (const candidate of ['chromium', 'chromium-browser', 'google-chrome']) {
    const found = spawnSync('sh', ['-c', `command -v ${candidate}`], { encoding: 'utf8' }).stdout.trim();
    if (found && existsSync(found)) return found;
  }
  return undefined;
}

/** Headless Chromium; as root (CI containers) without its sandbox, which needs user namespaces. */
export function launchBrowser(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
}
