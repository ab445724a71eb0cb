import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';

import { build, type BuildOptions, type Metafile, type Plugin } from 'esbuild';
import { zipSync } from 'fflate';

import { UsageError } from '../cli/errors';
import { writeFormatted } from '../cli/formatted';
import { PROJECT_ROOT } from '../cli/project';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  runCommand,
  type ToolContext,
} from '../cli/tool';
import { azdZipEntries, listFiles, readAzureYaml } from './azd';
import type { LoadReport } from './loadPackage';

const run = promisify(execFile);

/**
 * The deployment package: what `azd deploy` uploads, built here and nowhere else.
 *
 * azd runs `npm run build` and zips the service's `dist` folder (azure.yaml `dist: dist`,
 * `remoteBuild: false`), so this script owns that folder: it deletes it, then writes
 *
 *   app.js          every function in functions/ and what they import, bundled by esbuild
 *   azureMonitor.js applicationinsights and the OpenTelemetry SDK, loaded after registration
 *   serviceBusPublisher.js  @azure/service-bus for the outbox relay, loaded at its first send
 *   host.json       copied
 *   package.json    name, version and `main: app.js`; no dependencies, so nothing to install
 *
 * No node_modules, no devDependencies, no stale file from a renamed function.
 * `@azure/functions-core` stays external: the Node.js worker provides it at run time.
 */
const USAGE = `Usage:
  npm run build                     write the deployment package to dist/ (what azd deploys)
  npm run package [-- options]      the same, then zip it and measure it
Options:
  --out <dir>         package folder (default: dist)
  --zip <file>        zip file to write (default: .cache/package/consumers.zip)
  --samples <n>       fresh processes that load the package to time it (default: 5)
  --compare <dir>     also measure another azd project (e.g. an older checkout, built), timing the two alternately
  --record <file.md>  also write the report as markdown, with the command that produced it
  --json              print the report as JSON
  --build-only        write the folder only (what npm run build does)`;

/** azure.yaml's `dist`: the folder azd zips after `npm run build`. */
export const PACKAGE_DIR = 'dist';
export const PACKAGE_MAIN = 'app.js';
const AZURE_MONITOR = 'azureMonitor.js';
/** Modules src/app.ts requires lazily (`./<name>`): each is a file of its own in the package, kept external to app.js. */
const DEFERRED_MODULES = ['azureMonitor', 'serviceBusPublisher'] as const;

export interface PackageReport {
  /** The package folder and the zip of it, relative to the repository. */
  directory: string;
  zip: string;
  files: string[];
  bytes: number;
  zippedBytes: number;
  /** Milliseconds to require `main` in a fresh Node.js process, through the worker's path. */
  loadMs: { median: number; samples: number[] };
  /** Median milliseconds to require azureMonitor.js afterwards (after registration, before the first invocation). */
  deferredMs: number;
  functions: string[];
  /** With --compare: the other app's load time, timed alternately in the same run, and ours over it. */
  compare?: {
    directory: string;
    /** What azd would zip from that project (its azure.yaml's service, dist and .funcignore). */
    files: number;
    bytes: number;
    zippedBytes: number;
    loadMs: { median: number; samples: number[] };
    /** Our median load time over theirs. */
    ratio: number;
    /** The compared checkout's commit, when it is a git work tree. */
    commit?: string;
  };
}

/**
 * Deletes `out` and writes the package into it; returns the files written. `sources`, when given,
 * receives the absolute path of every project file bundled (not packages): what a change to
 * changes the package (npm start's watch mode watches their folders).
 */
