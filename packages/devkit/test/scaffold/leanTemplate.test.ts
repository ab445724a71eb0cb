import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { PROJECT_ROOT } from '../../src/cli/project';
import { StartedApp, userEnvironment } from '../../src/testing/npmStart';

/**
 * The lean template (issue 42): what a team that takes the three packages from a registry would
 * own. Each workspace package is packed (`npm pack`, as it would be published), the app is copied
 * without packages/, its package.json takes the tarballs instead of the workspaces, and npm installs
 * it. That copy builds its deployment package, passes its `npm test` and starts `npm start` to ready.
 */
const PACKAGES = ['inbox', 'local-azure', 'devkit'] as const;
const work = mkdtempSync(join(tmpdir(), 'lean-template-'));
const app = join(work, 'app');
/** npm's own settings only (under npm test the outer npm's configuration is in the environment). */
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_config_/i.test(name)));

function run(
  command: string,
  args: readonly string[],
  cwd: string,
  timeout: number,
): SpawnSyncReturns<string> {
  return spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 });
}

/** The last lines of a run's output, for a failure that shows what happened. */
const tail = (result: SpawnSyncReturns<string>): string =>
  `${result.stdout}\n${result.stderr}`.trim().split('\n').slice(-40).join('\n');

interface Manifest {
  workspaces?: string[];
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
}

let started: StartedApp | undefined;

beforeAll(() => {
  const tarballs = join(work, 'tarballs');
  mkdirSync(tarballs);
  const packed = Object.fromEntries(
    PACKAGES.map((folder) => {
      const result = run(
        'npm',
        ['pack', '--json', '--ignore-scripts', '--pack-destination', tarballs],
        join(PROJECT_ROOT, 'packages', folder),
        120_000,
      );
      if (result.status !== 0) throw new Error(`npm pack of packages/${folder} failed:\n${tail(result)}`);
      const [report] = JSON.parse(result.stdout) as [{ name: string; filename: string }];
      return [report.name, `file:../tarballs/${report.filename}`];
    }),
  );

  // The app as git has it (what a clone holds), without the packages.
  const files = run('git', ['ls-files', '-co', '--exclude-standard'], PROJECT_ROOT, 60_000)
    .stdout.split('\n')
    .filter((file) => file !== '' && !file.startsWith('packages/') && existsSync(join(PROJECT_ROOT, file)));
  for (const file of files) {
    mkdirSync(dirname(join(app, file)), { recursive: true });
    copyFileSync(join(PROJECT_ROOT, file), join(app, file));
  }
  const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as Manifest;
  delete manifest.workspaces;
  for (const [name, tarball] of Object.entries(packed)) {
    if (name in manifest.dependencies) manifest.dependencies[name] = tarball;
    else manifest.devDependencies[name] = tarball;
  }
  writeFileSync(join(app, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  // The lock is the workspace's; the copy's own is made by its install.
  rmSync(join(app, 'package-lock.json'));

  const installed = run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], app, 900_000);
  if (installed.status !== 0) throw new Error(`npm install in the lean copy failed:\n${tail(installed)}`);
}, 1_200_000);

afterAll(() => {
  started?.kill();
  rmSync(work, { recursive: true, force: true });
});

describe('the lean template: the app with the packages installed from their tarballs', () => {
  it('has them in node_modules as packages, not links to a workspace', () => {
    for (const name of ['inbox', 'local-azure', 'devkit']) {
      const folder = join(app, 'node_modules', '@idempotent-consumers', name);
      expect([name, existsSync(join(folder, 'src', 'index.ts')), existsSync(join(folder, 'test'))]).toEqual([
        name,
        true,
        false,
      ]);
    }
    expect(existsSync(join(app, 'packages'))).toBe(false);
  });

  it('builds its deployment package', () => {
    const built = run('npm', ['run', 'build'], app, 600_000);

    expect([built.status, built.status === 0 ? '' : tail(built)]).toEqual([0, '']);
    expect(existsSync(join(app, 'dist', 'package.json'))).toBe(true);
  }, 600_000);

  it('passes its npm test: the checks, the app and the sample', () => {
    const tested = run('npm', ['test'], app, 1_200_000);

    expect([tested.status, tested.status === 0 ? '' : tail(tested)]).toEqual([0, '']);
    expect(`${tested.stdout}${tested.stderr}`).toMatch(/Tests: +\d+ passed, \d+ total/);
  }, 1_200_000);

  it('starts npm start to ready', async () => {
    started = new StartedApp(
      'npm',
      ['start', '--', '--cosmos-port', '0', '--servicebus-port', '0', '--no-console', '--no-watch'],
      { cwd: app, env: userEnvironment(join(work, 'local-run.json')) },
    );

    await started.shown(/^Ready\. Press Ctrl\+C to stop\.$/m, 0, 300_000);
    expect(['exit code 0', 'SIGINT']).toContain(await started.interrupt());
  }, 360_000);
});
