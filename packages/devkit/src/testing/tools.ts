import { join } from 'node:path';

import { PROJECT_ROOT } from '../cli/project';
import { type Command, runTool, type ToolContext } from '../cli/tool';
import { main } from '../tools/deadLetters';
import { main as peekMain } from '../tools/peek';

export interface CapturedContext {
  context: ToolContext;
  /** What the tool printed, line by line. */
  out: string[];
  err: string[];
}

/** A tool context that records output and sees only `env` (never the shell's Azure variables). */
export function captured(
  env: Record<string, string | undefined>,
  now: () => number = Date.now,
): CapturedContext {
  const out: string[] = [];
  const err: string[] = [];
  return { context: { env, out: (line) => out.push(line), err: (line) => err.push(line), now }, out, err };
}

/** `npm run dead-letters -- ...` in-process, with the context the test gives it; resolves to the exit code. */
export const deadLetters = (argv: string[], context: ToolContext): Promise<number> =>
  runTool('dead-letters', main, argv, context);

/** `npm run peek -- ...` in-process. */
export const peek = (argv: string[], context: ToolContext): Promise<number> =>
  runTool('peek', peekMain, argv, context);

/** A Service Bus emulator connection string for a port nobody listens on: a tool that connects fails. */
export const UNREACHABLE =
  'Endpoint=sb://127.0.0.1:9;SharedAccessKeyName=k;SharedAccessKey=k;UseDevelopmentEmulator=true;';

export interface CommandRun {
  status: number;
  stdout: string;
  stderr: string;
}

/**
 * A command module's `command` (packages/devkit/src/cli/tool.ts) run in this process the way its entry runs it
 * (runTool: the exit code, errors as one line), with this environment and its output captured. A
 * command line's process does exactly this (`runCommand`), so a test need not spawn one per case.
 */
export async function runCommandModule(
  file: string,
  args: string[],
  env: Record<string, string | undefined> = process.env,
): Promise<CommandRun> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the module the test names
  const { command } = require(join(PROJECT_ROOT, file)) as { command?: Command };
  if (!command) throw new Error(`${file} exports no command`);
  const { context, out, err } = captured(env);
  const status = await runTool(command.name, command.main, args, context);
  const text = (lines: string[]): string => lines.map((line) => `${line}\n`).join('');
  return { status, stdout: text(out), stderr: text(err) };
}