export async function buildPackage(
  out: string,
  root = PROJECT_ROOT,
  sources?: Set<string>,
): Promise<string[]> {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const functionFiles = readdirSync(join(root, 'functions'))
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .sort();
  if (functionFiles.length === 0) throw new UsageError(`No function files in ${join(root, 'functions')}.`);
  const common: BuildOptions = {
    bundle: true,
    platform: 'node',
    target: 'node22',
    format: 'cjs',
    logLevel: 'warning',
    // Paths in the bundle (and the sources reported) relative to the project, wherever it runs from.
    absWorkingDir: root,
    // What each output file bundles, kept beside the package (metafileOf): the package test reads it.
    metafile: true,
    // What a production install would not have stays out too: some runtime packages probe for an
    // optional one (debug for supports-color) that only a development dependency brought in.
    external: ['@azure/functions-core', ...developmentOnlyPackages(root)],
  };
  const outputs: Record<string, { inputs: Record<string, unknown> }> = {};
  const noted = (result: { metafile?: Metafile }): void => {
    Object.assign(outputs, result.metafile?.outputs);
    for (const input of Object.keys(result.metafile?.inputs ?? {})) {
      if (!input.startsWith('<') && !input.split('/').includes('node_modules'))
        sources?.add(join(root, input));
    }
  };
  noted(
    await build({
      ...common,
      stdin: {
        contents: functionFiles.map((file) => `require('./functions/${file}');`).join('\n'),
        resolveDir: root,
        sourcefile: 'functions.js',
        loader: 'js',
      },
      outfile: join(out, PACKAGE_MAIN),
      plugins: [deferModules],
    }),
  );
  for (const name of DEFERRED_MODULES) {
    noted(
      await build({
        ...common,
        entryPoints: [join(root, 'src', `${name}.ts`)],
        outfile: join(out, `${name}.js`),
      }),
    );
  }
  mkdirSync(dirname(metafileOf(out)), { recursive: true });
  writeFileSync(metafileOf(out), `${JSON.stringify({ outputs }, null, 1)}\n`);
  writeFileSync(join(out, 'host.json'), readFileSync(join(root, 'host.json')));
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, unknown>;
  const deployed = {
    name: manifest.name,
    version: manifest.version,
    description: manifest.description,
    license: manifest.license,
    private: true,
    type: 'commonjs',
    main: PACKAGE_MAIN,
    engines: manifest.engines,
  };
  writeFileSync(join(out, 'package.json'), `${JSON.stringify(deployed, null, 2)}\n`);
  return listFiles(out);
}

/**
 * Where buildPackage leaves esbuild's metafile of a package built into `out` (outside it: it is
 * not deployed): for each output file, the modules it bundles, as paths from the project's root.
 */
export const metafileOf = (out: string): string =>
  join(dirname(out), '.cache', `${basename(out)}.metafile.json`);

interface LockEntry {
  link?: boolean;
  resolved?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/**
 * The installed packages a production install of the app would not have: package-lock.json's
 * top-level packages outside what package.json's `dependencies` need, followed through each
 * package's own dependencies as Node.js finds them (nested node_modules first) and through the
 * workspace packages' links. (npm's `dev: true` no longer says it: a workspace package's
 * dependencies are never marked dev, even when only a devDependency of the app needs them.)
 */
export function developmentOnlyPackages(root = PROJECT_ROOT): string[] {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const locate = (from: string, name: string): string | undefined => {
    for (
      let at = from;
      ;
      at = at.includes('/node_modules/') ? at.slice(0, at.lastIndexOf('/node_modules/')) : ''
    ) {
      const candidate = `${at === '' ? '' : `${at}/`}node_modules/${name}`;
      if (lock.packages[candidate] !== undefined) return candidate;
      if (at === '') return undefined;
    }
  };
  const needed = new Set<string>();
  const queue: [string, string][] = Object.keys(lock.packages['']?.dependencies ?? {}).map((name) => [
    '',
    name,
  ]);
  for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
    const found = locate(...next);
    if (found === undefined || needed.has(found)) continue;
    needed.add(found);
    const linked = lock.packages[found]!.link === true ? lock.packages[found]!.resolved : undefined;
    const at = linked ?? found;
    const entry = lock.packages[at] ?? {};
    for (const name of Object.keys({
      ...entry.dependencies,
      ...entry.optionalDependencies,
      ...entry.peerDependencies,
    }))
      queue.push([at, name]);
  }
  return Object.keys(lock.packages)
    .filter((path) => /^node_modules\/(?:@[^/]+\/)?[^/]+$/.test(path) && !needed.has(path))
    .map((path) => path.slice('node_modules/'.length));
}

/** src/app.ts requires DEFERRED_MODULES lazily; in the package each is its separate file, kept external. */
const deferModules: Plugin = {
  name: 'defer-modules',
  setup(plugin) {
    plugin.onResolve({ filter: new RegExp(`^\\./(?:${DEFERRED_MODULES.join('|')})$`) }, (args) => ({
      path: `${args.path}.js`,
      external: true,
    }));
  },
};

/** Zips these files of a folder (all of them by default) with deflate level 6, as azd's Go zip does. */
export function zipFiles(directory: string, files = listFiles(directory)): Uint8Array {
  return zipSync(
    Object.fromEntries(files.map((file) => [file, new Uint8Array(readFileSync(join(directory, file)))])),
    { level: 6 },
  );
}

