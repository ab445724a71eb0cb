import { join } from 'node:path';

import { writeFormatted } from '@idempotent-consumers/devkit';

import type { Strategy } from './strategies';

/** One strategy on one workload: the median trial by throughput, and the median CPU per message. */
export interface Row {
  workload: string;
  strategy: string;
  key: Strategy['key'];
  messages: number;
  deliveries: number;
  messagesPerSecond: number;
  /** Main-thread CPU (user + system) while the strategy ran, per message, in microseconds. */
  cpuMicrosPerMessage: number;
  requestsPerMessage: number;
  requestsPerNewMessage: number;
  requestsPerDuplicate: number | null;
  p50Ms: number;
  p99Ms: number;
  duplicateEffects: number;
  redeliveries: number;
  /** For a strategy that publishes (f): the outbox relay's work afterwards, in the same trial. */
  relay?: RelayFigures;
}

/**
 * The outbox relay on what one run of (f) left: the container's change feed read from the
 * beginning, 100 changes a page, each page relayed (sent, then each message marked dispatched by a
 * conditional patch). Request units are the local server's estimates (packages/local-azure/src/cosmos/requestCharge.ts).
 */
export interface RelayFigures {
  /** Messages the relay sent: one per payment. */
  outgoing: number;
  /** Change feed reads, the last one finding nothing new. */
  changeFeedRequests: number;
  changeFeedRequestCharge: number;
  /** The dispatch marks: one patch per message. */
  dispatchRequests: number;
  dispatchRequestCharge: number;
  /** Change feed reads and patches, per message sent. */
  requestsPerMessage: number;
  requestChargePerMessage: number;
}

/** This template's batch (d) against the naive write (a): in each trial (d)'s figure over (a)'s, median over trials. */
export interface Ratio {
  workload: string;
  cpuPerMessage: number;
  throughput: number;
}

export interface Results {
  /** What produced these figures, as a user types it. */
  command: string;
  machine: Record<string, string | number>;
  settings: Record<string, number>;
  rows: Row[];
  ratios: Ratio[];
  /** An earlier run (--before), to show what a change did; each run's ratios come from its own strategies. */
  before?: Pick<Results, 'command' | 'machine' | 'rows' | 'ratios'>;
}

export const TARGETS = { cpuPerMessage: 1.1, throughput: 0.9 } as const;

/**
 * (d) against (a) on one workload. Each trial's pair ran moments apart, so a ratio within a trial
 * shares the machine's state of that moment; the median over trials then drops the odd moment.
 */
export function pairedRatio(workload: string, trials: Row[][]): Ratio {
  const pairs = trials.flatMap((trial) => {
    const a = trial.find((row) => row.key === 'a');
    const d = trial.find((row) => row.key === 'd');
    return a && d ? [{ a, d }] : [];
  });
  return {
    workload,
    cpuPerMessage: round2(
      medianBy(
        pairs.map(({ a, d }) => d.cpuMicrosPerMessage / a.cpuMicrosPerMessage),
        (ratio) => ratio,
      ),
    ),
    throughput: round2(
      medianBy(
        pairs.map(({ a, d }) => d.messagesPerSecond / a.messagesPerSecond),
        (ratio) => ratio,
      ),
    ),
  };
}

/** The item in the middle by `metric` (the upper one of two; NaN for none). */
export function medianBy<T>(items: T[], metric: (item: T) => number): T {
  return [...items].sort((x, y) => metric(x) - metric(y))[Math.floor(items.length / 2)] ?? (NaN as T);
}

