import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** `npm run demo` and `npm run bench`, run as a user runs them (small sizes, so CI stays quick). */
const tsx = (args: string[]): ReturnType<typeof spawnSync> =>
  spawnSync(process.execPath, [require.resolve('tsx/cli'), ...args], { encoding: 'utf8', timeout: 180_000 });

describe('npm run demo', () => {
  it('runs the whole pipeline and prints one JSON report with the counts and a passing verdict', () => {
    const run = tsx(['offline/demo.ts', '--messages', '150', '--seed', '3', '--json']);
    const report = JSON.parse(String(run.stdout)) as {
      ok: boolean;
      seed: number;
      accounting: { uniqueEvents: number; sends: number; droppedByBroker: number; absorbedByInbox: number };
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
    ]);
    expect(report.latency.handlerMs.p50).toBeGreaterThan(0);
  });

  it('refuses a bad option with a clear message and exit code 2', () => {
    const run = tsx(['offline/demo.ts', '--messages', 'many']);

    expect(run.status).toBe(2);
    expect(String(run.stderr)).toContain("--messages must be an integer from 1 to 1000000; got 'many'");
  });
});

describe('npm run bench', () => {
  it('measures all five strategies on three workloads and writes JSON and markdown', () => {
    const out = mkdtempSync(join(tmpdir(), 'bench-'));

    const run = tsx([
      'offline/bench/run.ts',
      '--messages',
      '80',
      '--latency-ms',
      '1',
      '--trials',
      '1',
      '--out',
      out,
    ]);
    const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as {
      rows: { workload: string; key: string; duplicateEffects: number; requestsPerNewMessage: number }[];
    };
    const markdown = readFileSync(join(out, 'results.md'), 'utf8');
    const row = (workload: string, key: string): (typeof results.rows)[number] | undefined =>
      results.rows.find((r) => r.workload === workload && r.key === key);

    expect(run.status).toBe(0);
    expect(results.rows).toHaveLength(15);
    expect(row('distinct invoices, 20% duplicates', 'a')?.duplicateEffects).toBeGreaterThan(0);
    expect(row('distinct invoices, 20% duplicates', 'd')?.duplicateEffects).toBe(0);
    expect(row('distinct invoices, 0% duplicates', 'd')?.requestsPerNewMessage).toBe(1);
    expect(markdown).toContain('| (d) inbox marker + patch in one batch (this template) |');
  });
});
