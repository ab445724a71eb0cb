import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ParseArgsConfig } from 'node:util';

import { functionNameOf, topicsPublishedBy, type Topology } from '@idempotent-consumers/inbox/internal';
import { parseDocument } from 'yaml';

import { formatted } from '../cli/formatted';
import { appTopology, PROJECT_ROOT, writeTopology } from '../cli/project';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  runCommand,
  type ToolContext,
} from '../cli/tool';
import { writeEmulatorConfig } from '../emulators/generateConfig';
import { markdownFiles, withoutSamplePassages } from './sampleDocs';
import { SAMPLE } from './samples';

const topology = appTopology();

const USAGE = `Usage:
  npm run remove:samples [-- --dry-run]
Removes the sample business (invoices, payments, stock) from the project, keeping the library
(packages/inbox/src), the local Cosmos DB server, the Service Bus and host models, the infra and the generic
tools. What it removes is listed in packages/devkit/src/tools/samples.ts and in packages/devkit/src/tools/README.md; the docs lose the
passages marked <!-- sample --> ... <!-- /sample -->.
Options:
  --dry-run   list what would be removed, and remove nothing`;

const FLAGS = {
  allowPositionals: false,
  strict: true,
  options: { 'dry-run': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
} satisfies ParseArgsConfig;

/** Every path of the sample that is still in the project, relative to it. */
export function samplePaths(): string[] {
  const consumerFiles = SAMPLE.consumers.flatMap((name) => [
    `functions/${functionNameOf(name)}.ts`,
    `test/functions/${functionNameOf(name)}.test.ts`,
  ]);
  return [...consumerFiles, ...SAMPLE.files].filter((file) => existsSync(path.join(PROJECT_ROOT, file)));
}

/**
 * The declaration without the sample's subscriptions and publishers (the stock reserver publishes
 * on business-events), and without a topic that has neither left.
 */
export function withoutSamples(declared: Topology): Topology {
  const sample = new Set(SAMPLE.consumers);
  return {
    topics: declared.topics
      .map(({ publishers, ...topic }) => {
        const kept = publishers?.filter((name) => !sample.has(name)) ?? [];
        return {
          ...topic,
          ...(kept.length > 0 ? { publishers: kept } : {}),
          subscriptions: topic.subscriptions.filter((s) => !sample.has(s.name)),
        };
      })
      .filter((topic) => topic.subscriptions.length > 0 || topic.publishers !== undefined),
  };
}

/** Each markdown file that stays, its text and its text without the sample passages. */
function sampleDocs(removed: readonly string[]) {
  return markdownFiles()
    .filter((file) => !removed.some((gone) => file === gone || file.startsWith(`${gone}/`)))
    .map((file) => {
      const original = readFileSync(path.join(PROJECT_ROOT, file), 'utf8');
      return { file, original, ...withoutSamplePassages(original) };
    });
}

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  const paths = samplePaths();
  const declared = withoutSamples(topology);
  const subscriptions = SAMPLE.consumers.filter((name) =>
    topology.topics.some((topic) => topic.subscriptions.some((s) => s.name === name)),
  );
  const publishers = SAMPLE.consumers.flatMap((name) =>
    topicsPublishedBy(name, topology).map((topic) => ({ name, topic })),
  );
  const packageFile = path.join(PROJECT_ROOT, 'package.json');
  const manifest = JSON.parse(readFileSync(packageFile, 'utf8')) as { scripts: Record<string, string> };
  const scripts = SAMPLE.scripts.filter((name) => name in manifest.scripts);
  const workflowFile = path.join(PROJECT_ROOT, SAMPLE.ciJob.file);
  const workflow = existsSync(workflowFile) ? parseDocument(readFileSync(workflowFile, 'utf8')) : undefined;
  const ciJob = workflow?.hasIn(['jobs', SAMPLE.ciJob.job]) === true;
  const docs = sampleDocs(paths);
  const malformed = docs.flatMap(({ file, problems }) => problems.map((problem) => `${file}: ${problem}`));
  if (malformed.length > 0) {
    context.err('The sample markers of the docs are malformed; nothing was removed:');
    for (const problem of malformed) context.err(`  ${problem}`);
    return EXIT_CODES.failed;
  }
  const passages = docs.filter((doc) => doc.text !== doc.original);
  if (
    paths.length === 0 &&
    subscriptions.length === 0 &&
    publishers.length === 0 &&
    scripts.length === 0 &&
    !ciJob &&
    passages.length === 0
  ) {
    context.out('The sample is not in this project: nothing to remove.');
    return EXIT_CODES.ok;
  }
  const verb = values['dry-run'] ? 'Would remove' : 'Removed';
  context.out(`${verb}:`);
  for (const file of paths) context.out(`  ${file}`);
  for (const name of subscriptions) context.out(`  the subscription ${name} from src/topology.json`);
  for (const { name, topic } of publishers)
    context.out(`  ${name} from the publishers of ${topic} in src/topology.json`);
  for (const name of scripts) context.out(`  the script ${name} from package.json`);
  if (ciJob) context.out(`  the job ${SAMPLE.ciJob.job} from ${SAMPLE.ciJob.file}`);
  for (const { file } of passages) context.out(`  the sample passages of ${file}`);
  if (values['dry-run']) return EXIT_CODES.ok;

  for (const file of paths) rmSync(path.join(PROJECT_ROOT, file), { recursive: true, force: true });
  await writeTopology(declared);
  for (const name of scripts) delete manifest.scripts[name];
  writeFileSync(packageFile, await formatted(packageFile, JSON.stringify(manifest, null, 2)));
  if (workflow && ciJob) {
    workflow.deleteIn(['jobs', SAMPLE.ciJob.job]);
    writeFileSync(workflowFile, await formatted(workflowFile, workflow.toString()));
  }
  for (const { file, text } of passages) {
    const absolute = path.join(PROJECT_ROOT, file);
    writeFileSync(absolute, await formatted(absolute, text));
  }
  // The emulators' file follows the topology; its restart advice is only for those who use them.
  const [emulatorLine] = writeEmulatorConfig(declared);
  context.out(`  ${emulatorLine ?? ''} (only for the Docker emulators, if you use them)`);

  context.out('Next:');
  context.out('  npm run new:consumer -- --name <area.consumer> --topic <topic> --subject <Subject>');
  context.out('  npm test');
  context.out(
    "  a live test of your own against Azure, with a CI job to run it: the sample's (sample/liveTests.ts and the live-tests job) is in git history",
  );
  return EXIT_CODES.ok;
}

export const command: Command = { name: 'remove:samples', main };

if (require.main === module) runCommand(command);