export function renderMarkdown(results: Results, workloads: string[]): string {
  const { machine, settings } = results;
  const lines = [
    `\`${results.command}\`: ${settings.messages} payments per run, concurrency ${settings.concurrency}, ` +
      `${settings.latencyMs} ms added to every Cosmos DB request (local server on its own thread), seed ${settings.seed}, ` +
      `median of ${settings.trials} trials, compiled with tsc as deployed.`,
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}, Node.js ${machine.node}, ${machine.date}.`,
    '',
  ];
  if (results.ratios.length > 0) {
    lines.push(
      `**(d) against (a)** in this run: in each trial (d)'s figure over (a)'s, median over the trials ` +
        `(targets: CPU per message at most ${TARGETS.cpuPerMessage.toFixed(2)}×, throughput at least ${TARGETS.throughput.toFixed(2)}×):`,
      '',
      '| workload | CPU per message (d)/(a) | throughput (d)/(a) |',
      '| --- | ---: | ---: |',
      ...results.ratios.map(
        (ratio) =>
          `| ${ratio.workload} | ${ratio.cpuPerMessage.toFixed(2)} | ${ratio.throughput.toFixed(2)} |`,
      ),
      '',
    );
  }
  if (results.before) lines.push(...renderComparison(results.before, results, workloads));
  for (const workload of workloads) {
    const mine = results.rows.filter((row) => row.workload === workload);
    const baseline = mine.find((row) => row.key === 'a');
    lines.push(`**${workload}**`, '', ...throughputChart(workload, mine, results.settings.trials));
    lines.push(
      '| strategy | msg/s | msg/s × (a) | CPU µs/msg | CPU × (a) | requests/msg | per new msg | per duplicate | p50 ms | p99 ms | duplicate effects | redeliveries |',
    );
    lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const row of mine) {
      const times = (value: number, base: number | undefined): string =>
        base ? (value / base).toFixed(2) : '';
      lines.push(
        `| (${row.key}) ${row.strategy} | ${row.messagesPerSecond} | ${times(row.messagesPerSecond, baseline?.messagesPerSecond)} | ` +
          `${row.cpuMicrosPerMessage} | ${times(row.cpuMicrosPerMessage, baseline?.cpuMicrosPerMessage)} | ` +
          `${row.requestsPerMessage.toFixed(2)} | ${row.requestsPerNewMessage.toFixed(2)} | ${row.requestsPerDuplicate?.toFixed(2) ?? '–'} | ` +
          `${row.p50Ms} | ${row.p99Ms} | ${row.duplicateEffects} | ${row.redeliveries} |`,
      );
    }
    lines.push('');
  }
  lines.push(...renderRelay(results.rows));
  return lines.join('\n');
}

/** The outbox relay's requests and request units, for the rows that have them. */
function renderRelay(rows: Row[]): string[] {
  const relayed = rows.filter((row) => row.relay);
  if (relayed.length === 0) return [];
  return [
    `**Outbox relay**: after each run of ${[...new Set(relayed.map((row) => `(${row.key})`))].join(', ')}, ` +
      "its container's change feed read from the beginning as the Cosmos DB trigger reads it (100 changes a page), " +
      'each page handed to the relay (`relayOutbox`) with a publisher that only counts (no Service Bus), until a read finds nothing new. ' +
      'The pages hold every change (invoices, markers, outbox documents, and the dispatch marks the relay makes as it goes). ' +
      "The figures of the trial in the table above; request units are the local server's estimates, for comparing, not a bill.",
    '',
    '| workload | strategy | messages sent | change feed requests | change feed RU | dispatch patches | patch RU | requests per message sent | RU per message sent |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...relayed.map(({ workload, key, relay }) => {
      const figures = relay as RelayFigures;
      return (
        `| ${workload} | (${key}) | ${figures.outgoing} | ${figures.changeFeedRequests} | ${figures.changeFeedRequestCharge} | ` +
        `${figures.dispatchRequests} | ${figures.dispatchRequestCharge} | ${figures.requestsPerMessage.toFixed(2)} | ` +
        `${figures.requestChargePerMessage.toFixed(2)} |`
      );
    }),
    '',
  ];
}

/** The strategies' throughput on one workload as a Mermaid bar chart (GitHub renders it). */
function throughputChart(workload: string, rows: Row[], trials: number | undefined): string[] {
  const top = Math.max(0, ...rows.map((row) => row.messagesPerSecond));
  // A round axis end above the highest bar, so the bars compare at a glance.
  const step = 10 ** Math.max(1, Math.floor(Math.log10(Math.max(1, top))));
  return [
    '```mermaid',
    'xychart-beta',
    `  title "${workload}: messages/s, median of ${trials} trials"`,
    `  x-axis [${rows.map((row) => `"(${row.key})"`).join(', ')}]`,
    `  y-axis "messages/s" 0 --> ${Math.ceil((top + 1) / step) * step}`,
    `  bar [${rows.map((row) => row.messagesPerSecond).join(', ')}]`,
    '```',
    '',
  ];
}

/** (a) and (d) before and after, each run's ratios from its own strategies. */
function renderComparison(
  before: NonNullable<Results['before']>,
  after: Results,
  workloads: string[],
): string[] {
  const lines = [
    `**Before and after**: before is \`${before.command}\` on ${before.machine.date}, with Node.js ${before.machine.node}.`,
    '',
    '| workload | run | (a) CPU µs/msg | (d) CPU µs/msg | CPU (d)/(a) | (a) msg/s | (d) msg/s | msg/s (d)/(a) |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const workload of workloads) {
    for (const [run, results] of [
      ['before', before],
      ['after', after],
    ] as const) {
      const row = (key: Strategy['key']): Row | undefined =>
        results.rows.find((r) => r.workload === workload && r.key === key);
      const ratio = results.ratios.find((r) => r.workload === workload);
      lines.push(
        `| ${workload} | ${run} | ${row('a')?.cpuMicrosPerMessage ?? '–'} | ${row('d')?.cpuMicrosPerMessage ?? '–'} | ` +
          `${ratio?.cpuPerMessage.toFixed(2) ?? '–'} | ${row('a')?.messagesPerSecond ?? '–'} | ` +
          `${row('d')?.messagesPerSecond ?? '–'} | ${ratio?.throughput.toFixed(2) ?? '–'} |`,
      );
    }
  }
  lines.push('');
  return lines;
}

/**
 * Writes results.json and results.md into `directory`, formatted as the repository's prettier
 * config wants them, so that committing a run keeps `npm run format:check` green. Returns the markdown.
 */
export async function writeResults(
  directory: string,
  results: Results,
  workloads: string[],
): Promise<string> {
  await writeFormatted(join(directory, 'results.json'), JSON.stringify(results, null, 2));
  return writeFormatted(join(directory, 'results.md'), renderMarkdown(results, workloads));
}

export const round2 = (value: number): number => Math.round(value * 100) / 100;
