// npm run bench runs the benchmark as a deployment runs the app: compiled JavaScript, not tsx. This
// compiles it and what it imports into .cache/bench (tsc, sample/bench/tsconfig.json), then gives each
// compiled workspace package its package name there, so that `@idempotent-consumers/inbox` (and
// local-azure) resolve to the compiled files from .cache/bench and to the TypeScript sources
// everywhere else.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
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
// Each workspace package the benchmark imports (the library, local Azure) was compiled with it.
for (const folder of readdirSync(join(root, 'packages'))) {
  if (!existsSync(join(out, 'packages', folder))) continue;
  const manifest = JSON.parse(readFileSync(join(root, 'packages', folder, 'package.json'), 'utf8'));
  const compiled = {
    ...manifest,
    exports: Object.fromEntries(
      Object.entries(manifest.exports).map(([entry, file]) => [entry, file.replace(/\.ts$/, '.js')]),
    ),
  };
  writeFileSync(join(out, 'packages', folder, 'package.json'), `${JSON.stringify(compiled, null, 2)}\n`);
  const link = join(out, 'node_modules', manifest.name);
  mkdirSync(dirname(link), { recursive: true });
  symlinkSync(join(out, 'packages', folder), link, 'dir');
}
