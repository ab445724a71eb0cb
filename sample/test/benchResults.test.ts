// The committed benchmark figures (sample/bench/results.*) must be what the bench's own writer makes
// of its JSON, chart included, and reproducible with the command printed next to them: the settings
// the JSON records are what that command gives, defaults included.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { renderMarkdown, type Results } from '../bench/report';

const bench = join('sample', 'bench');
const committed = ['results', 'results.before'].map((name) => ({
  name,
  markdownPath: join(bench, `${name}.md`),
  results: JSON.parse(readFileSync(join(bench, `${name}.json`), 'utf8')) as Results,
}));

describe.each(committed)('sample/bench/$name', ({ markdownPath, results }) => {
  const workloads = [...new Set(results.rows.map((row) => row.workload))];

  it('.md is what the bench writes for the .json, formatted', () => {
    // prettier's CLI formats as packages/devkit/src/cli/formatted.ts does (its API does not load inside jest).
    const markdown = spawnSync(
      process.execPath,
      [require.resolve('prettier/bin/prettier.cjs'), '--stdin-filepath', markdownPath],
      { input: renderMarkdown(results, workloads), encoding: 'utf8' },
    ).stdout;

    expect(readFileSync(markdownPath, 'utf8')).toBe(markdown);
  });

  it("charts each workload's throughput from the rows of the table", () => {
    const charts = [
      ...readFileSync(markdownPath, 'utf8').matchAll(
        /title "(.*): messages\/s.*"\n.*\n.*\n {2}bar \[(.*)\]/g,
      ),
    ];

    expect(charts.map((chart) => chart[1])).toEqual(workloads);
    for (const [, workload, bars] of charts) {
      expect(bars?.split(', ').map(Number)).toEqual(
        results.rows.filter((row) => row.workload === workload).map((row) => row.messagesPerSecond),
      );
    }
  });

  it('records the settings its printed command gives, the defaults of npm run bench -- --help included', () => {
    const help = String(
      spawnSync(process.execPath, [require.resolve('tsx/cli'), join(bench, 'run.ts'), '--help'], {
        encoding: 'utf8',
      }).stdout,
    );
    const defaults: Record<string, string> = Object.fromEntries(
      [...help.matchAll(/^ {2}--([\w-]+) <\w+> .*\(default (\d+)\)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']),
    );
    const given: Record<string, string> = Object.fromEntries(
      [...results.command.matchAll(/--([\w-]+) (\S+)/g)].map((m) => [m[1] ?? '', m[2] ?? '']),
    );
    const setting = (flag: string): number => Number(given[flag] ?? defaults[flag]);

    expect(results.command).toMatch(/^npm run bench( -- |$)/);
    expect(Object.keys(defaults)).toEqual(['messages', 'concurrency', 'latency-ms', 'seed', 'trials']);
    expect(results.settings).toEqual({
      messages: setting('messages'),
      concurrency: setting('concurrency'),
      latencyMs: setting('latency-ms'),
      seed: setting('seed'),
      trials: setting('trials'),
    });
    expect(readFileSync(markdownPath, 'utf8')).toContain(`\`${results.command}\``);
  });
});

describe('sample/bench/results: the outbox strategy (f)', () => {
  const { results } = committed[0] as (typeof committed)[number];
  const publishing = results.rows.filter((row) => row.key === 'f');

  it('ran on every workload, and only (f) carries relay figures', () => {
    expect(publishing.map((row) => row.workload)).toEqual([
      ...new Set(results.rows.map((row) => row.workload)),
    ]);
    expect(results.rows.filter((row) => row.relay).map((row) => row.key)).toEqual(publishing.map(() => 'f'));
  });

  it('commits each new message in one batch, the outbox message in it, and applies nothing twice', () => {
    for (const row of publishing) {
      expect(row.requestsPerNewMessage).toBe(1);
      expect(row.duplicateEffects).toBe(0);
    }
  });

  it("relays one message per payment, one dispatch patch each, and its per-message figures are its totals'", () => {
    for (const { messages, relay } of publishing) {
      if (!relay) throw new Error('no relay figures');
      expect(relay.outgoing).toBe(messages);
      expect(relay.dispatchRequests).toBe(relay.outgoing);
      // At most 100 changes a page: the invoices, markers and outbox documents, then the dispatch marks.
      expect(relay.changeFeedRequests).toBeGreaterThanOrEqual(Math.ceil((3 * messages) / 100));
      expect(relay.requestsPerMessage).toBe(
        Math.round(((relay.changeFeedRequests + relay.dispatchRequests) / relay.outgoing) * 100) / 100,
      );
      expect(relay.requestChargePerMessage).toBeCloseTo(
        (relay.changeFeedRequestCharge + relay.dispatchRequestCharge) / relay.outgoing,
        1,
      );
    }
  });
});
