// npm run bench runs the benchmark as a deployment runs the app: compiled JavaScript, not tsx. This
// compiles it and what it imports into .cache/bench (tsc, sample/bench/tsconfig.json), then gives the
// compiled library its package name there, so that `@idempotent-consumers/inbox` resolves to the
// compiled files from .cache/bench and to the TypeScript sources everywhere else.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const root = join(import.meta.dirname, '..', '..');
const out = join(root, '.cache', 'bench');

rmSync(out, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [require.resolve('typescript/bin/tsc'), '-p', join(root, 'sample', 'bench', 'tsconfig.json')],
  {
    stdio: 'inherit',
  },
);
const library = JSON.parse(readFileSync(join(root, 'packages', 'inbox', 'package.json'), 'utf8'));
const compiled = {
  ...library,
  exports: Object.fromEntries(
    Object.entries(library.exports).map(([entry, file]) => [entry, file.replace(/\.ts$/, '.js')]),
  ),
};
writeFileSync(join(out, 'packages', 'inbox', 'package.json'), `${JSON.stringify(compiled, null, 2)}\n`);
const link = join(out, 'node_modules', library.name);
mkdirSync(dirname(link), { recursive: true });
symlinkSync(join(out, 'packages', 'inbox'), link, 'dir');
