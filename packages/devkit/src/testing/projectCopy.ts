import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { functionNameOf, type Topology } from '@idempotent-consumers/inbox/internal';

import { PROJECT_ROOT } from '../cli/project';
import { azdEnvironment, azdParameters, build, locateBicep, resources, snapshot } from './bicep';

/**
 * A copy of this checkout in a temporary directory: the files git knows (committed or not, ignored
 * ones left out), with node_modules copied and .cache (the Bicep CLI) linked, so the copy's own scripts
 * run there as in a fresh clone after `npm ci`.
 */
export interface ProjectCopy {
  root: string;
  /** Runs a command in the copy (with this environment instead of the test's); never throws. */
  run(
    command: string,
    args: readonly string[],
    environment?: NodeJS.ProcessEnv,
  ): { status: number | null; output: string };
  /** Runs a tool of the copy with tsx, as `npm run` does. */
  tool(file: string, args: readonly string[]): { status: number | null; stdout: string; stderr: string };
  read(file: string): string;
  remove(): void;
}

export function copyProject(): ProjectCopy {
  const root = mkdtempSync(path.join(tmpdir(), 'template-copy-'));
  const files = projectFiles();
  // node_modules and .cache are made below (in a worktree they may be symlinks git does not ignore).
  const linked = new Set(['node_modules', '.cache']);
  for (const file of files.filter((name) => !linked.has(name))) {
    const source = path.join(PROJECT_ROOT, file);
    // A file deleted in the working tree but not yet in the index is not part of the checkout.
    try {
      mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
      cpSync(source, path.join(root, file));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  // A fresh clone has no .cache until something writes there: a link to nothing would make the
  // copy's tools fail to create anything in it.
  mkdirSync(path.join(PROJECT_ROOT, '.cache'), { recursive: true });
  symlinkSync(path.join(PROJECT_ROOT, '.cache'), path.join(root, '.cache'));
  copyNodeModules(root);
  const env = { ...process.env, APPLICATIONINSIGHTS_CONNECTION_STRING: '', FORCE_COLOR: '0' };
  return {
    root,
    run(command, args, environment = env) {
      const result = spawnSync(command, args, {
        cwd: root,
        env: environment,
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      });
      return { status: result.status, output: `${result.stdout}${result.stderr}` };
    },
    tool(file, args) {
      const result = spawnSync(process.execPath, [require.resolve('tsx/cli'), file, ...args], {
        cwd: root,
        env,
        encoding: 'utf8',
      });
      return { status: result.status, stdout: result.stdout, stderr: result.stderr };
    },
    read: (file) => readFileSync(path.join(root, file), 'utf8'),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}

/**
 * The copy's node_modules, as `npm ci` would have installed it: this checkout's, hard-linked file by
 * file (copied where the temporary directory is on another file system), never written to. Its
 * workspace packages are npm's relative links (node_modules/@idempotent-consumers/inbox ->
 * ../../packages/inbox), so in the copy they are the copy's own packages/, not this checkout's; and
 * npm reads the other packages as installed, not linked.
 */
function copyNodeModules(root: string): void {
  const target = path.join(root, 'node_modules');
  mkdirSync(target);
  const source = `${path.join(PROJECT_ROOT, 'node_modules')}/.`;
  for (const flags of ['-al', '-a']) {
    if (spawnSync('cp', [flags, source, target], { stdio: 'ignore' }).status === 0) return;
  }
  throw new Error(`Could not copy ${source} to ${target}.`);
}

/**
 * The project's files: those git knows (committed or not, ignored ones left out); in a copy that is
 * no git work tree (a copy of a copy, as the remove:samples test makes), every file but
 * node_modules, .cache and what builds write (dist, .NET's bin and obj).
 */
function projectFiles(): string[] {
  const listed = spawnSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
  });
  if (listed.status === 0) return listed.stdout.split('\0').filter(Boolean);
  if (!/not a git repository/i.test(listed.stderr)) throw new Error(`git ls-files failed: ${listed.stderr}`);
  const skipped = new Set(['node_modules', '.cache', '.git', 'dist', 'bin', 'obj']);
  const files: string[] = [];
  const walk = (folder: string): void => {
    for (const entry of readdirSync(path.join(PROJECT_ROOT, folder), { withFileTypes: true })) {
      if (skipped.has(entry.name)) continue;
      const relative = folder === '' ? entry.name : path.join(folder, entry.name);
      if (entry.isDirectory()) walk(relative);
      else if (entry.isFile()) files.push(relative);
    }
  };
  walk('');
  return files;
}

/** A copy of the project for the calling test file, made before its tests and removed after them. */
export function useProjectCopy(): () => ProjectCopy {
  let copy: ProjectCopy | undefined;
  beforeAll(() => {
    copy = copyProject();
  });
  afterAll(() => copy?.remove());
  return () => {
    if (!copy) throw new Error('the project copy is made in beforeAll');
    return copy;
  };
}

const bin = (name: string): string => path.join(PROJECT_ROOT, 'node_modules', '.bin', name);

/** `npm run check` of the copy: the type-check, ESLint and Prettier over the whole project. */
export function checkProject(copy: ProjectCopy): string[] {
  const failures: string[] = [];
  for (const [command, args] of [
    [bin('tsc'), ['-p', 'tsconfig.json', '--noEmit']],
    [bin('eslint'), ['.', '--max-warnings', '0']],
    [bin('prettier'), ['--check', '.']],
  ] as const) {
    const { status, output } = copy.run(command, args);
    if (status !== 0) failures.push(`${path.basename(command)} failed:\n${output}`);
  }
  return failures;
}

/** Runs these jest suites of the copy with the copy's jest.config.js; the output when one fails. */
export function jestIn(copy: ProjectCopy, suites: readonly string[]): { ok: boolean; output: string } {
  const { status, output } = copy.run(process.execPath, [
    path.join(PROJECT_ROOT, 'node_modules', 'jest', 'bin', 'jest.js'),
    '--ci',
    '--runInBand',
    ...suites,
  ]);
  return { ok: status === 0, output };
}

/**
 * Makes the copy a git work tree on this checkout's history, as a clone is, for the suites that read
 * it (packages/devkit/test/build/mutateChanged.test.ts): the objects shared with this checkout, not copied; the
 * copy's files as they are, so a change not committed here shows as one there.
 */
export function withHistory(copy: ProjectCopy): void {
  const clone = path.join(copy.root, '.history');
  const cloned = copy.run('git', ['clone', '--quiet', '--shared', '--no-checkout', PROJECT_ROOT, clone]);
  if (cloned.status !== 0) throw new Error(`git clone of this checkout failed: ${cloned.output}`);
  renameSync(path.join(clone, '.git'), path.join(copy.root, '.git'));
  rmSync(clone, { recursive: true });
  const reset = copy.run('git', ['reset', '--quiet']);
  if (reset.status !== 0) throw new Error(`git reset in the copy failed: ${reset.output}`);
}

/**
 * Runs the copy's root tier as far as the app's changes reach it: the jest projects its `npm test`
 * selects but the workspace packages' (the library's suites import nothing of the app, which the
 * boundary rule keeps so, and a copy changes only the app), on `maxWorkers` cores, from a user's
 * shell (none of the Cosmos DB or Service Bus settings this test's setup placed); names each test that failed
 * as `<suite> › <test>: <its error>`, and each suite that could not run (or jest's output, when
 * it gave no results).
 */
export function fastSetIn(copy: ProjectCopy, maxWorkers: number): string[] {
  const results = path.join(copy.root, '.fast-set.json');
  const shell = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !/^(COSMOS_|SERVICEBUS_|INBOX_|PURGE_|HOST_|APPLICATIONINSIGHTS_)/.test(name),
    ),
  );
  const { output } = copy.run(
    process.execPath,
    [
      path.join(PROJECT_ROOT, 'node_modules', 'jest', 'bin', 'jest.js'),
      ...[
        '--ci',
        '--selectProjects',
        ...appProjectsOf(copy),
        `--maxWorkers=${maxWorkers}`,
        '--json',
        `--outputFile=${results}`,
      ],
    ],
    { ...shell, FORCE_COLOR: '0' },
  );
  let report: JestReport;
  try {
    report = JSON.parse(readFileSync(results, 'utf8')) as JestReport;
  } catch {
    return [`jest gave no results:\n${output.slice(-4000)}`];
  }
  // The error and jest's Expected/Received lines, without the code frame and stack that follow.
  const gist = (message = ''): string =>
    message
      .split('\n')
      .map((line) => line.trim())
      .filter(Boolean)
      .slice(0, 6)
      .join(' | ')
      .slice(0, 600);
  const failures = report.testResults.flatMap((suite) => {
    const file = path.relative(copy.root, suite.name);
    const failed = suite.assertionResults
      .filter((test) => test.status === 'failed')
      .map((test) => `${file} › ${test.fullName}: ${gist(test.failureMessages[0])}`);
    return failed.length > 0 || suite.status !== 'failed' ? failed : [`${file}: ${gist(suite.message)}`];
  });
  if (failures.length === 0 && !report.success) failures.push(`jest failed:\n${output.slice(-4000)}`);
  return failures;
}

