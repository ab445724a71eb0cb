import { EXIT_CODES, type ExitCode, type ToolContext } from '../tools/cli';

/**
 * For the local servers' command lines: the server keeps the process running until Ctrl+C (or
 * SIGTERM) stops it, then the process exits 0.
 */
export function serveUntilInterrupted(server: { stop(): Promise<void> }, context: ToolContext): ExitCode {
  context.out('Press Ctrl+C to stop.');
  const stop = (): void => {
    void server.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return EXIT_CODES.ok;
}

/** A server's command line ends the process only when it failed; a running server keeps it alive. */
export function exitOnFailure(code: ExitCode): void {
  if (code !== EXIT_CODES.ok) process.exit(code);
}
