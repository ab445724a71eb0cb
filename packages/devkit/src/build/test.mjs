// npm test: the project's checks (`npm run check`: type-check, lint, format check) and every jest
// suite, side by side. Each check runs on one core, one after the other, so run first they would
// leave a core idle for a minute; run beside jest, jest starts at once. The checks' output is printed
// as one block when they end (while jest still runs, if it does), and the run fails when either does.
// Arguments go to jest (`npm test -- packages/inbox`). First, the Node.js version (packages/devkit/src/build/nodeVersion.mjs).
/* global console */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

import { tooOld } from './nodeVersion.mjs';

const problem = tooOld();
if (problem !== undefined) {
  console.error(problem);
  process.exit(1);
}

const require = createRequire(import.meta.url);
const exited = (child) => new Promise((resolve) => child.on('close', (code) => resolve(code ?? 1)));

const check = spawn('npm', ['run', '--silent', 'check'], { stdio: ['ignore', 'pipe', 'pipe'] });
let checkOutput = '';
check.stdout.on('data', (data) => (checkOutput += data));
check.stderr.on('data', (data) => (checkOutput += data));
const checked = exited(check).then((code) => {
  const verdict = code === 0 ? 'passed' : `FAILED (exit code ${code})`;
  console.log(`\n== npm run check (type-check, lint, format check): ${verdict}\n${checkOutput.trim()}\n`);
  return code;
});

const jest = spawn(process.execPath, [require.resolve('jest/bin/jest'), ...process.argv.slice(2)], {
  stdio: 'inherit',
});
const tested = exited(jest);

const [checkCode, jestCode] = await Promise.all([checked, tested]);
if (checkCode !== 0) console.error('npm test: npm run check failed (its output is above).');
process.exitCode = checkCode !== 0 || jestCode !== 0 ? 1 : 0;
