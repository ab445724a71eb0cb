// Runs the Bicep CLI for the infra tests: finds it, builds and lints the template, and evaluates it
// offline with `bicep snapshot`, which runs the Azure Resource Manager template engine in process and
// returns the resources a deployment would create, with every deploy-time expression evaluated.
// Values known only once resources exist (principal ids, endpoints) stay as ARM expressions.

import { execFile, spawn, spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import {
  cpSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

import { PROJECT_ROOT } from '../cli/project';

const run = promisify(execFile);

export const infraDir = path.join(PROJECT_ROOT, 'infra');
export const mainBicep = path.join(infraDir, 'main.bicep');
const findBicepScript = path.join(infraDir, 'find-bicep.sh');

/** Identities of the fake deployment scope the snapshots are evaluated in. */
export const fakeScope = {
  subscriptionId: '00000000-0000-0000-0000-00000000a11c',
  tenantId: '00000000-0000-0000-0000-0000000077e7',
} as const;

export type BicepLocation = { found: true; path: string } | { found: false; reason: string };

/**
 * BICEP_PATH when set (CI exports it; the jest globalSetup test/support/bicepSetup.ts sets it once per
 * run), BICEP_UNAVAILABLE when that setup found none, otherwise whatever infra/find-bicep.sh finds
 * or restores.
 */
export function locateBicep(): BicepLocation {
  const configured = process.env['BICEP_PATH'];
  if (configured) {
    return { found: true, path: configured };
  }
  const unavailable = process.env['BICEP_UNAVAILABLE'];
  if (unavailable) {
    return { found: false, reason: unavailable };
  }
  const script = spawnSync('bash', [findBicepScript], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
    timeout: 300_000,
  });
  return located(script.status, script.stdout, script.stderr, script.error);
}

/**
 * infra/find-bicep.sh with its progress shown on stderr line by line as it comes (a first restore
 * from NuGet takes about a minute), but for its closing line, the path or the reason it failed,
 * which the caller reports.
 */
export async function locateBicepShowingProgress(): Promise<BicepLocation> {
  const script = spawn('bash', [findBicepScript], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  script.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  script.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    const shown = stderr.length - (stderr.split('\n').pop() ?? '').length;
    stderr += chunk;
    const complete = stderr.slice(shown, stderr.lastIndexOf('\n') + 1);
    process.stderr.write(complete.replace(/^find-bicep: (using|no Bicep CLI found).*\n/gm, ''));
  });
  const [status] = (await once(script, 'close')) as [number | null];
  return located(status, stdout, stderr);
}

function located(status: number | null, stdout: string, stderr: string, error?: Error): BicepLocation {
  const bicep = stdout.trim();
  if (status === 0 && bicep) {
    return { found: true, path: bicep };
  }
  const lastLine = stderr
    .trim()
    .split('\n')
    .pop()
    ?.replace(/^find-bicep: /, '');
  return { found: false, reason: lastLine || error?.message || `find-bicep.sh exited with ${status}` };
}

/** The Bicep version the infra checks are pinned to (BICEP_VERSION of infra/find-bicep.sh). */
export const pinnedBicepVersion = /BICEP_VERSION="\$\{BICEP_VERSION:-([0-9.]+)\}"/.exec(
  readFileSync(findBicepScript, 'utf8'),
)?.[1];

/** The one line a run without a Bicep CLI prints: why, and what to install. */
export function skippedInfraTests(reason: string): string {
  return (
    `test/infra SKIPPED (every Bicep build, lint and snapshot test): ${reason}. Install the .NET SDK ` +
    '(`dotnet`: the first run then restores the pinned Bicep CLI from NuGet, about a minute, once), ' +
    `or Bicep ${pinnedBicepVersion} (\`az bicep install --version v${pinnedBicepVersion}\`), or set BICEP_PATH.`
  );
}

export interface CliResult {
  exitCode: number;
  output: string;
}

