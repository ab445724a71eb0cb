// packages/devkit/src/build/mutateChanged.ts (npm run test:mutation:changed, run by .ci/run): which lines of the library a
// change touched, read from `git diff --unified=0`, and the Stryker `--mutate` ranges made of them.
// That Stryker honours the ranges, and fails below its threshold, is Stryker's own behaviour; this
// file checks what we hand it.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { changedLibraryLines, changedLines, mutateArgument } from '../../src/build/mutateChanged';
import { runCommandModule } from '../../src/testing/tools';

const diff = [
  'diff --git a/src/inbox/outbox.ts b/src/inbox/outbox.ts',
  '--- a/src/inbox/outbox.ts',
  '+++ b/src/inbox/outbox.ts',
  '@@ -10,0 +11,2 @@ export const A = 1;',
  '+added one',
  '+added two',
  '@@ -40,3 +42 @@ function f() {',
  '-old',
  '-old',
  '-old',
  '+changed',
  '@@ -90,2 +89,0 @@ function g() {',
  '-deleted',
  '-deleted',
  'diff --git a/src/inbox/gone.ts b/src/inbox/gone.ts',
  '--- a/src/inbox/gone.ts',
  '+++ /dev/null',
  '@@ -1,3 +0,0 @@',
  '-x',
  'diff --git a/src/inbox/new.ts b/src/inbox/new.ts',
  '--- /dev/null',
  '+++ b/src/inbox/new.ts',
  '@@ -0,0 +1,5 @@',
  '+export const n = 1;',
].join('\n');

describe('changedLines', () => {
  it('takes the added and changed lines of each file: a hunk that only deletes, or a deleted file, adds none', () => {
    expect(changedLines(diff)).toEqual([
      {
        file: 'src/inbox/outbox.ts',
        ranges: [
          { start: 11, end: 12 },
          { start: 42, end: 42 },
        ],
      },
      { file: 'src/inbox/new.ts', ranges: [{ start: 1, end: 5 }] },
    ]);
  });

  it('finds nothing in a diff that changes nothing', () => {
    expect(changedLines('')).toEqual([]);
  });
});

describe('mutateArgument', () => {
  it("writes each range as Stryker's file:start-end, comma-separated", () => {
    expect(mutateArgument(changedLines(diff))).toBe(
      'src/inbox/outbox.ts:11-12,src/inbox/outbox.ts:42-42,src/inbox/new.ts:1-5',
    );
  });
});

describe('changedLibraryLines: a library that moves', () => {
  // A repository of its own: the library at old/, then moved whole to lib/ (as a workspace move
  // would), then one line changed where it now is.
  const repo = mkdtempSync(path.join(tmpdir(), 'mutate-moves-'));
  const git = (...args: string[]): string =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], {
      cwd: repo,
      encoding: 'utf8',
    }).trim();
  const lines = (count: number, changed?: number) =>
    Array.from({ length: count }, (_, i) => `export const v${i} = ${i === changed ? 'changed' : i};`).join(
      '\n',
    ) + '\n';
  let created: string;
  let moved: string;
  let edited: string;
  beforeAll(() => {
    git('init', '-q');
    mkdirSync(path.join(repo, 'old'));
    writeFileSync(path.join(repo, 'old', 'a.ts'), lines(40));
    writeFileSync(path.join(repo, 'old', 'b.ts'), lines(30));
    git('add', '-A');
    git('commit', '-qm', 'library');
    created = git('rev-parse', 'HEAD');
    renameSync(path.join(repo, 'old'), path.join(repo, 'lib'));
    git('add', '-A');
    git('commit', '-qm', 'move');
    moved = git('rev-parse', 'HEAD');
    writeFileSync(path.join(repo, 'lib', 'a.ts'), lines(40, 7));
    git('add', '-A');
    git('commit', '-qm', 'edit');
    edited = git('rev-parse', 'HEAD');
  });
  afterAll(() => rmSync(repo, { recursive: true, force: true }));

  it('finds nothing to mutate in a pure move', () => {
    expect(changedLibraryLines([created, moved], 'lib', repo)).toEqual([]);
  });

  it('finds only the changed line of a file that moved and changed', () => {
    expect(changedLibraryLines([created, edited], 'lib', repo)).toEqual([
      { file: 'lib/a.ts', ranges: [{ start: 8, end: 8 }] },
    ]);
    expect(changedLibraryLines([moved, edited], 'lib', repo)).toEqual([
      { file: 'lib/a.ts', ranges: [{ start: 8, end: 8 }] },
    ]);
  });

  it('takes a file new to the library as all new, and nothing outside it', () => {
    writeFileSync(path.join(repo, 'lib', 'c.ts'), lines(3));
    writeFileSync(path.join(repo, 'other.ts'), lines(3));
    try {
      expect(changedLibraryLines([edited], 'lib', repo)).toEqual([]);
      git('add', '-A');
      expect(changedLibraryLines(['--cached', edited], 'lib', repo)).toEqual([
        { file: 'lib/c.ts', ranges: [{ start: 1, end: 3 }] },
      ]);
    } finally {
      git('reset', '-q');
      rmSync(path.join(repo, 'lib', 'c.ts'));
      rmSync(path.join(repo, 'other.ts'));
    }
  });
});

