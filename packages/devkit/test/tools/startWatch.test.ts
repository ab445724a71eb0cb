import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { watchMode } from '../../src/tools/start/cli';
import { SourceWatcher } from '../../src/tools/start/watch';

/**
 * npm start's watch mode, on a folder of its own: which files count as a change, and how changes
 * are batched. Real file-system events; each test waits for the batch it expects (a batch that never
 * comes fails at jest's timeout), and what must be ignored is written before what must not, so that
 * the batch shows it was left out.
 */
let root: string;
let watcher: SourceWatcher | undefined;
let batches: string[][];
let waiting: (() => void) | undefined;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'watch-'));
  for (const folder of ['functions', 'src', join('src', 'consumers'), 'test']) mkdirSync(join(root, folder));
  batches = [];
  watcher = new SourceWatcher(
    root,
    (files) => {
      batches.push(files);
      waiting?.();
    },
    100,
  );
});

afterEach(() => {
  watcher?.close();
  rmSync(root, { recursive: true, force: true });
});

function nextBatch(): Promise<string[]> {
  const seen = batches.length;
  return new Promise((resolve) => {
    waiting = () => {
      if (batches.length > seen) resolve(batches[seen]!);
    };
  });
}

const write = (file: string, text = 'x'): void => writeFileSync(join(root, file), text);

it("reports a change to a bundled source's folder, a new function and host.json, as one batch", async () => {
  watcher!.watch(new Set([join(root, 'src', 'app.ts'), join(root, 'src', 'topology.json')]));
  const batch = nextBatch();

  write(join('src', 'app.ts'));
  write(join('src', 'topology.json'));
  write(join('functions', 'new-consumer.ts'));
  write('host.json');

  expect(await batch).toEqual([
    join('functions', 'new-consumer.ts'),
    'host.json',
    join('src', 'app.ts'),
    join('src', 'topology.json'),
  ]);
});

it("ignores editors' swap files, other files of the project folder, and folders no source is in", async () => {
  watcher!.watch(new Set([join(root, 'src', 'app.ts')]));
  const batch = nextBatch();

  write(join('src', '.app.ts.swp'));
  write(join('src', 'app.ts~'));
  write('README.md');
  write('package-lock.json');
  write(join('test', 'app.test.ts'));
  write(join('src', 'consumers', 'points.ts'));
  write(join('src', 'app.ts'));

  expect(await batch).toEqual([join('src', 'app.ts')]);
});

it("follows the latest build's sources: a folder they now use is watched, one they left is not", async () => {
  watcher!.watch(new Set([join(root, 'src', 'app.ts')]));
  watcher!.watch(new Set([join(root, 'src', 'consumers', 'points.ts')]));
  const batch = nextBatch();

  write(join('src', 'app.ts'));
  write(join('src', 'consumers', 'points.ts'));

  expect(await batch).toEqual([join('src', 'consumers', 'points.ts')]);
});

describe('whether npm start watches, and why (its banner says it)', () => {
  it.each([
    [{ watch: true, 'no-watch': false }, false, { watch: true, why: '--watch' }],
    [{ watch: false, 'no-watch': true }, true, { watch: false, why: '--no-watch' }],
    [
      { watch: false, 'no-watch': false },
      true,
      { watch: true, why: 'output is a terminal; --no-watch turns it off' },
    ],
    [
      { watch: false, 'no-watch': false },
      false,
      { watch: false, why: 'output is not a terminal; --watch turns it on' },
    ],
  ])('%j, a terminal: %s', (flags, terminal, expected) => {
    expect(watchMode(flags, terminal)).toEqual(expected);
  });
});
