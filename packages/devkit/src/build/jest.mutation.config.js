const { readdirSync } = require('node:fs');
const { join, posix } = require('node:path');

/** The project's root (this file is run from the repository, where the library lives). */
const ROOT = join(__dirname, '..', '..', '..', '..');
const { projects, testTimeout } = require(join(ROOT, 'jest.config.js'));

/**
 * The jest config Stryker runs (packages/devkit/src/build/stryker.config.mjs): the fast suites whose business is
 * the library, its own (packages/inbox/test) and the functions invoked as the host invokes them
 * (test/functions). A behaviour of packages/inbox/src is pinned when one of them fails without it. The other
 * fast suites run library code only on their way to something else, and would make every mutant
 * cost minutes.
 */
const LIBRARY_SUITES = ['packages/inbox/test', 'test/functions'];

/**
 * Suites that read the library's source text rather than run it: Stryker instruments that text in
 * its sandbox, so they would fail before any mutant is tried, and they pin no behaviour a mutant
 * can change.
 */
const READS_SOURCE_TEXT = ['packages/inbox/test/publicApi.test.ts'];

const libraryProject = projects.find((project) => project.displayName === 'inbox');

/**
 * Every workspace package by its name, from the sandbox Stryker mutates: node_modules is linked from
 * the project, so `@idempotent-consumers/inbox` would resolve to the project's unmutated
 * packages/inbox (no mutant reached, and an error class of one copy no instance of the other's),
 * and local Azure and the dev kit to the project's own, which load the project's app, not the
 * sandbox's.
 */
const PACKAGES = join(__dirname, '..', '..', '..');
const WORKSPACE_ENTRIES = Object.fromEntries(
  readdirSync(PACKAGES).flatMap((folder) => {
    const manifest = require(join(PACKAGES, folder, 'package.json'));
    // A pattern entry (`./internal/*` → `./src/*.ts`) maps what its `*` stands for.
    return Object.entries(manifest.exports).map(([entry, file]) => [
      `^${posix.join(manifest.name, entry).replace(/[/.]/g, '\\$&').replace('*', '(.*)')}$`,
      `<rootDir>/${posix.join('packages', folder, file).replace('*', '$1')}`,
    ]);
  }),
);

/** @type {import('jest').Config} */
module.exports = {
  ...libraryProject,
  displayName: 'mutation',
  rootDir: ROOT,
  roots: LIBRARY_SUITES.map((folder) => `<rootDir>/${folder}`),
  testMatch: LIBRARY_SUITES.map((folder) => `<rootDir>/${folder}/**/*.test.ts`),
  testPathIgnorePatterns: [...(libraryProject.testPathIgnorePatterns ?? []), ...READS_SOURCE_TEXT],
  moduleNameMapper: { ...libraryProject.moduleNameMapper, ...WORKSPACE_ENTRIES },
  testTimeout,
};