describe('npm run test:mutation:changed', () => {
  const run = (args: string[]) => runCommandModule('packages/devkit/src/build/mutateChanged.ts', args);

  it("--last-change --dry-run names the library's latest change and the Stryker command, or that it has nothing to mutate", async () => {
    const { status, stdout } = await run(['--last-change', '--dry-run']);

    expect(status).toBe(0);
    expect(stdout).toMatch(
      /^(Mutating \d+ changed line\(s\) of packages\/inbox\/src since [0-9a-f]{12}: .+\nnpx stryker run packages\/devkit\/src\/build\/stryker\.config\.mjs --mutate (packages\/inbox\/src\/\w+\.ts:\d+-\d+,?)+ --concurrency 2 |No line of packages\/inbox\/src since [0-9a-f]{12} changed: nothing to mutate\.)/,
    );
  });

  it.each([
    [['--base', 'HEAD', '--last-change'], 'Give --base or --last-change, not both.'],
    [['--base', 'no-such-revision'], '--base "no-such-revision" is not a revision of this repository.'],
    [['--concurrency', '0'], "--concurrency must be a whole number from 1 to 64; got '0'."],
    [['--mutate', 'x'], "Unknown option '--mutate'"],
  ])('refuses %j with its usage, exit 2', async (args, message) => {
    const { status, stderr } = await run(args);

    expect(status).toBe(2);
    expect(stderr).toContain(message);
    expect(stderr).toContain('Usage: npm run test:mutation:changed');
  });
});

describe('the jest config Stryker runs (packages/devkit/src/build/jest.mutation.config.js)', () => {
  it('resolves every entry of every workspace package to the sandbox, not to the linked package', () => {
    // Stryker copies the project into a sandbox but links node_modules: resolved through
    // node_modules, `@idempotent-consumers/inbox` would be the project's own, unmutated library, and
    // local Azure and the dev kit would load the project's app instead of the sandbox's.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const config = require('../../src/build/jest.mutation.config.js') as {
      rootDir: string;
      moduleNameMapper: Record<string, string>;
    };
    const packages = path.join(__dirname, '..', '..', '..');
    const entries = readdirSync(packages).flatMap((folder) => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const manifest = require(path.join(packages, folder, 'package.json')) as {
        name: string;
        exports: Record<string, string>;
      };
      // A pattern entry is tried with one module it exposes.
      return Object.entries(manifest.exports).map(([entry, file]) => ({
        specifier: path.posix.join(manifest.name, entry).replace('*', 'cli/project'),
        file: path.posix.join('packages', folder, file).replace('*', 'cli/project'),
      }));
    });
    expect(entries.map(({ specifier }) => specifier)).toEqual(
      expect.arrayContaining([
        '@idempotent-consumers/inbox',
        '@idempotent-consumers/inbox/internal',
        '@idempotent-consumers/local-azure',
        '@idempotent-consumers/devkit',
      ]),
    );

    for (const { specifier, file } of entries) {
      const mapped = Object.entries(config.moduleNameMapper)
        .filter(([pattern]) => new RegExp(pattern).test(specifier))
        .map(([pattern, target]) =>
          path.relative(
            config.rootDir,
            specifier.replace(new RegExp(pattern), target).replace('<rootDir>', config.rootDir),
          ),
        );
      expect({ specifier, mapped }).toEqual({ specifier, mapped: [file] });
    }
    expect(config.rootDir).toBe(path.resolve(__dirname, '..', '..', '..', '..'));
  });
});
