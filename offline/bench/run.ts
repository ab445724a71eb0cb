import { writeFileSync } from 'node:fs';
import { cpus, platform, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { type Container, CosmosClient } from '@azure/cosmos';

import type { Delivery, ProcessDependencies } from '../../src/inbox';
import { type Invoice, invoicePartition } from '../../src/sample';
import { freshAppContainer } from '../appContainer';
import { startInWorker } from '../cosmos/workerHost';
import { integer, seededRandom } from '../random';
import { strategies, type Strategy } from './strategies';

/**
 * npm run bench: the five strategies of strategies.ts against the local Cosmos DB server with a
 * per-request latency, on the same workloads and concurrency. Prints a table, writes JSON and
 * markdown next to this file.
 */
const usage = `Usage: npm run bench -- [--messages 1500] [--concurrency 16] [--latency-ms 3] [--seed 1] [--trials 3] [--out offline/bench]`;

interface Workload {
  name: string;
  duplicateShare: number;
  hotKey: boolean;
}

const WORKLOADS: Workload[] = [
  { name: 'distinct invoices, 0% duplicates', duplicateShare: 0, hotKey: false },
  { name: 'distinct invoices, 20% duplicates', duplicateShare: 0.2, hotKey: false },
  { name: 'one hot invoice, 20% duplicates', duplicateShare: 0.2, hotKey: true },
];

interface Row {
  workload: string;
  strategy: string;
  key: Strategy['key'];
  messages: number;
  deliveries: number;
  messagesPerSecond: number;
  requestsPerMessage: number;
  requestsPerNewMessage: number;
  requestsPerDuplicate: number | null;
  p50Ms: number;
  p99Ms: number;
  duplicateEffects: number;
  redeliveries: number;
}

const MAX_DELIVERIES = 10;

/** A delivery to make, and whether it repeats one made before (a redelivery of the same message). */
interface Queued {
  delivery: Delivery;
  duplicate: boolean;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      messages: { type: 'string', default: '1500' },
      concurrency: { type: 'string', default: '16' },
      'latency-ms': { type: 'string', default: '3' },
      seed: { type: 'string', default: '1' },
      trials: { type: 'string', default: '3' },
      out: { type: 'string', default: join('offline', 'bench') },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  const messages = positive('messages', values.messages);
  const concurrency = positive('concurrency', values.concurrency);
  const latencyMs = Number(values['latency-ms']);
  if (!(latencyMs >= 0)) throw new Error(`--latency-ms must be 0 or more; got '${values['latency-ms']}'.`);
  const seed = positive('seed', values.seed);
  const trialCount = positive('trials', values.trials);

  console.error(
    `Benchmark: ${messages} messages per run, concurrency ${concurrency}, ${latencyMs} ms per Cosmos DB request, ` +
      `median of ${trialCount} trials`,
  );
  // The server runs on its own thread: in Azure, Cosmos DB's work is not the app's CPU.
  const server = await startInWorker({ latencyMs, seed });
  const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
  const { database } = await client.databases.createIfNotExists({ id: 'bench' });
  const dependencies = (container: Container): ProcessDependencies => ({
    container,
    settings: { inbox: { retentionSeconds: 30 * 86_400, ttlBackstopSeconds: 7 * 86_400, maxAttempts: 5 } },
    now: () => new Date(),
    sleep: (ms) => sleep(ms),
    random: Math.random,
  });

  const rows: Row[] = [];
  try {
    // Warm-up, not measured: the first runs would otherwise pay for JIT compilation and connections.
    for (const strategy of strategies(dependencies)) {
      await runOne(strategy, WORKLOADS[1] as Workload, {
        messages: Math.min(300, messages),
        concurrency,
        seed,
        container: await freshAppContainer(database),
        requests: () => server.requestCounts(),
      });
    }
    for (const workload of WORKLOADS) {
      // Several trials, the strategies taking turns within each, keeping each strategy's median by
      // throughput: a shared machine's slow moments then fall on every strategy alike.
      const trials = new Map<Strategy['key'], Row[]>();
      for (let trial = 0; trial < trialCount; trial++) {
        for (const strategy of strategies(dependencies)) {
          const row = await runOne(strategy, workload, {
            messages,
            concurrency,
            seed,
            container: await freshAppContainer(database),
            requests: () => server.requestCounts(),
          });
          trials.set(strategy.key, [...(trials.get(strategy.key) ?? []), row]);
        }
      }
      for (const runs of trials.values()) {
        const row = runs.sort((x, y) => x.messagesPerSecond - y.messagesPerSecond)[
          Math.floor(runs.length / 2)
        ] as Row;
        rows.push(row);
        console.error(
          `  ${workload.name.padEnd(34)} (${row.key}) ${String(row.messagesPerSecond).padStart(6)} msg/s · ` +
            `${row.requestsPerMessage.toFixed(2)} req/msg · p99 ${row.p99Ms} ms · duplicate effects ${row.duplicateEffects}`,
        );
      }
    }
  } finally {
    client.dispose();
    await server.stop();
  }

  const machine = {
    date: new Date().toISOString().slice(0, 10),
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${platform()} ${release()}`,
    node: process.version,
  };
  const settings = { messages, concurrency, latencyMs, seed, trials: trialCount };
  const markdown = renderMarkdown(rows, machine, settings);
  writeFileSync(
    join(values.out, 'results.json'),
    `${JSON.stringify({ machine, settings, rows }, null, 2)}\n`,
  );
  writeFileSync(join(values.out, 'results.md'), markdown);
  console.log(markdown);
}

async function runOne(
  strategy: Strategy,
  workload: Workload,
  options: {
    messages: number;
    concurrency: number;
    seed: number;
    container: Container;
    requests: () => Promise<Record<string, number>>;
  },
): Promise<Row> {
  const random = seededRandom(options.seed);
  const invoiceCount = workload.hotKey ? 1 : Math.max(1, Math.ceil(options.messages / 4));
  for (let i = 0; i < invoiceCount; i++) {
    await options.container.items.create<Invoice>({
      id: `INV-${i}`,
      partitionKey: invoicePartition(`INV-${i}`),
      type: 'invoice',
      currency: 'EUR',
      totalMinor: Number.MAX_SAFE_INTEGER,
      paidMinor: 0,
      status: 'Open',
    });
  }

  // Every payment is 1.00, so duplicate effects = (paid - expected) / 100. A duplicate delivery is a
  // redelivery of the same message: half right behind the first (likely overlapping it, like a lock
  // that ran out), half later in the stream.
  const queue: Queued[] = [];
  let duplicates = 0;
  for (let n = 0; n < options.messages; n++) {
    const body = { paymentId: `PAY-${n}`, invoiceId: `INV-${n % invoiceCount}`, amount: 1, currency: 'EUR' };
    queue.push({ delivery: delivery(body, `payment-${n}`, 1), duplicate: false });
    if (random() < workload.duplicateShare) {
      duplicates++;
      const again = { delivery: delivery(body, `payment-${n}`, 2), duplicate: true };
      if (random() < 0.5) queue.push(again);
      else queue.splice(integer(random, queue.length, queue.length + 50), 0, again);
    }
  }

  const before = await options.requests();
  const latencies: number[] = [];
  const newRequests: number[] = [];
  const duplicateRequests: number[] = [];
  let redeliveries = 0;
  let deliveries = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      deliveries++;
      const t = performance.now();
      try {
        const result = await strategy.handle(next.delivery, options.container);
        latencies.push(performance.now() - t);
        (next.duplicate ? duplicateRequests : newRequests).push(result.requests);
      } catch (error) {
        latencies.push(performance.now() - t);
        const { deliveryCount, messageId } = next.delivery;
        if (deliveryCount >= MAX_DELIVERIES)
          throw new Error(`(${strategy.key}) gave up on ${messageId}: ${(error as Error).message}`);
        redeliveries++;
        queue.push({ ...next, delivery: { ...next.delivery, deliveryCount: deliveryCount + 1 } });
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const elapsedMs = performance.now() - started;
  const after = await options.requests();
  const dataRequests = ['read', 'write', 'batch', 'query'].reduce(
    (sum, kind) => sum + (after[kind] ?? 0) - (before[kind] ?? 0),
    0,
  );

  const { resources } = await options.container.items
    .query<number>({ query: 'SELECT VALUE SUM(c.paidMinor) FROM c WHERE c.type = "invoice"' })
    .fetchAll();
  const paid = resources.reduce((sum, value) => sum + value, 0);
  const sorted = latencies.sort((a, b) => a - b);
  const at = (q: number): number =>
    Math.round((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0) * 10) / 10;
  const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
  return {
    workload: workload.name,
    strategy: strategy.name,
    key: strategy.key,
    messages: options.messages,
    deliveries,
    messagesPerSecond: Math.round((options.messages / elapsedMs) * 1000),
    requestsPerMessage: round2(dataRequests / options.messages),
    requestsPerNewMessage: round2(mean(newRequests)),
    requestsPerDuplicate: duplicates === 0 ? null : round2(mean(duplicateRequests)),
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    duplicateEffects: Math.round((paid - options.messages * 100) / 100),
    redeliveries,
  };
}

function delivery(body: object, messageId: string, deliveryCount: number): Delivery {
  return {
    body,
    messageId,
    messageIdIsLossy: false,
    deliveryCount,
    enqueuedTimeUtc: new Date(),
    subject: 'PaymentReceived',
    correlationId: undefined,
    applicationProperties: {},
  };
}

function renderMarkdown(
  rows: Row[],
  machine: Record<string, unknown>,
  settings: Record<string, unknown>,
): string {
  const lines = [
    `Benchmark of ${String(settings.messages)} payments per run, concurrency ${String(settings.concurrency)}, ` +
      `${String(settings.latencyMs)} ms added to every Cosmos DB request (local server on its own thread), seed ${String(settings.seed)}, ` +
      `median of ${String(settings.trials)} trials.`,
    `Machine: ${String(machine.cpu)}, ${String(machine.cores)} cores, ${String(machine.memoryGiB)} GiB, ${String(machine.os)}, Node.js ${String(machine.node)}, ${String(machine.date)}.`,
    '',
  ];
  for (const workload of WORKLOADS) {
    const mine = rows.filter((row) => row.workload === workload.name);
    const baseline = mine.find((row) => row.key === 'a');
    lines.push(`**${workload.name}**`, '');
    lines.push(
      '| strategy | msg/s | × (a) | requests/msg | per new msg | per duplicate | p50 ms | p99 ms | duplicate effects | redeliveries |',
    );
    lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const row of mine) {
      const ratio = baseline ? (row.messagesPerSecond / baseline.messagesPerSecond).toFixed(2) : '';
      lines.push(
        `| (${row.key}) ${row.strategy} | ${row.messagesPerSecond} | ${ratio} | ${row.requestsPerMessage.toFixed(2)} | ` +
          `${row.requestsPerNewMessage.toFixed(2)} | ${row.requestsPerDuplicate?.toFixed(2) ?? '–'} | ${row.p50Ms} | ${row.p99Ms} | ` +
          `${row.duplicateEffects} | ${row.redeliveries} |`,
      );
    }
    lines.push('');
  }
  return `${lines.join('\n')}`;
}

function positive(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`--${name} must be a positive integer; got '${text}'.`);
  return value;
}

const round2 = (value: number): number => Math.round(value * 100) / 100;

main().catch((error: unknown) => {
  console.error(`bench: ${(error as Error).message}`);
  process.exit(1);
});
