import { execFileSync, spawn } from 'node:child_process';

import { bounded } from '../cli/errors';
import { PROJECT_ROOT } from '../cli/project';
import { commandWithFlags, EXIT_CODES, type ExitCode, runCommand, usageError } from '../cli/tool';

/**
 * Mutation testing of what a change touched (packages/devkit/src/build/README.md#mutation-testing): the lines of
 * packages/inbox/src that differ from a base revision, each file's ranges given to Stryker as
 * `--mutate file:start-end`. A whole-library run takes hours on two cores; the lines of one change
 * take a minute or two, so CI runs this on the library's latest change and fails below the
 * threshold of packages/devkit/src/build/stryker.config.mjs (90 %).
 */
const USAGE = `Usage: npm run test:mutation:changed [-- options]
  Mutates the lines of packages/inbox/src that changed since a revision, and fails below the mutation
  score threshold of packages/devkit/src/build/stryker.config.mjs.
Options:
  --base <rev>       compare with this revision (default: HEAD, that is the uncommitted changes)
  --last-change      compare with the parent of the latest commit that changed packages/inbox/src (what CI runs)
  --concurrency <n>  test runner processes (default: 2)
  --dry-run          print the ranges and the Stryker command, run nothing`;

const LIBRARY = 'packages/inbox/src';

/** One file's changed lines, as Stryker's mutate ranges take them. */
export interface ChangedLines {
  file: string;
  ranges: { start: number; end: number }[];
}

/**
 * The added or changed lines per file of a `git diff --unified=0` (its `+++` and `@@` lines). A
 * hunk that only deletes (`+c,0`) changes no line that is left.
 */
export function changedLines(diff: string): ChangedLines[] {
  const files: ChangedLines[] = [];
  let current: ChangedLines | undefined;
  for (const line of diff.split('\n')) {
    const target = /^\+\+\+ (?:b\/(.+)|\/dev\/null)$/.exec(line);
    if (target) {
      current = target[1] === undefined ? undefined : { file: target[1], ranges: [] };
      if (current) files.push(current);
      continue;
    }
    const hunk = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (hunk && current) {
      const start = Number(hunk[1]);
      const count = hunk[2] === undefined ? 1 : Number(hunk[2]);
      if (count > 0) current.ranges.push({ start, end: start + count - 1 });
    }
  }
  return files.filter((file) => file.ranges.length > 0);
}

/** Stryker's `--mutate` value: `file:start-end` for each range, comma-separated. */
export function mutateArgument(changed: readonly ChangedLines[]): string {
  return changed
    .flatMap(({ file, ranges }) => ranges.map(({ start, end }) => `${file}:${start}-${end}`))
    .join(',');
}

function git(args: string[], cwd = PROJECT_ROOT): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/**
 * The changed lines of the library's TypeScript files between `against` (one revision: it against
 * the working tree; two: the first against the second). Renames are followed: the diff covers the
 * whole tree with rename detection, so a file moved into the library from wherever it was shows
 * only the lines its move changed, and a pure move none. A pathspec limited to the library would
 * show a moved file as all new.
 */
export function changedLibraryLines(
  against: readonly string[],
  library = LIBRARY,
  cwd = PROJECT_ROOT,
): ChangedLines[] {
  const diff = git(['diff', '--find-renames', '--unified=0', '--no-color', '--no-ext-diff', ...against], cwd);
  return changedLines(diff).filter(({ file }) => file.startsWith(`${library}/`) && file.endsWith('.ts'));
}

/** The revision to compare with, checked by git (a usage error names what it could not resolve). */
function resolveBase(base: string | undefined, lastChange: boolean | undefined): string {
  if (base !== undefined && lastChange) throw usageError('Give --base or --last-change, not both.', USAGE);
  if (lastChange) {
    const commit = git(['log', '-1', '--format=%H', '--', LIBRARY]).trim();
    if (commit === '') throw usageError(`No commit has changed ${LIBRARY}.`, USAGE);
    const parents = git(['rev-list', '--parents', '-n', '1', commit]).trim().split(' ');
    // The library's first commit: everything in it is new, compared with the empty tree.
    return parents[1] ?? git(['hash-object', '-t', 'tree', '/dev/null']).trim();
  }
  const revision = base ?? 'HEAD';
  try {
    return git(['rev-parse', '--verify', '--quiet', `${revision}^{commit}`]).trim();
  } catch {
    throw usageError(
      `--base ${JSON.stringify(bounded(revision, 80))} is not a revision of this repository.`,
      USAGE,
    );
  }
}

export const command = commandWithFlags(
  'test:mutation:changed',
  {
    options: {
      base: { type: 'string' },
      'last-change': { type: 'boolean' },
      concurrency: { type: 'string', default: '2' },
      'dry-run': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  },
  USAGE,
  async (flags, context): Promise<ExitCode> => {
    const concurrency = Number(flags.concurrency);
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) {
      throw usageError(
        `--concurrency must be a whole number from 1 to 64; got '${bounded(flags.concurrency, 40)}'.`,
        USAGE,
      );
    }
    const base = resolveBase(flags.base, flags['last-change']);
    // Against the working tree when comparing with HEAD (uncommitted work), else against HEAD.
    const against = flags.base === undefined && !flags['last-change'] ? [base] : [base, 'HEAD'];
    const changed = changedLibraryLines(against);
    const described = `${LIBRARY} since ${base.slice(0, 12)}`;
    if (changed.length === 0) {
      context.out(`No line of ${described} changed: nothing to mutate.`);
      return EXIT_CODES.ok;
    }
    const lines = changed.reduce(
      (sum, file) => sum + file.ranges.reduce((count, range) => count + range.end - range.start + 1, 0),
      0,
    );
    context.out(
      `Mutating ${lines} changed line(s) of ${described}: ${changed.map((file) => file.file.replace(`${LIBRARY}/`, '')).join(', ')}`,
    );
    const args = [
      'stryker',
      'run',
      'packages/devkit/src/build/stryker.config.mjs',
      '--mutate',
      mutateArgument(changed),
      '--concurrency',
      String(concurrency),
      // A run of some lines must not overwrite the whole library's incremental results.
      '--incrementalFile',
      '.cache/stryker/incremental-changed.json',
      '--reporters',
      'clear-text,progress-append-only',
    ];
    if (flags['dry-run']) {
      context.out(`npx ${args.join(' ')}`);
      return EXIT_CODES.ok;
    }
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn('npx', args, { cwd: PROJECT_ROOT, stdio: 'inherit' });
      child.on('close', resolve);
      child.on('error', () => resolve(null));
    });
    return code === 0 ? EXIT_CODES.ok : EXIT_CODES.failed;
  },
);

if (require.main === module) runCommand(command);