/** The copy's jest projects whose suites answer in seconds: all but `slow`. */
/**
 * The root tier: the jest projects the copy's own `npm test` selects (the app's and the library's
 * fast suites). A copy changes only the app, which the packages' suites do not read (but for the
 * few imports the boundary rule lets through, each marked where it is).
 */
/** The jest projects the copy's `npm test` selects, but those of its workspace packages (named by their folders). */
function appProjectsOf(copy: ProjectCopy): string[] {
  const manifest = JSON.parse(readFileSync(path.join(copy.root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const selected = /--selectProjects((?: [\w-]+)+)/.exec(manifest.scripts.test ?? '');
  if (!selected) throw new Error(`The copy's npm test selects no jest projects: ${manifest.scripts.test}`);
  const projects = selected[1]!.trim().split(' ');
  return projects.filter((project) => !existsSync(path.join(copy.root, 'packages', project, 'package.json')));
}

/** What `jest --json` writes, as far as fastSetIn reads it. */
interface JestReport {
  success: boolean;
  testResults: {
    name: string;
    status: 'passed' | 'failed';
    message: string;
    assertionResults: { fullName: string; status: string; failureMessages: string[] }[];
  }[];
}

/**
 * What the copy's infra/main.bicep deploys, evaluated by the Bicep CLI (`bicep snapshot`, as in
 * test/infra) with azd's parameters: each subscription as `topic/subscription` and its filter.
 */
export async function deployedSubscriptions(
  copy: ProjectCopy,
): Promise<{ subscriptions: string[]; filters: Record<string, unknown> }> {
  const cli = locateBicep();
  if (!cli.found) throw new Error(`no Bicep CLI (${cli.reason}); set BICEP_PATH or install dotnet`);
  const templateFile = path.join(copy.root, 'infra', 'main.bicep');
  const { template } = await build(cli.path, templateFile);
  const evaluated = await snapshot(cli.path, azdParameters(template, azdEnvironment), { templateFile });
  if (!evaluated.ok) throw new Error(`bicep snapshot failed:\n${evaluated.message}`);
  const entity = (name: string): string => name.split('/').slice(1, 3).join('/');
  return {
    subscriptions: resources(evaluated.snapshot, 'Microsoft.ServiceBus/namespaces/topics/subscriptions')
      .map((s) => entity(s.name))
      .sort(),
    filters: Object.fromEntries(
      resources(evaluated.snapshot, 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules').map(
        (rule) => [
          entity(rule.name),
          rule.properties?.['correlationFilter'] ?? rule.properties?.['sqlFilter'],
        ],
      ),
    ),
  };
}

/** Every `topic/subscription` src/topology.json of the copy declares. */
export function declaredSubscriptions(copy: ProjectCopy): string[] {
  const topology = JSON.parse(copy.read('src/topology.json')) as Topology;
  return topology.topics.flatMap((t) => t.subscriptions.map((s) => `${t.name}/${s.name}`)).sort();
}

/** A consumer a test adds to a copy with new:consumer: its name, function, topic and subject. */
export interface NewConsumer {
  name: string;
  /** Its function, and the name of its files (functionNameOf). */
  function: string;
  topic: string;
  subject: string;
}

/**
 * The consumer a test wants to add, or, when the copy already has one by that name or function (a
 * consumer of the user's own), `<name>-2`, `<name>-3`...; its subject likewise, when its topic
 * already carries it; and with `newTopic`, its topic too, when the copy declares it: new:consumer
 * would refuse a name or subject taken, and the test must hold whatever consumers the project has.
 */
export function unusedConsumer(
  copy: ProjectCopy,
  wanted: Omit<NewConsumer, 'function'> & { newTopic?: boolean },
): NewConsumer {
  const declared = JSON.parse(copy.read('src/topology.json')) as Topology;
  const names = new Set(declared.topics.flatMap((t) => t.subscriptions.map((s) => s.name)));
  const taken = (name: string): boolean =>
    names.has(name) ||
    [`functions/${functionNameOf(name)}.ts`, `src/consumers/${functionNameOf(name)}.ts`].some((file) =>
      existsSync(path.join(copy.root, file)),
    );
  const name = firstUnused(wanted.name, '-', taken);
  const topicName =
    wanted.newTopic === true
      ? firstUnused(wanted.topic, '-', (topic) => declared.topics.some((t) => t.name === topic))
      : wanted.topic;
  const topic = declared.topics.find((t) => t.name === topicName);
  const subjects = new Set([
    ...(topic?.subscriptions.flatMap((s) => s.subjects) ?? []),
    ...(topic?.unsubscribedSubjects ?? []),
  ]);
  const subject = firstUnused(wanted.subject, '', (candidate) => subjects.has(candidate));
  return { name, function: functionNameOf(name), topic: topicName, subject };
}

/** `wanted`, or the first of `wanted<separator>2`, `wanted<separator>3`... not taken. */
function firstUnused(wanted: string, separator: string, taken: (candidate: string) => boolean): string {
  for (let n = 1; ; n++) {
    const candidate = n === 1 ? wanted : `${wanted}${separator}${n}`;
    if (!taken(candidate)) return candidate;
  }
}

/**
 * A user's first consumers: the issue 41 report's, and the docs' examples (README's and
 * tools/README's, an inbox and a versioned one), each named so that it clashes with none the copy
 * already has.
 */
const USER_CONSUMERS: readonly (Omit<NewConsumer, 'function'> & { kind?: 'versioned' })[] = [
  { name: 'probe.widget-counter', topic: 'business-events', subject: 'WidgetCounted' },
  { name: 'shipping.label-printer', topic: 'business-events', subject: 'OrderShipped' },
  { name: 'shipping.parcel-counter', topic: 'shipping-events', subject: 'ParcelShipped' },
  { name: 'billing.credit-limit', topic: 'business-events', subject: 'CreditLimitSet', kind: 'versioned' },
];

/** Adds the user's first consumers to the copy with `npm run new:consumer`; throws with its output when one fails. */
export function addUserConsumers(copy: ProjectCopy): NewConsumer[] {
  return USER_CONSUMERS.map(({ kind, ...wanted }) => {
    const own = unusedConsumer(copy, wanted);
    const added = copy.tool('packages/devkit/src/tools/newConsumer.ts', [
      ...['--name', own.name, '--topic', own.topic, '--subject', own.subject],
      ...(kind === undefined ? [] : ['--kind', kind]),
    ]);
    if (added.status !== 0 || added.stderr !== '')
      throw new Error(`new:consumer --name ${own.name} failed (${added.status}):\n${added.stderr}`);
    return own;
  });
}
