import { runTool, type ToolContext } from '../../tools/cli';
import { main } from '../../tools/deadLetters';

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
