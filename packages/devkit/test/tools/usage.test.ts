// Every command of package.json: --help prints the usage and exits 0; a usage error prints one line
// saying what is wrong, then the usage, exits 2, and does nothing first (no output before the error,
// nothing started, nothing connected: Service Bus and Cosmos DB settings point at a port nobody
// listens on). Each command's `command` runs in this process as its entry runs it (runCommand); one
// command line is run as a process, and every command file ends with that same entry.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { type CommandRun, runCommandModule } from '../../src/testing/tools';

const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> })
  .scripts;
const missingDirectory = join(tmpdir(), 'no-such-directory', 'x');

/** The TypeScript file a script runs: `tsx <file>`, or for bench the file its tsc build runs. */
const entry = (script: string): string =>
  /tsx (\S+\.ts)/.exec(scripts[script] ?? '')?.[1] ??
  (/node \.cache\/bench\/(\S+)\.js/.exec(scripts[script] ?? '')?.[1] ?? '') + '.ts';

const unreachable = {
  ...process.env,
  SERVICEBUS_NAMESPACE: '127.0.0.1:9',
  SERVICEBUS_CONNECTION_STRING: '',
  COSMOS_ENDPOINT: 'http://127.0.0.1:9/',
};

const run = (script: string, args: string[]): Promise<CommandRun> =>
  runCommandModule(entry(script), args, unreachable);

/** One usage error per command; a command `npm run remove:samples` removed has no script left to run. */
const usageErrors = (
  [
    ['cosmos', ['--port', 'x'], "--port must be an integer from 0 to 65535; got 'x'"],
    ['demo', ['--out', missingDirectory], `--out: the folder of '${missingDirectory}' does not exist`],
    ['bench', ['--out', missingDirectory], `--out must be an existing directory; got '${missingDirectory}'`],
    ['bench:purge', ['--recrod'], "Unknown option '--recrod'"],
    ['send', ['--subject', 'OrderShipped', '--repeat'], "Option '--repeat <value>' argument missing"],
    ['dead-letters', ['show', 'payments.applier'], 'show needs the MessageId or sequence number'],
    ['console', ['--port', 'x'], "--port must be an integer from 0 to 65535; got 'x'"],
    ['peek', ['payments.applier', '--max', '0'], "--max must be an integer from 1 to 1000; got '0'"],
    ['verify', ['--runs', '0'], "--runs must be an integer from 1 to 10000; got '0'"],
    ['outbox', ['list', '--max', 'all'], "--max must be an integer from 1 to 1000; got 'all'"],
    ['cost', ['--rate', 'fast'], "--rate must be a number from 0.001 to 1000000; got 'fast'"],
    ['test:live', ['--timeout-seconds', 'soon'], "--timeout-seconds must be a number of seconds; got 'soon'"],
    ['package', ['--record', join(missingDirectory, 'record.md')], '--record: the folder'],
    ['emulators:config', ['--check', 'now'], "Unexpected argument 'now'"],
    [
      'new:consumer',
      ['--name', 'Bad Name', '--topic', 'orders', '--subject', 'OrderShipped'],
      'is not a consumer name',
    ],
    ['remove:samples', ['--dyr-run'], "Unknown option '--dyr-run'"],
    ['start', ['--duplicate-window', 'an hour'], "--duplicate-window='an hour' is not an ISO-8601 duration"],
    ['func:local', ['--cosmos-port', 'x'], "--cosmos-port must be an integer from 0 to 65535; got 'x'"],
    [
      'test:mutation:changed',
      ['--concurrency', '0'],
      "--concurrency must be a whole number from 1 to 64; got '0'",
    ],
  ] satisfies [script: string, args: string[], message: string][]
).filter(([script]) => script in scripts);

/** How a user types the script: `npm start` and `npm test` need no `run`. */
const npmCommand = (script: string): string =>
  ['start', 'test'].includes(script) ? `npm ${script}` : `npm run ${script}`;

/** One line saying what is wrong, then the usage; exit 2, nothing on stdout. */
function expectUsageError(script: string, result: CommandRun, message: string): void {
  const [first, ...rest] = String(result.stderr).split('\n');

  expect(result.status).toBe(2);
  expect(result.stdout).toBe('');
  expect(first).toBe(`${script}: ${first?.slice(script.length + 2)}`);
  expect(first).toContain(message);
  expect(rest[0]).toMatch(/^Usage/);
  expect(rest.join('\n')).toContain(npmCommand(script));
}

describe('every command', () => {
  it('has a usage error in this table', () => {
    const commands = Object.keys(scripts).filter(
      (script) =>
        /^(tsx|node \.cache\/bench)/.test(scripts[script]?.split(' && ').pop() ?? '') && script !== 'build',
    );

    expect(usageErrors.map(([script]) => script).sort()).toEqual(commands.sort());
  });

  it.each(usageErrors)(
    '%s %j: says what is wrong, prints the usage, exits 2, and does nothing first',
    async (script, args, message) => {
      expectUsageError(script, await run(script, args), message);
    },
  );

  it.each(usageErrors.map(([script]) => script))(
    '%s --help: prints the usage and exits 0',
    async (script) => {
      const result = await run(script, ['--help']);

      expect(result.status).toBe(0);
      expect(String(result.stdout)).toMatch(/^Usage/);
      expect(String(result.stdout)).toContain(npmCommand(script));
      expect(result.stderr).toBe('');
    },
  );
});

describe('dead-letters discard', () => {
  it.each([
    [['discard', 'payments.applier'], 'discard needs --message-id <id> (one or more) or --all, not both.'],
    [
      ['discard', 'payments.applier', '--all', '--message-id', 'payment-1'],
      'discard needs --message-id <id> (one or more) or --all, not both.',
    ],
    [
      ['discard', 'payments.applier', '--all', '--include-poison'],
      '--include-poison do(es) not apply to discard.',
    ],
    [['discard', 'payments.applier', '--all', 'now'], 'Unexpected arguments for discard: now.'],
    [['discard'], 'Say what to do (list, show, resubmit or discard) and with which subscription.'],
  ])('%j: says what is wrong, prints the usage, exits 2, and does nothing first', async (args, message) => {
    expectUsageError('dead-letters', await run('dead-letters', args), message);
  });
});

describe("a command's entry", () => {
  it.each(usageErrors.map(([script]) => entry(script)))(
    '%s ends with the entry every command has',
    (file) => {
      expect(readFileSync(file, 'utf8')).toMatch(
        /\nexport const command\b[^]*\nif \(require\.main === module\) runCommand\(command\);\n$/,
      );
    },
  );

  it('runs its command as a process: exit code, usage error on stderr', () => {
    const result = spawnSync(
      process.execPath,
      [require.resolve('tsx/cli'), entry('peek'), 'payments.applier', '--max', '0'],
      {
        encoding: 'utf8',
        timeout: 60_000,
        env: unreachable,
      },
    );

    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain("peek: --max must be an integer from 1 to 1000; got '0'");
  });
});