function commitOf(directory: string): { commit?: string } {
  try {
    const commit = execFileSync('git', ['-C', directory, 'rev-parse', '--short', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return commit ? { commit } : {};
  } catch {
    return {};
  }
}

/** What azd would deploy from another project: its service's dist folder, filtered by azd's rules. */
function deployedBy(project: string): {
  folder: string;
  files: string[];
  bytes: number;
  zippedBytes: number;
} {
  const service = Object.values(readAzureYaml(project).services).find(
    (candidate) => candidate.host === 'function',
  );
  if (!service) throw new UsageError(`${project}/azure.yaml has no service with host: function.\n${USAGE}`);
  const folder = join(project, service.project, service.dist ?? '');
  const files = azdZipEntries(folder, service);
  const bytes = files.reduce((sum, file) => sum + statSync(join(folder, file)).size, 0);
  return { folder, files, bytes, zippedBytes: zipFiles(folder, files).byteLength };
}

let driverBuilt: Promise<unknown> | undefined;

/**
 * Boots the package in fresh processes the way the Node.js worker does (packages/devkit/src/build/loadPackage.ts, bundled
 * so that plain `node` runs it without tsx's hooks in the timing) and returns each one's report.
 */
export async function bootPackage(
  directory: string,
  options: { samples?: number; plan?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<LoadReport[]> {
  const driver = join(PROJECT_ROOT, '.cache', 'package', 'loadPackage.js');
  driverBuilt ??= build({
    entryPoints: [join(__dirname, 'loadPackage.ts')],
    bundle: true,
    platform: 'node',
    target: 'node22',
    format: 'cjs',
    logLevel: 'warning',
    outfile: driver,
  });
  await driverBuilt;
  const reports: LoadReport[] = [];
  for (let i = 0; i < (options.samples ?? 1); i++) {
    const { stdout } = await run(
      process.execPath,
      [driver, directory, ...(options.plan ? [options.plan] : [])],
      {
        env: options.env ?? { ...process.env, ...PLACEHOLDER_SETTINGS },
      },
    );
    reports.push(JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as LoadReport);
  }
  return reports;
}

/** Settings the app validates at start-up; the load test never connects anywhere. */
const PLACEHOLDER_SETTINGS = {
  COSMOS_ENDPOINT: 'https://localhost:8081/',
  APPLICATIONINSIGHTS_CONNECTION_STRING: '',
};

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? 0)
    : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values } = parseFlags(
    argv,
    {
      options: {
        out: { type: 'string', default: PACKAGE_DIR },
        zip: { type: 'string', default: join('.cache', 'package', 'consumers.zip') },
        samples: { type: 'string', default: '5' },
        json: { type: 'boolean', default: false },
        compare: { type: 'string' },
        record: { type: 'string' },
        'build-only': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    },
    USAGE,
    context.env,
  );
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  const samples = Number(values.samples);
  if (!Number.isInteger(samples) || samples < 1 || samples > 50) {
    throw new UsageError(
      `--samples must be a whole number from 1 to 50; got '${values.samples.slice(0, 20)}'.\n${USAGE}`,
    );
  }
  const compared = values.compare === undefined ? undefined : resolve(values.compare);
  if (compared !== undefined && !existsSync(join(compared, 'azure.yaml'))) {
    throw new UsageError(
      `--compare needs an azd project folder (with azure.yaml), built; got '${values.compare?.slice(0, 200)}'.\n${USAGE}`,
    );
  }
  const record = values.record === undefined ? undefined : resolve(values.record);
  if (record !== undefined && !existsSync(dirname(record))) {
    throw new UsageError(`--record: the folder ${dirname(record)} does not exist.\n${USAGE}`);
  }
  const out = resolve(values.out);
  const files = await buildPackage(out);
  const bytes = files.reduce((sum, file) => sum + statSync(join(out, file)).size, 0);
  if (values['build-only']) {
    context.out(
      `Package: ${relative(process.cwd(), out) || '.'} (${files.length} files, ${formatBytes(bytes)})`,
    );
    return EXIT_CODES.ok;
  }
  const zipFile = resolve(values.zip);
  const zipped = zipFiles(out);
  mkdirSync(dirname(zipFile), { recursive: true });
  writeFileSync(zipFile, zipped);
  const zippedBytes = zipped.byteLength;
  const other = compared === undefined ? undefined : deployedBy(compared);
  if (!values.json) context.out(`Timing ${samples} loads of the package in fresh processes...`);
  const boots: LoadReport[] = [];
  const comparedBoots: LoadReport[] = [];
  for (let i = 0; i < samples; i++) {
    boots.push(...(await bootPackage(out)));
    if (other !== undefined) comparedBoots.push(...(await bootPackage(other.folder)));
  }
  const load = {
    samples: boots.map((boot) => boot.loadMs),
    functions: boots[0]?.functions.map((f) => f.name) ?? [],
  };
  const report: PackageReport = {
    directory: relative(process.cwd(), out) || '.',
    zip: relative(process.cwd(), zipFile),
    files,
    bytes,
    zippedBytes,
    loadMs: { median: median(load.samples), samples: load.samples },
    deferredMs: median(boots.map((boot) => boot.deferredMs)),
    functions: load.functions,
  };
  if (compared !== undefined && other !== undefined) {
    const comparedMs = comparedBoots.map((boot) => boot.loadMs);
    report.compare = {
      directory: relative(process.cwd(), compared) || '.',
      files: other.files.length,
      bytes: other.bytes,
      zippedBytes: other.zippedBytes,
      loadMs: { median: median(comparedMs), samples: comparedMs },
      ratio: report.loadMs.median / median(comparedMs),
      ...commitOf(compared),
    };
  }
  if (record !== undefined) {
    const markdown = markdownReport(report, ['npm run package --', ...argv].join(' '));
    await writeFormatted(record, markdown);
  }
  if (values.json) {
    context.out(JSON.stringify(report, null, 2));
    return EXIT_CODES.ok;
  }
  const ms = (values: readonly number[]): string => values.map((value) => value.toFixed(0)).join(', ');
  context.out(
    [
      `Package:   ${report.directory}/ (what azd deploys: azure.yaml dist)`,
      `Zip:       ${report.zip}`,
      `Size:      ${formatBytes(bytes)} unzipped, ${formatBytes(zippedBytes)} zipped`,
      `Files:     ${files.length} (${files.join(', ')})`,
      `Functions: ${report.functions.join(', ')}`,
      `Load:      ${report.loadMs.median.toFixed(0)} ms median to load ${PACKAGE_MAIN} and register the functions (${samples} fresh processes: ${ms(report.loadMs.samples)} ms)`,
      `Deferred:  ${report.deferredMs.toFixed(0)} ms median to load ${AZURE_MONITOR} afterwards, only when APPLICATIONINSIGHTS_CONNECTION_STRING is set`,
      ...(report.compare === undefined
        ? []
        : [
            `Compared:  ${report.compare.directory}: azd would deploy ${report.compare.files} files, ${formatBytes(report.compare.bytes)} (${formatBytes(report.compare.zippedBytes)} zipped); it loads in ${report.compare.loadMs.median.toFixed(0)} ms median (${ms(report.compare.loadMs.samples)} ms); this package takes ${report.compare.ratio.toFixed(2)}x that`,
          ]),
      ...(record === undefined ? [] : [`Recorded:  ${relative(process.cwd(), record)}`]),
    ].join('\n'),
  );
  return EXIT_CODES.ok;
}

/** The report as a markdown page. */
function markdownReport(report: PackageReport, command: string): string {
  const row = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  const samples = (values: readonly number[]): string => values.map((value) => value.toFixed(0)).join(', ');
  const lines = [
    '# Cold start: the deployment package',
    '',
    [
      `Generated by \`${command}\` on ${process.platform} ${process.arch}, Node.js ${process.version},`,
      `${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? 'unknown'}).`,
      "Load is the time a fresh Node.js process takes to load the package's `main` and register the",
      "functions through the worker's path (`packages/devkit/src/build/loadPackage.ts`); the apps were timed alternately in",
      'the same run. Medians; this machine is shared and noisy, so compare within a run, not across runs.',
    ].join(' '),
    '',
    row(['', 'files', 'unzipped', 'zipped', 'load (median ms)', 'load samples (ms)']),
    row(['---', '---:', '---:', '---:', '---:', '---']),
    row([
      `this package (\`${report.directory}\`)`,
      String(report.files.length),
      formatBytes(report.bytes),
      formatBytes(report.zippedBytes),
      report.loadMs.median.toFixed(0),
      samples(report.loadMs.samples),
    ]),
  ];
  if (report.compare !== undefined) {
    lines.push(
      row([
        `compared (\`${report.compare.directory}\`${report.compare.commit === undefined ? '' : ` at ${report.compare.commit}`})`,
        String(report.compare.files),
        formatBytes(report.compare.bytes),
        formatBytes(report.compare.zippedBytes),
        report.compare.loadMs.median.toFixed(0),
        samples(report.compare.loadMs.samples),
      ]),
      '',
      `This package loads in ${report.compare.ratio.toFixed(2)}x the compared app's time.`,
    );
  }
  lines.push(
    '',
    `Loading \`${AZURE_MONITOR}\` afterwards (only with an Application Insights connection string, after`,
    `registration) took ${report.deferredMs.toFixed(0)} ms more (median).`,
    '',
  );
  return lines.join('\n');
}

export function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(2)} MB` : `${(bytes / 1024).toFixed(1)} KB`;
}

export const command: Command = { name: 'package', main };

if (require.main === module) runCommand(command);