async function runCli(bicep: string, args: string[], cwd = PROJECT_ROOT): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(bicep, args, { cwd, maxBuffer: 64 * 1024 * 1024 });
    return { exitCode: 0, output: `${stdout}${stderr}` };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return {
      exitCode: typeof failed.code === 'number' ? failed.code : 1,
      output: `${failed.stdout ?? ''}${failed.stderr ?? ''}`,
    };
  }
}

export interface ArmTemplate {
  $schema: string;
  parameters: Record<string, ArmParameter>;
  outputs: Record<string, { type: string; value: unknown }>;
  [key: string]: unknown;
}

export interface ArmParameter {
  type: string;
  defaultValue?: unknown;
  allowedValues?: unknown[];
  minValue?: number;
  maxValue?: number;
  metadata?: Record<string, unknown>;
}

export interface Build {
  template: ArmTemplate;
  text: string;
  diagnostics: string;
}

/** `bicep build --stdout`: the ARM JSON, and whatever the build printed besides it. */
export async function build(bicep: string, file = mainBicep): Promise<Build> {
  return sharedInRun(bicep, file, ['build', file], async () => {
    const { stdout, stderr } = await run(bicep, ['build', file, '--stdout'], {
      cwd: PROJECT_ROOT,
      maxBuffer: 64 * 1024 * 1024,
    });
    return { template: JSON.parse(stdout) as ArmTemplate, text: stdout, diagnostics: stderr.trim() };
  });
}

/**
 * A build or snapshot of this project's infra/ computed once per jest run and shared by every suite
 * that asks for the same one (the test/infra suites all evaluate the defaults, for one): the
 * run's globalSetup names a folder (BICEP_RUN_RESULTS), and a result is filed there under a digest
 * of the CLI, every file the template reads (infra/ and src/topology.json) and the arguments. A
 * template elsewhere (a copy of the project) is never shared. Failures are not kept.
 */
async function sharedInRun<T>(
  bicep: string,
  templateFile: string,
  args: unknown,
  compute: () => Promise<T>,
  keep: (result: T) => boolean = () => true,
): Promise<T> {
  const folder = process.env['BICEP_RUN_RESULTS'];
  if (!folder || path.relative(infraDir, templateFile).startsWith('..')) return compute();
  const key = createHash('sha256')
    .update(bicep)
    .update(inputsDigest())
    .update(JSON.stringify(args))
    .digest('hex');
  const file = path.join(folder, `${key}.json`);
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    // Not computed yet in this run (or by a suite running at the same time: then both compute it).
  }
  const result = await compute();
  if (keep(result)) {
    // Written whole, then renamed: a suite reading at the same time sees all of it or nothing.
    const partial = `${file}.${randomUUID()}`;
    mkdirSync(folder, { recursive: true });
    writeFileSync(partial, JSON.stringify(result));
    renameSync(partial, file);
  }
  return result;
}

let inputs: string | undefined;
/** A digest of every file the template reads: infra/ and src/topology.json (loadJsonContent). */
function inputsDigest(): string {
  if (inputs !== undefined) return inputs;
  const digest = createHash('sha256');
  const files = readdirSync(infraDir, { recursive: true, encoding: 'utf8' })
    .map((file) => path.join(infraDir, file))
    .filter((file) => statSync(file).isFile())
    .sort();
  for (const file of [...files, path.join(PROJECT_ROOT, 'src', 'topology.json')]) {
    digest.update(path.relative(PROJECT_ROOT, file)).update(readFileSync(file));
  }
  inputs = digest.digest('hex');
  return inputs;
}

/** `bicep lint` over every .bicep file of infra/ (main and modules). */
export async function lint(bicep: string): Promise<CliResult> {
  return runCli(bicep, ['lint', '--pattern', 'infra/**/*.bicep']);
}

