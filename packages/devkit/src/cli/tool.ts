import { parseArgs, type ParseArgsConfig } from 'node:util';

import { formatDuration, parseDurationSeconds, SettingsError } from '@idempotent-consumers/inbox/internal';

import { bounded, ToolError, UsageError } from './errors';

/** Where a tool writes, and what it reads from its surroundings; tests pass their own. */
export interface ToolContext {
  env: Readonly<Record<string, string | undefined>>;
  out: (line: string) => void;
  err: (line: string) => void;
  /** Epoch ms; tests pass the local peer's clock. */
  now: () => number;
}

/** The values of a tool's flags as parseArgs returns them for `config`. */
export type FlagValues<T extends ParseArgsConfig> = ReturnType<typeof parseArgs<T>>['values'];

export const EXIT_CODES = { ok: 0, failed: 1, usage: 2 } as const;
export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

export function processContext(): ToolContext {
  return {
    env: process.env,
    out: (line) => console.log(line),
    err: (line) => console.error(line),
    now: () => Date.now(),
  };
}

/** Runs a tool's main, turning its errors into a message and an exit code. */
export async function runTool(
  name: string,
  main: (argv: string[], context: ToolContext) => Promise<ExitCode>,
  argv: string[],
  context: ToolContext,
): Promise<ExitCode> {
  try {
    return await main(argv, context);
  } catch (error) {
    if (error instanceof ToolError) {
      context.err(`${name}: ${error.message}`);
      return EXIT_CODES.usage;
    }
    // Outages and refusals (ServiceBusError, a credential that cannot sign in) read best as their
    // message; the stack is there for whoever debugs the tool itself.
    // A connection refused on every address arrives as an AggregateError with no message of its own.
    const first = error instanceof AggregateError && !error.message ? (error.errors[0] as unknown) : error;
    const detail = first instanceof Error ? first : new Error(String(first));
    context.err(`${name}: ${detail.name}: ${detail.message}`);
    if (context.env.DEBUG) context.err(detail.stack ?? '');
    return EXIT_CODES.failed;
  }
}

/**
 * A command: the name it is run by (`npm run <name>`) and what it does with its arguments. Each
 * command module exports one and ends with its entry, the same for all:
 *
 *   if (require.main === module) runCommand(command);
 *
 * so that a test can run `command.main` in its own process (packages/devkit/test/tools/usage.test.ts) and know the
 * command line does the same.
 */
export interface Command {
  name: string;
  main: (argv: string[], context: ToolContext) => Promise<ExitCode>;
  /**
   * Exit as soon as `main` returns, whatever is still open (a command that starts servers and stops
   * them); otherwise the process ends when nothing is left to do, with `main`'s exit code.
   */
  exitWhenDone?: boolean;
}

/** Runs a command as its process: its arguments, the process's context, its exit code. */
export function runCommand(command: Command, argv: string[] = process.argv.slice(2)): void {
  void runTool(command.name, command.main, argv, processContext()).then((code) => {
    if (command.exitWhenDone) process.exit(code);
    process.exitCode = code;
  });
}

/**
 * A command whose flags are `config` (with a `help` flag): the flags are parsed before anything
 * else, --help prints `usage` (exit 0), and `main` gets the parsed values.
 */
export function commandWithFlags<T extends ParseArgsConfig>(
  name: string,
  config: T,
  usage: string,
  main: (flags: FlagValues<T>, context: ToolContext) => Promise<ExitCode>,
  options: Pick<Command, 'exitWhenDone'> = {},
): Command {
  return {
    name,
    ...options,
    main: async (argv, context) => {
      const { values } = parseFlags(argv, config, usage, context.env);
      if ((values as { help?: unknown }).help) {
        context.out(usage);
        return EXIT_CODES.ok;
      }
      return main(values, context);
    },
  };
}

/**
 * parseArgs over `argv`, a bad or unknown flag becoming a usage error followed by the tool's usage.
 * Two slips get a hint rather than the whole usage: an unknown flag close to a known one ("did you
 * mean"), and flags typed without npm's `--` (npm keeps them as its own config, `npm_config_<flag>`
 * in the environment, and passes on only their values).
 */
