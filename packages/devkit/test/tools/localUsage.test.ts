import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { runCommandModule } from '../../src/testing/tools';

/**
 * The command-line tools of local Azure and the sample read their flags through packages/devkit/src/cli/tool.ts: a usage error prints
 * the usage and exits 2 before anything starts, and --help prints the usage and exits 0 (each run in
 * this process as its entry runs it; npm start's own checks below run it as a process).
 */
const tools = present([
  {
    script: 'packages/devkit/src/tools/localCosmos.ts',
    usage: 'Usage: npm run cosmos',
    started: 'listening',
  },
  {
    script: 'packages/devkit/src/tools/localServiceBus.ts',
    usage: 'Usage: npx tsx packages/devkit/src/tools/localServiceBus.ts',
    started: 'listening',
  },
  { script: 'sample/demo.ts', usage: 'Usage: npm run demo', started: 'Starting the offline stack' },
  { script: 'sample/bench/purgeUnderLoad.ts', usage: 'Usage: npm run bench:purge', started: '|' },
  {
    script: 'packages/devkit/src/tools/start/cli.ts',
    usage: 'Usage: npm start',
    started: 'Building the app',
  },
  {
    script: 'packages/devkit/src/tools/funcLocal.ts',
    usage: 'Usage: npm run func:local',
    started: 'Cosmos DB:',
  },
  {
    script: 'packages/devkit/src/tools/console/cli.ts',
    usage: 'Usage: npm run console',
    started: 'Console:',
  },
  {
    script: 'packages/devkit/src/tools/cost.ts',
    usage: 'Usage:\n  npm run cost',
    started: 'Cosmos DB, per delivery',
  },
]);

/** The tools that are there: npm run remove:samples takes the sample's away. */
function present<T extends { script: string } | [string, ...unknown[]]>(entries: T[]): T[] {
  return entries.filter((entry) => existsSync(Array.isArray(entry) ? entry[0] : entry.script));
}

describe.each(tools)('$script', ({ script, usage, started }) => {
  it('refuses an unknown flag with its usage and exit code 2, starting nothing', async () => {
    const run = await runCommandModule(script, ['--no-such-flag']);

    expect(run.status).toBe(2);
    expect(run.stderr).toContain("Unknown option '--no-such-flag'");
    expect(run.stderr).toContain(usage);
    expect(run.stdout + run.stderr).not.toContain(started);
  });

  it('prints its usage for --help and exits 0', async () => {
    const run = await runCommandModule(script, ['--help']);

    expect(run.status).toBe(0);
    expect(run.stdout).toContain(usage);
    expect(run.stdout + run.stderr).not.toContain(started);
  });
});

describe('bad values', () => {
  it.each(
    present([
      [
        'packages/devkit/src/tools/localCosmos.ts',
        ['--port', '70000'],
        "--port must be an integer from 0 to 65535; got '70000'.",
      ],
      [
        'packages/devkit/src/tools/localCosmos.ts',
        ['--throughput', '0'],
        "--throughput must be a whole number of RU/s above 0; got '0'.",
      ],
      [
        'packages/devkit/src/tools/localServiceBus.ts',
        ['--max-delivery-count', '0'],
        '--max-delivery-count must be an integer from 1',
      ],
      [
        'packages/devkit/src/tools/localServiceBus.ts',
        ['--queue', 'bad name'],
        "--queue 'bad name' is not a Service Bus entity name.",
      ],
      [
        'packages/devkit/src/tools/localServiceBus.ts',
        ['--session-queue', 'bad name'],
        "--session-queue 'bad name' is not a Service Bus entity name.",
      ],
      [
        'packages/devkit/src/tools/localServiceBus.ts',
        ['--lock-duration', 'soon'],
        "--lock-duration='soon' is not an ISO-8601 duration",
      ],
      ['sample/demo.ts', ['--seed'], "Option '--seed <value>' argument missing"],
      [
        'packages/devkit/src/tools/cost.ts',
        ['--reads', '1.5'],
        "--reads must be an integer from 0 to 99; got '1.5'.",
      ],
      [
        'packages/devkit/src/tools/cost.ts',
        ['--usd-per-million-ru=-1'],
        "--usd-per-million-ru must be a number from 0 to 1000000; got '-1'.",
      ],
      [
        'packages/devkit/src/tools/start/cli.ts',
        ['--cosmos-port', '70000'],
        "--cosmos-port must be an integer from 0 to 65535; got '70000'.",
      ],
      [
        'packages/devkit/src/tools/funcLocal.ts',
        ['--servicebus-port', '70000'],
        "--servicebus-port must be an integer from 0 to 65535; got '70000'.",
      ],
      [
        'packages/devkit/src/tools/start/cli.ts',
        ['--console-port', '99999'],
        "--console-port must be an integer from 0 to 65535; got '99999'.",
      ],
      [
        'packages/devkit/src/tools/start/cli.ts',
        ['--duplicate-window', 'PT1X'],
        "--duplicate-window='PT1X' is not an ISO-8601 duration",
      ],
    ] satisfies [string, string[], string][]),
  )('%s %j: exit code 2 with the usage, before it starts', async (script, args, message) => {
    const run = await runCommandModule(script, args);

    expect(run.status).toBe(2);
    expect(run.stderr).toContain(message);
    expect(run.stderr).toContain('Usage:');
    expect(run.stdout).not.toContain('listening');
    expect(run.stdout).not.toContain('Building the app');
  });
});