/** The .bicep files of infra/ that `bicep format` would change (it is run on a copy). */
export async function unformattedFiles(bicep: string): Promise<string[]> {
  const copy = path.join(PROJECT_ROOT, '.cache', 'bicep', 'format', randomUUID());
  try {
    cpSync(infraDir, path.join(copy, 'infra'), { recursive: true });
    const result = await runCli(bicep, ['format', '--pattern', 'infra/**/*.bicep'], copy);
    if (result.exitCode !== 0) {
      return [`bicep format failed: ${result.output.trim()}`];
    }
    const files = readdirSync(infraDir, { recursive: true, encoding: 'utf8' }).filter((file) =>
      file.endsWith('.bicep'),
    );
    return files.filter(
      (file) =>
        readFileSync(path.join(infraDir, file), 'utf8') !==
        readFileSync(path.join(copy, 'infra', file), 'utf8'),
    );
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

export interface PredictedResource {
  id: string;
  type: string;
  name: string;
  apiVersion: string;
  location?: string;
  kind?: string;
  sku?: Record<string, unknown>;
  tags?: Record<string, string>;
  identity?: Record<string, unknown>;
  properties?: Record<string, unknown>;
}

export interface Snapshot {
  predictedResources: PredictedResource[];
  diagnostics: unknown[];
  outputs: Record<string, unknown>;
}

export type SnapshotResult = { ok: true; snapshot: Snapshot } | { ok: false; message: string };

export interface SnapshotOptions {
  /** The template to evaluate; infra/main.bicep by default. */
  templateFile?: string;
  /** Resource group to deploy into, for a template (a module) at resource-group scope. */
  resourceGroup?: string;
  location?: string;
}

/**
 * Evaluates a template with these parameters (the rest take their defaults) in a fake subscription,
 * the way Azure Resource Manager would before creating anything.
 */
export async function snapshot(
  bicep: string,
  parameters: Record<string, unknown>,
  options: SnapshotOptions = {},
): Promise<SnapshotResult> {
  return sharedInRun(
    bicep,
    options.templateFile ?? mainBicep,
    ['snapshot', parameters, options],
    () => evaluate(bicep, parameters, options),
    (result) => result.ok,
  );
}

async function evaluate(
  bicep: string,
  parameters: Record<string, unknown>,
  { templateFile = mainBicep, resourceGroup, location = 'westeurope' }: SnapshotOptions,
): Promise<SnapshotResult> {
  const workDir = path.join(PROJECT_ROOT, '.cache', 'bicep', 'snapshots', randomUUID());
  mkdirSync(workDir, { recursive: true });
  try {
    const paramFile = path.join(workDir, 'main.bicepparam');
    const using = path.relative(workDir, templateFile).split(path.sep).join('/');
    const lines = [`using '${using}'`, ''];
    for (const [name, value] of Object.entries(parameters)) {
      lines.push(`param ${name} = ${toBicepLiteral(value, '')}`);
    }
    writeFileSync(paramFile, `${lines.join('\n')}\n`);
    const result = await runCli(
      bicep,
      [
        'snapshot',
        paramFile,
        '--mode',
        'overwrite',
        '--subscription-id',
        fakeScope.subscriptionId,
        '--tenant-id',
        fakeScope.tenantId,
        '--location',
        location,
        ...(resourceGroup ? ['--resource-group', resourceGroup] : []),
      ],
      workDir,
    );
    if (result.exitCode !== 0) {
      return { ok: false, message: result.output.trim() };
    }
    const text = readFileSync(path.join(workDir, 'main.snapshot.json'), 'utf8');
    return { ok: true, snapshot: JSON.parse(text) as Snapshot };
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

function toBicepLiteral(value: unknown, indent: string): string {
  if (typeof value === 'string') {
    return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\$\{/g, '\\${')}'`;
  }
  if (typeof value === 'number' || typeof value === 'boolean') {
    return String(value);
  }
  if (value === null) {
    return 'null';
  }
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    const items = value.map((item) => `${inner}${toBicepLiteral(item, inner)}`);
    return `[\n${items.join('\n')}\n${indent}]`;
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value).map(
      ([key, item]) => `${inner}'${key}': ${toBicepLiteral(item, inner)}`,
    );
    return `{\n${entries.join('\n')}\n${indent}}`;
  }
  throw new Error(`cannot write ${typeof value} as a Bicep value`);
}

/**
 * The parameters azd passes for infra/main.parameters.json: `${VAR}` and `${VAR=default}` are
 * resolved from `environment`, and a parameter that resolves to an empty string is left out so the
 * template default applies (what azd does for parameters that have a default). Strings are
 * converted to the template's int and bool parameter types.
 */
export function azdParameters(
  template: ArmTemplate,
  environment: Record<string, string>,
): Record<string, unknown> {
  const file = JSON.parse(readFileSync(path.join(infraDir, 'main.parameters.json'), 'utf8')) as {
    parameters: Record<string, { value: unknown }>;
  };
  const resolved: Record<string, unknown> = {};
  for (const [name, { value }] of Object.entries(file.parameters)) {
    if (typeof value !== 'string') {
      resolved[name] = value;
      continue;
    }
    const text = value.replace(
      /\$\{([A-Za-z_][A-Za-z0-9_]*)(?:=([^}]*))?\}/g,
      (_match, variable: string, fallback: string | undefined) => environment[variable] || fallback || '',
    );
    if (text === '') {
      continue;
    }
    const type = template.parameters[name]?.type.toLowerCase();
    resolved[name] = type === 'int' ? Number(text) : type === 'bool' ? text === 'true' : text;
  }
  return resolved;
}