export function parseFlags<T extends ParseArgsConfig>(
  argv: string[],
  config: T,
  usage: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): ReturnType<typeof parseArgs<T>> {
  const takenByNpm = flagsTakenByNpm(argv, config, env);
  if (takenByNpm.length > 0) {
    const script = env.npm_lifecycle_event ?? '';
    const npm = ['start', 'test'].includes(script) ? `npm ${script}` : `npm run ${script}`;
    const flags = takenByNpm.map((flag) => `--${flag}`).join(', ');
    throw new UsageError(
      `npm took ${flags} for itself: put -- before the tool's flags, as in ${npm} -- ${flags.split(', ')[0]} …\n${usageLine(usage)}`,
    );
  }
  try {
    // `args` does not change the shape of the result, which TypeScript cannot see through the spread.
    return parseArgs({ ...config, args: argv }) as ReturnType<typeof parseArgs<T>>;
  } catch (error) {
    // parseArgs quotes the offending argument, which may be anything a user pasted.
    const message = bounded((error as Error).message, 200);
    if ((error as { code?: unknown }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const typed = /'(-{1,2}[^'=\s]*)/.exec((error as Error).message)?.[1] ?? '';
      const near = nearest(typed.replace(/^-+/, ''), Object.keys(config.options ?? {}));
      const sentence = /[.!?]$/.test(message) ? message : `${message}.`;
      throw new UsageError(`${sentence}${near ? ` Did you mean --${near}?` : ''}\n${usageLine(usage)}`, {
        cause: error,
      });
    }
    throw usageError(message, usage, { cause: error });
  }
}

/** The usage's first paragraph (how the command is typed), and where the rest is. */
function usageLine(usage: string): string {
  const [first] = usage.split(/\n(?:\n|Options:|Environment:|Writes |Runs )/, 1);
  return `${first}\n(--help prints every option.)`;
}

/** Flags of `config` that npm kept as its own config because they came before `--`. */
function flagsTakenByNpm(
  argv: readonly string[],
  config: ParseArgsConfig,
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  if (env.npm_lifecycle_event === undefined) return [];
  return Object.keys(config.options ?? {}).filter(
    (flag) =>
      flag !== 'help' &&
      env[`npm_config_${flag.replaceAll('-', '_')}`] !== undefined &&
      !argv.some((arg) => arg === `--${flag}` || arg.startsWith(`--${flag}=`)),
  );
}

/** The known flag an unknown one was most likely meant to be: at most two edits away. */
function nearest(typed: string, known: readonly string[]): string | undefined {
  let best: { flag: string; distance: number } | undefined;
  for (const flag of known) {
    const distance = editDistance(typed.slice(0, 64), flag);
    if (distance <= 2 && (best === undefined || distance < best.distance)) best = { flag, distance };
  }
  return best?.flag;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** A usage error (exit code 2): the message, then the tool's usage. */
export function usageError(message: string, usage: string, options?: ErrorOptions): UsageError {
  return new UsageError(`${message}\n${usage}`, options);
}

/**
 * A duplicate detection window given as a flag (ISO 8601), in seconds: from PT20S to P7D, as
 * Service Bus allows; otherwise a usage error naming the flag.
 */
export function duplicateWindowFlag(name: string, text: string, usage: string): number {
  let seconds: number;
  try {
    seconds = parseDurationSeconds(text, `--${name}`);
  } catch (error) {
    const problem = error instanceof SettingsError ? error.problems.join('; ') : (error as Error).message;
    throw usageError(problem, usage, { cause: error });
  }
  if (seconds < 20 || seconds > 7 * 86_400) {
    throw usageError(
      `--${name} must be from PT20S to P7D, as Service Bus allows; got ${formatDuration(seconds)}.`,
      usage,
    );
  }
  return seconds;
}

/** A flag's value as a number in [min, max] (whole when `integer`), or a usage error naming the flag. */
export function numberFlag(
  name: string,
  text: unknown,
  usage: string,
  { min = 0, max = Number.MAX_SAFE_INTEGER, integer = false } = {},
): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < min || value > max || (integer && !Number.isInteger(value))) {
    const shown = String(text).slice(0, 40);
    const kind = integer ? 'an integer' : 'a number';
    throw usageError(`--${name} must be ${kind} from ${min} to ${max}; got '${shown}'.`, usage);
  }
  return value;
}