describe('npm run func:local', () => {
  it('refuses to replace a settings file that holds other values, before anything starts', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'func-local-'));
    const settings = join(folder, 'local.settings.json');
    writeFileSync(settings, '{"IsEncrypted": false, "Values": {"MY_SETTING": "mine"}}\n');

    const run = await runCommandModule('packages/devkit/src/tools/funcLocal.ts', ['--settings', settings], {
      ...process.env,
      LOCAL_RUN_FILE: join(folder, 'local-run.json'),
    });

    // An environment error, as npm start's refusals: exit code 2.
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(
      'local.settings.json exists with other values. Run with --force to replace it',
    );
    expect(run.stdout).not.toContain('Cosmos DB:');
    expect(readFileSync(settings, 'utf8')).toContain('"MY_SETTING": "mine"');
    expect(existsSync(join(folder, 'local-run.json'))).toBe(false);
  });
});

describe('npm start', () => {
  // Its own settings file: an npm start the developer has running must not change these results.
  const runFile = join(mkdtempSync(join(tmpdir(), 'local-run-')), 'local-run.json');
  const start = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    spawnSync(
      process.execPath,
      [require.resolve('tsx/cli'), 'packages/devkit/src/tools/start/cli.ts', ...args],
      {
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, LOCAL_RUN_FILE: runFile, ...env },
      },
    );

  it('says to put -- first when npm took a flag for itself (npm start --duplicate-window PT20S)', async () => {
    // What npm hands the script: the value alone, and the flag as its own config.
    const run = await runCommandModule('packages/devkit/src/tools/start/cli.ts', ['PT20S'], {
      ...process.env,
      npm_lifecycle_event: 'start',
      npm_config_duplicate_window: 'PT20S',
    });

    expect(run.status).toBe(2);
    expect(run.stderr).toBe(
      "start: npm took --duplicate-window for itself: put -- before the tool's flags, as in npm start -- --duplicate-window …\n" +
        'Usage: npm start -- [--duplicate-window PT1H] [--cosmos-port 8081] [--servicebus-port 5672] [--console-port 7070 | --no-console] [--app dist] [--watch | --no-watch]\n' +
        '(--help prints every option.)\n',
    );
  });

  it('suggests the flag an unknown one is close to, with the usage line alone', async () => {
    const near = await runCommandModule('packages/devkit/src/tools/start/cli.ts', [
      '--duplicate-windw',
      'PT20S',
    ]);
    const far = await runCommandModule('packages/devkit/src/tools/start/cli.ts', ['--verbose']);

    expect(near.status).toBe(2);
    expect(near.stderr).toMatch(
      /^start: Unknown option '--duplicate-windw'.*\. Did you mean --duplicate-window\?\nUsage: npm start -- \[/,
    );
    expect(near.stderr).not.toContain('Options:');
    expect(far.stderr).not.toContain('Did you mean');
  });

  it('refuses a duplicate detection window Service Bus would refuse', () => {
    const run = start(['--duplicate-window', 'PT10S']);

    expect(run.status).toBe(2);
    expect(run.stderr).toContain(
      '--duplicate-window must be from PT20S to P7D, as Service Bus allows; got PT10S.',
    );
  });

  it('refuses --watch with --no-watch', () => {
    const run = start(['--watch', '--no-watch']);

    expect(run.status).toBe(2);
    expect(run.stderr).toContain('Pass --watch or --no-watch, not both.');
    expect(run.stdout).not.toContain('Building the app');
  });

  it('refuses to empty the project, or a folder that is not an earlier build', () => {
    const folder = mkdtempSync(join(tmpdir(), 'not-a-build-'));
    writeFileSync(join(folder, 'notes.txt'), 'keep me');

    for (const app of ['.', '..', folder]) {
      const run = start(['--app', app]);
      expect(run.status).toBe(2);
      expect(run.stderr).toMatch(/--app .* (is the project or holds it|holds no earlier build of this app)/);
      expect(run.stdout).not.toContain('Building the app');
    }
    expect(readFileSync(join(folder, 'notes.txt'), 'utf8')).toBe('keep me');
  });

  it('refuses to start while another npm start runs with the same settings file', () => {
    const running = join(mkdtempSync(join(tmpdir(), 'local-run-')), 'local-run.json');
    // This test's own process stands for the npm start that is running.
    writeFileSync(running, JSON.stringify({ pid: process.pid, startedAt: '', environment: {} }));

    const run = start([], { LOCAL_RUN_FILE: running });

    expect(run.status).toBe(2);
    expect(run.stderr).toContain(`npm start is already running (pid ${process.pid};`);
    expect(run.stdout).not.toContain('Building the app');
  });

  it('names every port that is taken, at once, with the one command that avoids them, and exits 2', async () => {
    const listen = async (): Promise<[ReturnType<typeof createServer>, number]> => {
      const server = createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return [server, (server.address() as AddressInfo).port];
    };
    const [cosmos, cosmosPort] = await listen();
    const [serviceBus, serviceBusPort] = await listen();
    const [taken, consolePort] = await listen();
    const app = mkdtempSync(join(tmpdir(), 'start-'));
    const free = ['--console-port', '0', '--app', app];
    try {
      const one = start(['--cosmos-port', String(cosmosPort), '--servicebus-port', '0', ...free]);
      const both = start([
        ...['--cosmos-port', String(cosmosPort), '--servicebus-port', String(serviceBusPort), ...free],
      ]);
      const page = start([
        ...[
          '--cosmos-port',
          '0',
          '--servicebus-port',
          '0',
          '--console-port',
          String(consolePort),
          '--app',
          app,
        ],
      ]);

      expect(one.status).toBe(2);
      expect(one.stderr).toContain(
        `The port for Cosmos DB ${cosmosPort} is in use (another npm start, npm run cosmos or an emulator?). ` +
          'Stop it, or pick free ports: npm start -- --cosmos-port 0',
      );
      expect(both.status).toBe(2);
      expect(both.stderr).toContain(
        `The ports for Cosmos DB ${cosmosPort} and Service Bus ${serviceBusPort} are in use`,
      );
      expect(both.stderr).toContain('npm start -- --cosmos-port 0 --servicebus-port 0');
      expect(both.stderr).not.toContain('EADDRINUSE');
      expect(both.stdout).not.toContain('Building the app');
      expect(page.status).toBe(2);
      expect(page.stderr).toContain(
        `The port for the console ${consolePort} is in use (another npm start, npm run cosmos or an emulator?). ` +
          'Stop it, or pick free ports: npm start -- --console-port 0',
      );
    } finally {
      cosmos.close();
      serviceBus.close();
      taken.close();
    }
  });

  it('refuses app settings the app would refuse, before it starts anything', () => {
    const run = start([], { INBOX_RETENTION: 'PT1M' });

    expect(run.status).toBe(2);
    expect(run.stderr).toContain('The app settings (local.settings.sample.json');
    expect(run.stderr).toContain('INBOX_RETENTION');
    expect(run.stdout).not.toContain('Building the app');
  });
});