/** ARM's guid(): a version 5 UUID of the arguments joined with '-', in ARM's own namespace. */
export function armGuid(...parts: string[]): string {
  const namespace = Buffer.from('11fb06fb712d4ddd98c7e71bbd588830', 'hex');
  const hash = createHash('sha1').update(namespace).update(parts.join('-'), 'utf8').digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x50;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join('-');
}

/** The scope a role assignment is created at, from its predicted id. */
export function roleAssignmentScope(assignment: PredictedResource): string {
  const extension = "[extensionResourceId('";
  if (assignment.id.startsWith(extension)) {
    return assignment.id.slice(extension.length, assignment.id.indexOf("'", extension.length));
  }
  return assignment.id.slice(0, assignment.id.indexOf('/providers/Microsoft.Authorization/roleAssignments/'));
}

/** Reads a dotted path (`properties.functionAppConfig.runtime`) out of a JSON value. */
export function at(value: unknown, dottedPath: string): unknown {
  let current = value;
  for (const key of dottedPath.split('.')) {
    if (current === null || typeof current !== 'object') {
      return undefined;
    }
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

// ---------------------------------------------------------------------------------------------
// Shared by the infra test files: the deployment they evaluate, the roles they look for, and a
// harness that builds and evaluates the template once per file.
// ---------------------------------------------------------------------------------------------

export const environmentName = 'ci-env';
export const deploymentLocation = 'westeurope';
/** What azd puts in the environment of a fresh `azd env new` + `azd env set AZURE_LOCATION`. */
export const azdEnvironment = { AZURE_ENV_NAME: environmentName, AZURE_LOCATION: deploymentLocation };
/** A developer's object id, as azd passes the signed-in principal to principalId. */
export const developerId = '5d2c1b0e-1111-4222-8333-944455556666';

/** Built-in role definition ids, as infra/modules/roles.bicep names them. */
export const role = {
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0',
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39',
  serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419',
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
  storageBlobDataReader: '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1',
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb',
  reader: 'acdd72a7-3385-48ef-bd42-f606fba81ae7',
  cosmosBuiltInDataContributor: '00000000-0000-0000-0000-000000000002',
} as const;

export function roleDefinitionId(id: string): string {
  return `/subscriptions/${fakeScope.subscriptionId}/providers/Microsoft.Authorization/roleDefinitions/${id}`;
}

export function resources(from: Snapshot, type: string): PredictedResource[] {
  return from.predictedResources.filter((resource) => resource.type === type);
}

/** The one resource of this type; throws, naming the type, when there is none or several. */
export function only(from: Snapshot, type: string): PredictedResource {
  const found = resources(from, type);
  if (found.length !== 1) {
    throw new Error(`expected exactly one ${type}, found ${found.length}`);
  }
  return found[0] as PredictedResource;
}

export function roleAssignments(from: Snapshot): PredictedResource[] {
  return resources(from, 'Microsoft.Authorization/roleAssignments');
}

/** [scope, role definition id] of each assignment: what a principal may do, and where. */
export function grants(assignments: PredictedResource[]): [string, string][] {
  return assignments.map((assignment) => [
    roleAssignmentScope(assignment),
    String(at(assignment, 'properties.roleDefinitionId')),
  ]);
}

/** Module outputs appear in the snapshot as reference(<module deployment>).outputs.<name>.value. */
export function moduleOutput(module: string, output: string): RegExp {
  return new RegExp(
    `^\\[(string\\()?reference\\(.*'${module}-\\{0\\}'.*\\)\\.outputs\\.${output}\\.value\\)?\\]$`,
  );
}

export interface Variant {
  parameters: Record<string, unknown>;
  options?: SnapshotOptions;
}

export interface Evaluation<V extends string> {
  /** The compiled main.bicep; throws the build's error if it failed. */
  compiled: () => Build;
  /** The snapshot of a variant; throws the CLI's message if the deployment was refused. */
  evaluated: (variant: V) => Snapshot;
  /** Why the deployment of this variant is refused, or undefined when it is accepted. */
  refusal: (variant: V) => string | undefined;
}

/**
 * Registers a beforeAll that builds main.bicep and evaluates each variant (parameters derived from
 * the compiled template) with `bicep snapshot`. Every result is kept as it came, so that a failed
 * build or evaluation fails only the tests that read it, with the CLI's own message.
 */
export function evaluateVariants<V extends string>(
  cli: BicepLocation,
  variants: (template: ArmTemplate) => Record<V, Variant>,
): Evaluation<V> {
  let compiledResult: Build | Error = new Error('infra/main.bicep was not built');
  let evaluations: Partial<Record<V, SnapshotResult>> = {};

  beforeAll(async () => {
    if (!cli.found) {
      return;
    }
    compiledResult = await build(cli.path).catch((error: unknown) =>
      error instanceof Error ? error : new Error(String(error)),
    );
    if (compiledResult instanceof Error) {
      return;
    }
    const results = await Promise.all(
      Object.entries<Variant>(variants(compiledResult.template)).map(
        async ([name, { parameters, options }]) =>
          [name, await snapshot(cli.path, parameters, options)] as const,
      ),
    );
    evaluations = Object.fromEntries(results) as Partial<Record<V, SnapshotResult>>;
  }, 300_000);

  return {
    compiled: () => {
      if (compiledResult instanceof Error) {
        throw compiledResult;
      }
      return compiledResult;
    },
    evaluated: (variant) => {
      const result = evaluations[variant];
      if (!result?.ok) {
        throw new Error(`bicep snapshot of "${variant}" failed: ${result?.message ?? 'not evaluated'}`);
      }
      return result.snapshot;
    },
    refusal: (variant) => {
      const result = evaluations[variant];
      return result?.ok === false ? result.message : undefined;
    },
  };
}

/** describe when a Bicep CLI is found; otherwise skipped, with one warning line saying why. */
export function describeWithBicep(cli: BicepLocation): jest.Describe {
  if (cli.found) {
    return describe;
  }
  // The run's globalSetup has said why, once, when it set BICEP_UNAVAILABLE.
  if (!process.env['BICEP_UNAVAILABLE']) console.warn(skippedInfraTests(cli.reason));
  const { skip } = describe;
  return skip;
}

/** Parameters as azd passes them from main.parameters.json, with these azd environment values set. */
export type AzdParameters = (environment?: Record<string, string>) => Record<string, unknown>;

/**
 * The frame of a test/infra file: a describe, skipped with one line saying why when no Bicep CLI is
 * found, in which main.bicep is built and evaluated before the tests (evaluateVariants) with the
 * parameters azd passes from main.parameters.json (`defaults`) and with each of `variants`.
 * `variants` gets those parameters (with other azd environment values if asked); `tests` gets the
 * evaluation and the CLI.
 */
export function describeInfra<V extends string = never>(
  name: string,
  variants: (azd: AzdParameters, template: ArmTemplate) => Record<V, Variant>,
  tests: (evaluation: Evaluation<V | 'defaults'> & { cli: BicepLocation; defaults: () => Snapshot }) => void,
): void {
  const cli = locateBicep();
  describeWithBicep(cli)(name, () => {
    const evaluation = evaluateVariants<V | 'defaults'>(cli, (template) => {
      const azd: AzdParameters = (environment = {}) =>
        azdParameters(template, { ...azdEnvironment, ...environment });
      return { defaults: { parameters: azd() }, ...variants(azd, template) };
    });
    tests({ ...evaluation, cli, defaults: () => evaluation.evaluated('defaults') });
  });
}

/** The function app's settings, by name. */
export function appSettings(from: Snapshot): Record<string, string> {
  const settings = at(only(from, 'Microsoft.Web/sites'), 'properties.siteConfig.appSettings') as {
    name: string;
    value: string;
  }[];
  return Object.fromEntries(settings.map(({ name, value }) => [name, value]));
}

/** The app's principal id, as the expression that produces it at deployment. */
export const appPrincipal = moduleOutput('identity', 'principalId');

/** The role assignments of the app's identity. */
export function appRoleAssignments(from: Snapshot): PredictedResource[] {
  return roleAssignments(from).filter((assignment) =>
    appPrincipal.test(String(at(assignment, 'properties.principalId'))),
  );
}

export interface Topology {
  topics: {
    name: string;
    /** The consumers that publish to the topic (tx.publish); the app may send to it only when there is one. */
    publishers?: string[];
    subscriptions: {
      name: string;
      consumer: string;
      subjects: string[];
      /** Delayed retry (packages/inbox/src/delayedRetry.ts): its filter takes its own copies, the app sends to the topic. */
      delayedRetry?: {
        attempts: number;
        firstDelaySeconds: number;
        maxDelaySeconds?: number;
        afterDeliveries?: number;
      };
    }[];
  }[];
}

/** src/topology.json as the Bicep reads it. */
export const topology = JSON.parse(
  readFileSync(path.join(PROJECT_ROOT, 'src', 'topology.json'), 'utf8'),
) as Topology;
export const declaredSubscriptions = topology.topics.flatMap((topic) =>
  topic.subscriptions.map((subscription) => ({ topic: topic.name, ...subscription })),
);
/** The topics a consumer publishes to: those whose "publishers" is not empty. */
export const publishedTopics = topology.topics
  .filter((topic) => (topic.publishers ?? []).length > 0)
  .map((topic) => topic.name);
/**
 * The topics the app sends to, each once: those a consumer publishes to, and those where a
 * subscription declares delayedRetry (the app schedules its delayed copies there).
 */
export const sendingTopics = (declared: Topology = topology): string[] =>
  declared.topics
    .filter(
      (topic) =>
        (topic.publishers ?? []).length > 0 ||
        topic.subscriptions.some((subscription) => subscription.delayedRetry !== undefined),
    )
    .map((topic) => topic.name);

/** An action group that exists outside the deployment, as an operator would pass it. */
export const existingActionGroup = `/subscriptions/${fakeScope.subscriptionId}/resourceGroups/ops/providers/Microsoft.Insights/actionGroups/on-call`;

/** Premium Service Bus, provisioned Cosmos DB, Data Owner for scaling and notifications set. */
export const premiumProvisionedVariant = (azd: AzdParameters): Variant => ({
  parameters: {
    ...azd(),
    serviceBusSku: 'Premium',
    cosmosCapacityMode: 'Provisioned',
    cosmosAutoscaleMaxThroughput: 4000,
    serviceBusDataOwnerForScaling: true,
    alertEmail: 'ops@example.com',
    actionGroupId: existingActionGroup,
  },
});
