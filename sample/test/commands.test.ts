import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** `npm run demo` and `npm run bench`, run as a user runs them (small sizes, so CI stays quick). */
const tsx = (args: string[]): ReturnType<typeof spawnSync> =>
  spawnSync(process.execPath, [require.resolve('tsx/cli'), ...args], { encoding: 'utf8', timeout: 180_000 });

describe('npm run demo', () => {
  it('runs the whole pipeline and prints one JSON report with the counts and a passing verdict, which the format check accepts as a file', () => {
    // The command the docs give, redirect included: the file it leaves must not fail `npm test`.
    const file = join(mkdtempSync(join(tmpdir(), 'demo-')), 'report.json');
    const run = spawnSync(
      'sh',
      ['-c', `npm run --silent demo -- --messages 150 --seed 3 --json > '${file}'`],
      {
        encoding: 'utf8',
        timeout: 180_000,
      },
    );
    const prettier = spawnSync(
      process.execPath,
      [require.resolve('prettier/bin/prettier.cjs'), '--check', '--config', '.prettierrc.json', file],
      { encoding: 'utf8' },
    );
    const report = JSON.parse(readFileSync(file, 'utf8')) as {
      ok: boolean;
      seed: number;
      accounting: {
        uniqueEvents: number;
        sends: number;
        droppedByBroker: number;
        absorbedByInbox: number;
        effects: { reservations: number; backorders: number; shipments: number };
        outbox: { staged: number; sends: number };
      };
      deliveries: { total: number; byOutcome: Record<string, number> };
      invariants: { name: string; ok: boolean }[];
      latency: { handlerMs: { p50: number } };
    };

    expect(run.status).toBe(0);
    expect(String(run.stderr)).toContain('seed 3');
    expect(report.ok).toBe(true);
    expect(report.seed).toBe(3);
    expect(report.accounting.uniqueEvents).toBe(150);
    expect(report.accounting.sends).toBeGreaterThanOrEqual(150);
    expect(report.deliveries.total).toBeGreaterThanOrEqual(150);
    expect(report.invariants.map((i) => i.name)).toEqual([
      'effects',
      'settled',
      'dead-letters',
      'markers',
      'duplicates',
      'outbox',
      'topics',
      'reminted',
    ]);
    // Every reservation or backorder published its event through the outbox, and it was applied;
    // every shipment planned published its own.
    const { effects, outbox } = report.accounting;
    expect(outbox.staged).toBeGreaterThan(0);
    expect(effects.shipments).toBe(effects.reservations + effects.backorders);
    expect(outbox.staged).toBe(effects.reservations + effects.backorders + effects.shipments);
    expect(outbox.sends).toBeGreaterThanOrEqual(outbox.staged);
    expect(report.latency.handlerMs.p50).toBeGreaterThan(0);
    expect(prettier.status).toBe(0);
  });

  it('sample/demo-report.md is what the command at its top writes (all but the Speed section, which measures the machine)', () => {
    const sample = readFileSync(join('sample', 'demo-report.md'), 'utf8');
    const command = /^Written by `npm run demo -- (.*) --out sample\/demo-report\.md`/m.exec(sample)?.[1];
    const file = join(mkdtempSync(join(tmpdir(), 'demo-')), 'sample-demo-report.md');
    const run = tsx(['sample/demo.ts', ...(command ?? '').split(' '), '--out', file]);
    const regenerated = readFileSync(file, 'utf8');
    const withoutSpeed = (text: string): string =>
      text.replace(/^Written by .*$/m, '').replace(/^Speed \(.*\)\n( {2}.*\n)+/m, '');

    expect(command).toMatch(/^--seed \d+/);
    expect(run.status).toBe(0);
    expect(withoutSpeed(regenerated)).not.toContain('handler latency');
    expect(withoutSpeed(regenerated)).toBe(withoutSpeed(sample));
    // The duplicates table reads as a table: each row's counts end where their column's name does.
    const lines = regenerated.split('\n');
    const start = lines.findIndex((line) => line.startsWith('Duplicates by cause'));
    const end = lines.findIndex((line, index) => index > start && line.startsWith('  diagonal'));
    const [header = '', ...rows] = lines.slice(start + 1, end);
    const ends = (line: string, pattern: RegExp): number[] =>
      [...line.matchAll(pattern)].map((match) => match.index + match[0].length);
    expect(rows.length).toBeGreaterThan(1);
    for (const row of rows) {
      const counts = ends(row, /\b\d+\b/g);
      expect([row, counts]).toEqual([row, ends(header, /[a-z_]+(?= |$)/g).slice(-counts.length)]);
    }
  });

  it('--cosmos-outage: a 30-minute outage dead-letters no valid message, the JSON reports the target, and its replay command gives the same deliveries', () => {
    const run = tsx([
      'sample/demo.ts',
      '--messages',
      '60',
      '--seed',
      '5',
      '--poison',
      '0',
      '--cosmos-outage',
      '0:30',
      '--json',
    ]);
    type Report = {
      replay: string;
      deliveries: { digest: string };
      ok: boolean;
      options: { faults: { cosmosOutages: unknown[] } };
      accounting: { deadLettered: { total: number } };
      breaker: { opened: number; outages: { durationMs: number; pendingAtRecovery: number }[] };
      outageTarget: { validDeadLettered: number; survivableOutageMinutes: number; met: boolean };
    };
    const report = JSON.parse(String(run.stdout)) as Report;
    const replayed = tsx(['sample/demo.ts', ...report.replay.split(' ').slice(4), '--json']);

    expect(run.status).toBe(0);
    expect(report.options.faults.cosmosOutages).toEqual([
      { startMs: 0, durationMs: 1_800_000, kind: 'unavailable' },
    ]);
    expect(report.ok).toBe(true);
    expect(report.accounting.deadLettered.total).toBe(0);
    expect(report.breaker.opened).toBeGreaterThan(0);
    expect(report.breaker.outages[0]?.pendingAtRecovery).toBeGreaterThan(0);
    expect(report.outageTarget.validDeadLettered).toBe(0);
    expect(report.outageTarget.survivableOutageMinutes).toBeCloseTo(31.42, 2);
    expect(report.outageTarget.met).toBe(true);
    expect(report.replay).toBe('npm run demo -- --seed 5 --messages 60 --poison 0 --cosmos-outage 0:30');
    expect(replayed.status).toBe(0);
    expect((JSON.parse(String(replayed.stdout)) as Report).deliveries.digest).toBe(report.deliveries.digest);
  });

  it('--duplicate-window PT20S lets the relay resends through to the inboxes: every cause named as injected, and the replay keeps the window', () => {
    // The example sample/README.md gives.
    const example = /`npm run demo -- ([^`]*--duplicate-window PT20S[^`]*)`/.exec(
      readFileSync(join('sample', 'README.md'), 'utf8'),
    )?.[1];
    expect(example).toBeDefined();
    const run = tsx(['sample/demo.ts', ...(example ?? '').split(' '), '--json']);
    type Report = {
      replay: string;
      ok: boolean;
      duplicateCauses: { diagonal: boolean; counts: Record<string, Record<string, number>> };
    };
    const report = JSON.parse(String(run.stdout)) as Report;

    expect(run.status).toBe(0);
    expect(report.ok).toBe(true);
    expect(report.duplicateCauses.diagonal).toBe(true);
    expect(report.duplicateCauses.counts.relay_resend?.relay_resend).toBeGreaterThan(0);
    expect(report.replay).toContain(' --duplicate-window PT20S ');
  });

  it('refuses a duplicate window Service Bus would not take', () => {
    const run = tsx(['sample/demo.ts', '--duplicate-window', 'PT5S']);

    expect(run.status).toBe(2);
    expect(String(run.stderr)).toContain(
      '--duplicate-window must be from PT20S to P7D, as Service Bus allows; got PT5S.',
    );
  });

  it('refuses a malformed --cosmos-outage', () => {
    const run = tsx(['sample/demo.ts', '--cosmos-outage', '30']);

    expect(run.status).toBe(2);
    expect(String(run.stderr)).toContain("--cosmos-outage must be <start-minute>:<minutes>; got '30'");
  });

  it('refuses a malformed --slow-dependency', () => {
    const run = tsx(['sample/demo.ts', '--slow-dependency', '0:5:1']);

    expect(run.status).toBe(2);
    expect(String(run.stderr)).toContain("--slow-dependency must be <start-minute>:<minutes>; got '0:5:1'");
  });

  it('refuses a bad option with a clear message and exit code 2', () => {
    const run = tsx(['sample/demo.ts', '--messages', 'many']);

    expect(run.status).toBe(2);
    expect(String(run.stderr)).toContain("--messages must be an integer from 1 to 1000000; got 'many'");
  });
});

