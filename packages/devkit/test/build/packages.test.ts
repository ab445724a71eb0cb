import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';

/**
 * Each workspace package is a real package (issue 42): a scoped name, a 0.x version, its entries,
 * a `files` list, its own README, and `npm pack` packs it without its tests; every package its
 * sources import is one it declares; the library and local Azure declare no workspace package.
 */
interface Manifest {
  name: string;
  version: string;
  exports: Record<string, string>;
  files: string[];
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

const PACKAGES = path.join(PROJECT_ROOT, 'packages');
const folders = readdirSync(PACKAGES).filter((folder) =>
  existsSync(path.join(PACKAGES, folder, 'package.json')),
);
const manifestOf = (folder: string): Manifest =>
  JSON.parse(readFileSync(path.join(PACKAGES, folder, 'package.json'), 'utf8')) as Manifest;

/** Modules that are no package to declare: the one the Azure Functions worker injects. */
const PROVIDED = new Set(['@azure/functions-core']);

/** The packages a folder's sources import (static, export-from, require and import() calls). */
function importedPackages(folder: string): Set<string> {
  const found = new Set<string>();
  const visit = (directory: string): void => {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const file = path.join(directory, entry.name);
      if (entry.isDirectory()) visit(file);
      else if (/\.(ts|mts|cts|js|mjs|cjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
        // Comments out first: a JSDoc type (`import('estree').Node`) imports nothing.
        const source = readFileSync(file, 'utf8')
          .replace(/\/\*[\s\S]*?\*\//g, '')
          .replace(/^\s*\/\/.*$/gm, '');
        const specifiers = source.matchAll(
          /^\s*(?:import|export)\b[^'";]*?\bfrom\s+'([^']+)'|^\s*import\s+'([^']+)'|\b(?:require|import)\(\s*'([^']+)'\s*\)/gm,
        );
        for (const match of specifiers) {
          const specifier = match[1] ?? match[2] ?? match[3]!;
          if (specifier.startsWith('.') || specifier.startsWith('node:')) continue;
          const name = specifier.startsWith('@')
            ? specifier.split('/').slice(0, 2).join('/')
            : specifier.split('/')[0]!;
          if (!builtinModules.includes(name) && !PROVIDED.has(name)) found.add(name);
        }
      }
    }
  };
  visit(path.join(PACKAGES, folder, 'src'));
  return found;
}

/** An entry's file, or for a pattern entry (`./src/*.ts`) the folder it exposes. */
const patternFolder = (target: string): string =>
  target.includes('*') ? target.slice(0, target.indexOf('*')) : target;

/** npm's own settings only (under npm test the outer npm's configuration is in the environment). */
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_config_/i.test(name)));

describe('the workspace packages', () => {
  it('are the library, local Azure and the dev kit, and the test-only .NET engines', () => {
    expect(folders.map((folder) => manifestOf(folder).name).sort()).toEqual([
      '@idempotent-consumers/devkit',
      '@idempotent-consumers/engines',
      '@idempotent-consumers/inbox',
      '@idempotent-consumers/local-azure',
    ]);
  });

  describe.each(folders)('packages/%s', (folder) => {
    const manifest = manifestOf(folder);

    it('has a 0.x version, entries that exist, a files list and a README of its own', () => {
      expect(manifest.version).toMatch(/^0\.\d+\.\d+$/);
      expect(Object.keys(manifest.exports).length).toBeGreaterThan(0);
      // A pattern entry (`./internal/*`) names a folder whose modules it exposes.
      for (const target of Object.values(manifest.exports).map(patternFolder))
        expect([target, existsSync(path.join(PACKAGES, folder, target))]).toEqual([target, true]);
      expect(manifest.files).toEqual(['src', 'README.md']);
      const readme = readFileSync(path.join(PACKAGES, folder, 'README.md'), 'utf8');
      expect(readme).toMatch(/^# /);
      expect(readme).toContain(manifest.name);
    });

    it('packs with its entries and README, and without its tests', () => {
      const packed = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
        cwd: path.join(PACKAGES, folder),
        env,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect([packed.status, packed.stderr]).toEqual([0, expect.any(String)]);
      const [report] = JSON.parse(packed.stdout) as [{ name: string; files: { path: string }[] }];
      const files = report.files.map((file) => file.path);

      expect(report.name).toBe(manifest.name);
      expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md']));
      for (const target of Object.values(manifest.exports).filter((entry) => !entry.includes('*')))
        expect(files).toContain(path.posix.normalize(target));
      expect(
        files.filter((file) => !file.startsWith('src/') && !['package.json', 'README.md'].includes(file)),
      ).toEqual([]);
      expect(files.filter((file) => /(^|\/)test\/|\.test\.ts$/.test(file))).toEqual([]);
    });

    it('declares every package its sources import', () => {
      const declared = new Set([
        ...Object.keys(manifest.dependencies ?? {}),
        ...Object.keys(manifest.peerDependencies ?? {}),
      ]);

      expect([...importedPackages(folder)].filter((name) => !declared.has(name))).toEqual([]);
    });
  });

  it.each(['inbox', 'local-azure', 'engines'])(
    'leaves packages/%s depending on no other workspace package',
    (folder) => {
      const manifest = manifestOf(folder);

      expect(
        Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies }).filter((name) =>
          name.startsWith('@idempotent-consumers/'),
        ),
      ).toEqual([]);
      expect(
        [...importedPackages(folder)].filter((name) => name.startsWith('@idempotent-consumers/')),
      ).toEqual([]);
    },
  );
});
