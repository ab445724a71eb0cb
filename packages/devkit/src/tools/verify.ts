import type { ParseArgsConfig } from 'node:util';

import { bounded } from '../cli/errors';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  numberFlag,
  parseFlags,
  runCommand,
  type ToolContext,
  usageError,
} from '../cli/tool';
import { VerifyEnvironment } from '../verify/run';
import {
  MAX_MESSAGES,
  renewedIfBroken,
  RUNS,
  type Verdict,
  verifyConsumer,
  type VerifyOptions,
} from '../verify/verify';

const MAX_RUNS = 10_000;

const USAGE = `Usage:
  npm run verify [-- <consumer> ...] [--runs ${RUNS}] [--seed <n>] [--path <p>] [--max-messages ${MAX_MESSAGES}] [--volatile <field>]
Proves a consumer's effect happens once: messages made from its schema (and its examples) go through the faults a
delivery meets in Azure (duplicates inside and after the window, crashes before and after the commit,
lost completions, 429 and 503, a response lost after its write, a lock that runs out while the
handler still runs, several deliveries at once), on local Azure in this process; the documents each
run leaves must equal those of the same messages applied once, in the order the run committed them
(a versioned consumer's, in the order of their versions). A difference is shrunk to a small case and
printed with its likely cause and the command that replays it. Every registered consumer by default.
Options:
  --runs <n>          runs per consumer (1 to ${MAX_RUNS}, default ${RUNS})
  --seed <n>          replay: the seed a report printed (default: random, printed)
  --path <p>          replay one case: the path a report printed (with its --seed)
  --max-messages <n>  at most n messages per run (1 to 100, default ${MAX_MESSAGES})
  --volatile <field>  a field of your documents that may differ from run to run on purpose (repeatable)`;

const FLAGS = {
  allowPositionals: true,
  strict: true,
  options: {
    runs: { type: 'string' },
    seed: { type: 'string' },
    path: { type: 'string' },
    'max-messages': { type: 'string' },
    volatile: { type: 'string', multiple: true },
    help: { type: 'boolean', short: 'h' },
  },
} satisfies ParseArgsConfig;

type Flags = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values, positionals } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  const options = optionsOf(values);
  let environment = await VerifyEnvironment.start();
  try {
    const registered = [...environment.consumers().keys()];
    const unknown = positionals.filter((name) => !registered.includes(name));
    if (unknown.length > 0)
      throw usageError(
        `No consumer named ${bounded(unknown.join(', '))}; the app registers ${registered.join(', ') || 'none'}.`,
        USAGE,
      );
    const names = positionals.length > 0 ? positionals : registered;
    if (names.length === 0) {
      context.out('The app registers no consumer: nothing to verify.');
      return EXIT_CODES.ok;
    }
    const verdicts: Verdict[] = [];
    for (const name of names) {
      const verdict = await verifyConsumer(environment, name, options);
      verdicts.push(verdict);
      for (const line of linesOf(verdict)) context.out(line);
      environment = await renewedIfBroken(environment);
    }
    const failed = verdicts.filter((verdict) => !verdict.ok).length;
    const skipped = verdicts.filter((verdict) => verdict.ok && verdict.skipped !== undefined).length;
    context.out(
      `${verdicts.length - failed - skipped} verified, ${failed} failed, ${skipped} not verified (seed ${verdicts[0]?.seed}).`,
    );
    return failed > 0 ? EXIT_CODES.failed : EXIT_CODES.ok;
  } finally {
    await environment.stop();
  }
}

function optionsOf(values: Flags): VerifyOptions {
  const path = values.path;
  if (path !== undefined && !/^\d{1,9}(:\d{1,9}){0,999}$/.test(path))
    throw usageError(
      `--path takes the path a report printed (numbers and colons), not ${bounded(path, 40)}.`,
      USAGE,
    );
  if (path !== undefined && values.seed === undefined)
    throw usageError('--path replays a case of one seed: give the --seed the report printed with it.', USAGE);
  return {
    runs: numberFlag('runs', values.runs ?? RUNS, USAGE, { min: 1, max: MAX_RUNS, integer: true }),
    maxMessages: numberFlag('max-messages', values['max-messages'] ?? MAX_MESSAGES, USAGE, {
      min: 1,
      max: 100,
      integer: true,
    }),
    volatile: values.volatile ?? [],
    ...(values.seed === undefined
      ? {}
      : { seed: numberFlag('seed', values.seed, USAGE, { min: 0, max: 2 ** 31 - 1, integer: true }) }),
    ...(path === undefined ? {} : { path }),
  };
}

/** A verdict as the tool prints it: one line when it passes, the case and its replay when it does not. */
export function linesOf(verdict: Verdict): string[] {
  const seconds = `${(verdict.elapsedMs / 1000).toFixed(1)} s`;
  if (verdict.skipped !== undefined)
    return [`${verdict.ok ? '-' : '✗'} ${verdict.consumer}: not verified: ${verdict.skipped}`];
  const warnings = verdict.warnings.map((warning) => `  warning: ${warning}`);
  if (verdict.ok)
    return [
      `✓ ${verdict.consumer}: ${verdict.runs} runs, each equal to its messages applied once (${seconds})`,
      ...warnings,
    ];
  const { failure } = verdict;
  const sides = (failure?.between ?? 'applied once, under faults').split(', ');
  return [
    `✗ ${verdict.consumer}: ${failure?.cause ?? 'failed'} (after ${verdict.runs} runs, ${seconds})`,
    ...(failure?.difference === undefined
      ? []
      : [
          `  document ${failure.difference.document}${failure.difference.field === undefined ? '' : `, field ${failure.difference.field}`}`,
          `    ${sides[0]}: ${failure.difference.expected}`,
          `    ${sides[1]}: ${failure.difference.actual}`,
        ]),
    `  messages: ${failure?.messages ?? ''}`,
    `  faults: ${JSON.stringify(failure?.faults ?? {})}`,
    `  replay: ${failure?.replay ?? ''}`,
    ...warnings,
  ];
}

// Exits once done: a handler's own clients (a Service Bus sender, a Cosmos DB client) would keep the process open.
export const command: Command = { name: 'verify', main, exitWhenDone: true };

if (require.main === module) runCommand(command);