describe('npm run bench', () => {
  // The script compiles the bench and what it imports with tsc and runs the output (what is deployed); the
  // tests below run that output directly once `npm run bench -- --help` has built it.
  const compiled = (args: string[]): ReturnType<typeof spawnSync> =>
    // The library's package name resolves to its compiled files from .cache/bench (sample/bench/compile.mjs).
    spawnSync(process.execPath, [join('.cache', 'bench', 'sample', 'bench', 'run.js'), ...args], {
      encoding: 'utf8',
      timeout: 180_000,
    });

  beforeAll(() => {
    const build = spawnSync('npm', ['run', '--silent', 'bench', '--', '--help'], {
      encoding: 'utf8',
      timeout: 180_000,
    });
    expect(build.status).toBe(0);
    expect(String(build.stdout)).toContain('Usage: npm run bench');
  }, 180_000);

  it('measures all six strategies on three workloads and the outbox relay, writes JSON and markdown prettier accepts, and compares runs', () => {
    const out = mkdtempSync(join(tmpdir(), 'bench-'));
    const later = mkdtempSync(join(tmpdir(), 'bench-'));

    const run = compiled(['--messages', '80', '--latency-ms', '1', '--trials', '1', '--out', out]);
    const compared = compiled([
      '--messages',
      '40',
      '--trials',
      '1',
      '--out',
      later,
      '--before',
      join(out, 'results.json'),
    ]);
    const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as {
      command: string;
      rows: {
        workload: string;
        key: string;
        duplicateEffects: number;
        requestsPerNewMessage: number;
        cpuMicrosPerMessage: number;
        messagesPerSecond: number;
        relay?: { outgoing: number; dispatchRequests: number; requestsPerMessage: number };
      }[];
      ratios: { workload: string; cpuPerMessage: number; throughput: number }[];
    };
    const markdown = readFileSync(join(out, 'results.md'), 'utf8');
    const row = (workload: string, key: string): (typeof results.rows)[number] | undefined =>
      results.rows.find((r) => r.workload === workload && r.key === key);
    const comparison = readFileSync(join(later, 'results.md'), 'utf8');
    const prettier = spawnSync(
      process.execPath,
      [require.resolve('prettier/bin/prettier.cjs'), '--check', out, later],
      { encoding: 'utf8' },
    );

    expect(run.status).toBe(0);
    // Six strategies, each warmed up on 80 messages, then 3 workloads × 1 trial × 80 messages.
    expect(String(run.stderr)).toMatch(/^bench: 1920\/1920 messages \(100%\), done in \d+ s$/m);
    expect(results.command).toBe(`npm run bench -- --messages 80 --latency-ms 1 --trials 1 --out ${out}`);
    expect(results.rows).toHaveLength(18);
    expect(row('distinct invoices, 20% duplicates', 'a')?.duplicateEffects).toBeGreaterThan(0);
    expect(row('distinct invoices, 20% duplicates', 'd')?.duplicateEffects).toBe(0);
    expect(row('distinct invoices, 0% duplicates', 'd')?.requestsPerNewMessage).toBe(1);
    // (f) publishes through the outbox in the same one batch; the relay then sends one message per payment.
    expect(row('distinct invoices, 0% duplicates', 'f')?.requestsPerNewMessage).toBe(1);
    expect(row('distinct invoices, 20% duplicates', 'f')?.duplicateEffects).toBe(0);
    const relay = row('distinct invoices, 20% duplicates', 'f')?.relay;
    expect(relay).toMatchObject({ outgoing: 80, dispatchRequests: 80 });
    expect(relay?.requestsPerMessage).toBeGreaterThan(1);
    expect(results.rows.filter((r) => r.relay).map((r) => r.key)).toEqual(['f', 'f', 'f']);
    expect(markdown).toContain('**Outbox relay**');
    expect(markdown).toMatch(/\| distinct invoices, 20% duplicates +\| \(f\) +\| +80 +\|/);
    expect(results.rows.every((r) => r.cpuMicrosPerMessage > 0)).toBe(true);
    const a = row('one hot invoice, 20% duplicates', 'a');
    const d = row('one hot invoice, 20% duplicates', 'd');
    expect(
      results.ratios.find((r) => r.workload === 'one hot invoice, 20% duplicates')?.cpuPerMessage,
    ).toBeCloseTo((d?.cpuMicrosPerMessage ?? NaN) / (a?.cpuMicrosPerMessage ?? NaN), 2);
    expect(results.ratios).toHaveLength(3);
    expect(markdown).toMatch(/\| \(d\) inbox marker \+ patch in one batch \(this template\) +\|/);
    expect(markdown).toContain('CPU µs/msg');
    expect(markdown).toContain(
      `bar [${results.rows
        .filter((r) => r.workload === results.rows[0]?.workload)
        .map((r) => r.messagesPerSecond)
        .join(', ')}]`,
    );
    expect(compared.status).toBe(0);
    expect(comparison).toContain(`before is \`${results.command}\``);
    expect(comparison).toMatch(
      new RegExp(
        `\\| one hot invoice, 20% duplicates +\\| before +\\| +${a?.cpuMicrosPerMessage} +\\| +${d?.cpuMicrosPerMessage} +\\|`,
      ),
    );
    expect(comparison).toMatch(/\| one hot invoice, 20% duplicates +\| after +\|/);
    expect(prettier.status).toBe(0);
  }, 180_000);

  it.each([
    [['--messages', 'many'], "--messages must be a positive integer; got 'many'"],
    [['--out', join(tmpdir(), 'no-such-directory', 'bench')], '--out must be an existing directory'],
    [['--trails', '3'], "Unknown option '--trails'"],
    [['--strategies', 'ag'], "--strategies takes letters from a to f; got 'ag'"],
    [['--before', join(tmpdir(), 'no-such-results.json')], '--before must be a results.json the bench wrote'],
  ])('refuses %j with exit code 2 and the usage, before it starts', (args, message) => {
    const run = compiled(args);

    expect(run.status).toBe(2);
    expect(String(run.stderr)).toContain(message);
    expect(String(run.stderr)).toContain('Usage: npm run bench');
    expect(String(run.stderr)).not.toContain('Benchmark:');
  });
});
