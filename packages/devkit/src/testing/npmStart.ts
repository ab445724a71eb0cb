import { type ChildProcess, spawn, type SpawnOptions } from 'node:child_process';

/**
 * `npm start` as a user runs it in a terminal of its own, for the tests that drive it from outside
 * (the README walkthrough, a consumer of your own): started in its own process group, its output
 * collected, waited on line by line, stopped with Ctrl+C.
 */

/** A user's shell: no Service Bus or Cosmos DB settings (the test setup's placeholders are removed). */
export function userEnvironment(localRunFile: string): NodeJS.ProcessEnv {
  return {
    ...Object.fromEntries(
      Object.entries(process.env).filter(
        ([name]) => !/^(COSMOS_|SERVICEBUS_|INBOX_|PURGE_|HOST_|APPLICATIONINSIGHTS_)/.test(name),
      ),
    ),
    LOCAL_RUN_FILE: localRunFile,
  };
}

export class StartedApp {
  /** Everything it printed so far, stdout and stderr as they came. */
  output = '';
  private readonly child: ChildProcess;

  constructor(command: string, args: readonly string[], options: Omit<SpawnOptions, 'detached'>) {
    this.child = spawn(command, args, { ...options, detached: true });
    this.child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
  }

  /**
   * Waits until it shows `pattern` after `from`, and returns where the match ends. Not a timing
   * assert: the limit only turns a line that never comes into a failure that shows what came instead.
   */
  async shown(pattern: RegExp, from: number, limitMs = 90_000): Promise<number> {
    const giveUp = Date.now() + limitMs;
    for (;;) {
      const match = pattern.exec(this.output.slice(from));
      if (match) return from + match.index + match[0].length;
      if (this.child.exitCode !== null || Date.now() > giveUp) {
        throw new Error(`npm start never showed ${String(pattern)}; it showed:\n${this.output.slice(from)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /**
   * Ctrl+C in its terminal, which reaches the whole process group; resolves with how it ended (npm
   * and tsx pass the signal on and end the way their child did, or by the signal itself). Waits for
   * 'close', not 'exit': npm can exit while the app it started, which shares its output pipes, is
   * still printing its last lines.
   */
  interrupt(): Promise<string> {
    const exited = new Promise<string>((resolve) =>
      this.child.once('close', (code, signal) => resolve(signal ?? `exit code ${code}`)),
    );
    process.kill(-this.child.pid!, 'SIGINT');
    return exited;
  }

  /** For afterAll: the whole group at once, only if a failed test left it running. */
  kill(): void {
    const { exitCode, signalCode, pid } = this.child;
    if (exitCode === null && signalCode === null && pid !== undefined) process.kill(-pid, 'SIGKILL');
  }
}
