import type { ParseArgsConfig } from 'node:util';

import { EnvironmentError } from './errors';
import { type Command, commandWithFlags, EXIT_CODES, type FlagValues, type ToolContext } from './tool';

/** What a local server's command line starts. */
export interface LocalServer {
  stop(): Promise<void>;
}

/**
 * A local server's command: the flags through packages/devkit/src/cli/tool.ts (usage errors exit 2 before `start`
 * runs), then the server `start` returns keeps the process running until Ctrl+C (or SIGTERM) stops
 * it, and the process exits 0.
 */
export function serverCommand<T extends ParseArgsConfig>(
  name: string,
  config: T,
  usage: string,
  start: (flags: FlagValues<T>, context: ToolContext) => Promise<LocalServer>,
): Command {
  return commandWithFlags(name, config, usage, async (flags, context) => {
    const server = await start(flags, context);
    context.out('Press Ctrl+C to stop.');
    const stop = (): void => {
      void server.stop().then(() => process.exit(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    return EXIT_CODES.ok;
  });
}

/**
 * Starts a local server on a port, saying what to do when the port is taken (found taken, or taken by
 * a race since a check): `remedy` ends the sentence "Stop it, or …".
 */
export async function listening<T>(
  what: string,
  port: number,
  remedy: string,
  start: () => Promise<T>,
): Promise<T> {
  try {
    return await start();
  } catch (error) {
    if (!/EADDRINUSE/.test(`${(error as NodeJS.ErrnoException).code} ${(error as Error).message}`))
      throw error;
    throw new EnvironmentError(
      `The ${what} port ${port} is in use (another npm start, npm run cosmos or an emulator?). Stop it, or ${remedy}`,
      { cause: error },
    );
  }
}
