import { readFileSync, statSync } from 'node:fs';
import { cpus, platform, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { ChangeFeedStartFrom, type Container, CosmosClient, StatusCodes } from '@azure/cosmos';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  runCommand,
  startProgress,
  type ToolContext,
  UsageError,
} from '@idempotent-consumers/devkit';
import {
  type Delivery,
  type OutboxMessage,
  type OutboxPublisher,
  type ProcessDependencies,
  relayOutbox,
} from '@idempotent-consumers/inbox/internal';
import { freshAppContainer, integer, seededRandom, startInWorker } from '@idempotent-consumers/local-azure';

import {
  medianBy,
  pairedRatio,
  type Ratio,
  type RelayFigures,
  type Results,
  round2,
  type Row,
  writeResults,
} from './report';
import { BenchInvariantError, openInvoice, paymentDelivery, STRATEGIES, type Strategy } from './strategies';

/**
 * npm run bench: the six strategies of strategies.ts against the local Cosmos DB server with a
 * per-request latency, on the same workloads and concurrency. Runs the build tsc compiles (what is
 * deployed), measures throughput and the main thread's CPU per message, and for the strategy that
 * publishes, the outbox relay's requests and request units afterwards; prints a table, writes
 * JSON and markdown next to this file.
 */
const USAGE = `Usage: npm run bench -- [options]

  --messages <n>      payments per run (default 1500)
  --concurrency <n>   deliveries in flight (default 16)
  --latency-ms <ms>   added to every Cosmos DB request (default 3)
  --seed <n>          seed for the workload (default 1)
  --trials <n>        runs of each strategy per workload; medians are reported (default 3)
  --out <directory>   where results.json and results.md go (default sample/bench)
  --before <file>     an earlier results.json to compare with (before and after a change)
  --strategies <keys> which of a, b, c, d, e, f to run (default abcdef); one alone suits a CPU profile
  -h, --help`;

const FLAGS = {
  options: {
    messages: { type: 'string', default: '1500' },
    concurrency: { type: 'string', default: '16' },
    'latency-ms': { type: 'string', default: '3' },
    seed: { type: 'string', default: '1' },
    trials: { type: 'string', default: '3' },
    out: { type: 'string', default: join('sample', 'bench') },
    before: { type: 'string' },
    strategies: { type: 'string', default: 'abcdef' },
    help: { type: 'boolean', short: 'h', default: false },
  },
} as const;

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

const MAX_DELIVERIES = 10;

/** A delivery to make, and whether it repeats one made before (a redelivery of the same message). */
interface Queued {
  delivery: Delivery;
  duplicate: boolean;
}

/** What the benchmark was asked for, validated before anything starts. */
interface BenchRequest {
  messages: number;
  concurrency: number;
  latencyMs: number;
  seed: number;
  trialCount: number;
  out: string;
  before: ReturnType<typeof readBefore> | undefined;
  chosen: Strategy[];
  /** Both (a) and (d): the paired (d)/(a) ratios are computed. */
  paired: boolean;
}

async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  const request = benchRequest(values);
  const { messages, concurrency, latencyMs, seed, trialCount } = request;
  context.err(
    `Benchmark: ${messages} messages per run, concurrency ${concurrency}, ${latencyMs} ms per Cosmos DB request, ` +
      `median of ${trialCount} trials`,
  );
  const { rows, ratios } = await measure(request, context);
  const results: Results = {
    command: ['npm run bench', ...(argv.length > 0 ? ['--', ...argv] : [])].join(' '),
    machine: machineOf(),
    settings: { messages, concurrency, latencyMs, seed, trials: trialCount },
    rows,
    ratios,
    before: request.before,
  };
  context.out(
    await writeResults(
      request.out,
      results,
      WORKLOADS.map((workload) => workload.name),
    ),
  );
  for (const ratio of results.ratios)
    context.err(
      `(d)/(a) ${ratio.workload.padEnd(34)} CPU per message ${ratio.cpuPerMessage.toFixed(2)}× · throughput ${ratio.throughput.toFixed(2)}×`,
    );
  return EXIT_CODES.ok;
}

function benchRequest(values: ReturnType<typeof parseFlags<typeof FLAGS>>['values']): BenchRequest {
  const latencyMs = Number(values['latency-ms']);
  if (!(latencyMs >= 0)) throw usageError(`--latency-ms must be 0 or more; got '${values['latency-ms']}'.`);
  if (!statSync(values.out, { throwIfNoEntry: false })?.isDirectory())
    throw usageError(`--out must be an existing directory; got '${values.out}'.`);
  const chosen = STRATEGIES.filter((strategy) => values.strategies.includes(strategy.key));
  if (chosen.length === 0 || /[^a-f,]/.test(values.strategies))
    throw usageError(`--strategies takes letters from a to f; got '${values.strategies}'.`);
  return {
    messages: positive('messages', values.messages),
    concurrency: positive('concurrency', values.concurrency),
    latencyMs,
    seed: positive('seed', values.seed),
    trialCount: positive('trials', values.trials),
    out: values.out,
    before: values.before === undefined ? undefined : readBefore(values.before),
    chosen,
    paired: values.strategies.includes('a') && values.strategies.includes('d'),
  };
}

/**
 * Runs the chosen strategies on every workload, after a warm-up, on a local Cosmos DB server on its
 * own thread (in Azure, Cosmos DB's work is not the app's CPU): the medians of each, and the paired
 * (d)/(a) ratios.
 */
async function measure(
  request: BenchRequest,
  context: ToolContext,
): Promise<{ rows: Row[]; ratios: Ratio[] }> {
  const { messages, concurrency, latencyMs, seed, trialCount, chosen } = request;
  const warmUpMessages = Math.min(300, messages);
  const progress = startProgress({
    label: 'bench',
    total: chosen.length * (warmUpMessages + WORKLOADS.length * trialCount * messages),
    unit: 'messages',
    write: context.err,
    interactive: process.stderr.isTTY,
  });
  const server = await startInWorker({ latencyMs, seed });
  const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
  const { database } = await client.databases.createIfNotExists({ id: 'bench' });
  const run = async (strategy: Strategy, workload: Workload, count: number): Promise<Row> => {
    const row = await runOne(strategy, workload, {
      messages: count,
      concurrency,
      seed,
      container: await freshAppContainer(database),
      requests: () => server.requestCounts(),
    });
    progress.advance(count);
    return row;
  };
  const rows: Row[] = [];
  const ratios: Ratio[] = [];
  try {
    // Warm-up, not measured: the first runs would otherwise pay for JIT compilation and connections.
    for (const strategy of chosen) await run(strategy, WORKLOADS[1] as Workload, warmUpMessages);
    for (const workload of WORKLOADS) {
      // Several trials, the strategies taking turns within each (in reverse order every other
      // trial), keeping each strategy's medians: a shared machine's slow moments then fall on every
      // strategy alike.
      const trials: Row[][] = [];
      for (let trial = 0; trial < trialCount; trial++) {
        const rowsOfTrial: Row[] = [];
        for (const strategy of trial % 2 === 0 ? chosen : [...chosen].reverse())
          rowsOfTrial.push(await run(strategy, workload, messages));
        trials.push(rowsOfTrial);
      }
      if (request.paired) ratios.push(pairedRatio(workload.name, trials));
      for (const strategy of chosen) {
        const row = medianRow(trials.flatMap((trial) => trial.filter((r) => r.key === strategy.key)));
        rows.push(row);
        for (const line of rowLines(workload, row)) context.err(line);
      }
    }
    progress.finish();
  } finally {
    client.dispose();
    await server.stop();
  }
  return { rows, ratios };
}

/** A strategy's row of one workload: the run with the median throughput, with the median CPU per message. */
function medianRow(runs: Row[]): Row {
  return {
    ...medianBy(runs, (run) => run.messagesPerSecond),
    cpuMicrosPerMessage: medianBy(runs, (run) => run.cpuMicrosPerMessage).cpuMicrosPerMessage,
  };
}

/** A row's progress lines on stderr. */
function rowLines(workload: Workload, row: Row): string[] {
  const lines = [
    `  ${workload.name.padEnd(34)} (${row.key}) ${String(row.messagesPerSecond).padStart(6)} msg/s · ` +
      `${String(row.cpuMicrosPerMessage).padStart(5)} µs CPU/msg · ${row.requestsPerMessage.toFixed(2)} req/msg · ` +
      `p99 ${row.p99Ms} ms · duplicate effects ${row.duplicateEffects}`,
  ];
  if (row.relay)
    lines.push(
      `  ${''.padEnd(34)}     relay: ${row.relay.outgoing} messages · ${row.relay.changeFeedRequests} change feed requests ` +
        `(${row.relay.changeFeedRequestCharge} RU) · ${row.relay.dispatchRequests} dispatch patches (${row.relay.dispatchRequestCharge} RU) · ` +
        `${row.relay.requestsPerMessage.toFixed(2)} req and ${row.relay.requestChargePerMessage.toFixed(2)} RU per message`,
    );
  return lines;
}

/** The machine the figures were measured on, for the results file. */
function machineOf(): Results['machine'] {
  return {
    date: new Date().toISOString().slice(0, 10),
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${platform()} ${release()}`,
    node: process.version,
  };
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
    await options.container.items.create(openInvoice(`INV-${i}`));
  }

  // Every payment is 1.00, so duplicate effects = (paid - expected) / 100. A duplicate delivery is a
  // redelivery of the same message: half right behind the first (likely overlapping it, like a lock
  // that ran out), half later in the stream.
  const queue: Queued[] = [];
  let duplicates = 0;
  for (let n = 0; n < options.messages; n++) {
    const body = { paymentId: `PAY-${n}`, invoiceId: `INV-${n % invoiceCount}`, amount: 1, currency: 'EUR' };
    queue.push({ delivery: paymentDelivery(body, `payment-${n}`, 1), duplicate: false });
    if (random() < workload.duplicateShare) {
      duplicates++;
      const again = { delivery: paymentDelivery(body, `payment-${n}`, 2), duplicate: true };
      if (random() < 0.5) queue.push(again);
      else queue.splice(integer(random, queue.length, queue.length + 50), 0, again);
    }
  }

  // Built once per run, as the app builds its dependencies once per process (src/app.ts).
  const dependencies: ProcessDependencies = {
    container: options.container,
    settings: { inbox: { retentionSeconds: 30 * 86_400, ttlBackstopSeconds: 7 * 86_400, maxAttempts: 5 } },
    now: () => new Date(),
    sleep: (ms) => sleep(ms),
    random: Math.random,
  };
  const requestsBefore = await options.requests();
  const latencies: number[] = [];
  const newRequests: number[] = [];
  const duplicateRequests: number[] = [];
  let redeliveries = 0;
  let deliveries = 0;
  const cpuBefore = process.threadCpuUsage();
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      deliveries++;
      const t = performance.now();
      try {
        const result = await strategy.handle(next.delivery, dependencies);
        latencies.push(performance.now() - t);
        (next.duplicate ? duplicateRequests : newRequests).push(result.requests);
      } catch (error) {
        latencies.push(performance.now() - t);
        const { deliveryCount, messageId } = next.delivery;
        if (error instanceof BenchInvariantError) throw error;
        if (deliveryCount >= MAX_DELIVERIES)
          throw new Error(`(${strategy.key}) gave up on ${messageId}: ${(error as Error).message}`);
        redeliveries++;
        queue.push({ ...next, delivery: { ...next.delivery, deliveryCount: deliveryCount + 1 } });
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const elapsedMs = performance.now() - started;
  const cpu = process.threadCpuUsage(cpuBefore);
  const requestsAfter = await options.requests();
  const dataRequests = ['read', 'write', 'batch', 'query'].reduce(
    (sum, kind) => sum + (requestsAfter[kind] ?? 0) - (requestsBefore[kind] ?? 0),
    0,
  );

  const { resources } = await options.container.items
    .query<number>({ query: 'SELECT VALUE SUM(c.paidMinor) FROM c WHERE c.type = "invoice"' })
    .fetchAll();
  const paid = resources.reduce((sum, value) => sum + value, 0);
  const relay = strategy.publishes ? await measureRelay(options.container, options.requests) : undefined;
  if (relay && relay.outgoing !== options.messages)
    throw new BenchInvariantError(
      `(${strategy.key}) published ${relay.outgoing} messages for ${options.messages} payments; expected one each.`,
    );
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
    cpuMicrosPerMessage: Math.round((cpu.user + cpu.system) / options.messages),
    requestsPerMessage: round2(dataRequests / options.messages),
    requestsPerNewMessage: round2(mean(newRequests)),
    requestsPerDuplicate: duplicates === 0 ? null : round2(mean(duplicateRequests)),
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    duplicateEffects: Math.round((paid - options.messages * 100) / 100),
    redeliveries,
    ...(relay ? { relay } : {}),
  };
}

/** The relay's settings: the defaults of packages/inbox/src/settings.ts (only the dispatched ttl matters here). */
const OUTBOX_DEFAULTS = {
  sweepAgeSeconds: 300,
  sweepIntervalSeconds: 60,
  sweepMaxItems: 500,
  dispatchedRetentionSeconds: 86_400,
};

/**
 * The outbox relay's work on what a run left, not timed: the container's change feed read from the
 * beginning as the Cosmos DB trigger reads it (100 changes a page, its maxItemsPerInvocation), each
 * page handed to the relay, until a read finds nothing new. The pages hold every change (invoices,
 * markers, outbox documents), and the relay's own dispatch marks come back as changes in later
 * pages, which it passes over, as in Azure. The publisher only counts: the bench measures Cosmos DB.
 */
async function measureRelay(
  container: Container,
  requests: () => Promise<Record<string, number>>,
): Promise<RelayFigures> {
  let published = 0;
  const publisher: OutboxPublisher = {
    send: (_topic: string, messages: readonly OutboxMessage[]) => {
      published += messages.length;
      return Promise.resolve([]);
    },
    close: () => Promise.resolve(),
  };
  const relayDependencies = {
    container,
    publisher,
    now: () => new Date(),
    settings: { outbox: OUTBOX_DEFAULTS },
  };
  const before = await requests();
  const iterator = container.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Beginning(),
    maxItemCount: 100,
  });
  let changeFeedRequests = 0;
  let changeFeedRequestCharge = 0;
  let dispatchRequests = 0;
  let dispatchRequestCharge = 0;
  let outgoing = 0;
  for (;;) {
    const page = await iterator.readNext();
    changeFeedRequests++;
    changeFeedRequestCharge += page.requestCharge;
    if (page.statusCode === StatusCodes.NotModified) break;
    const report = await relayOutbox(page.result, relayDependencies);
    outgoing += report.sent;
    dispatchRequests += report.marked + report.alreadyMarked;
    dispatchRequestCharge += report.requestCharge;
  }
  const after = await requests();
  // Every request the relay made is one of these (the SDK's metadata reads aside): nothing else ran.
  const served = ['read', 'write', 'batch', 'query'].reduce(
    (sum, kind) => sum + (after[kind] ?? 0) - (before[kind] ?? 0),
    0,
  );
  if (served !== changeFeedRequests + dispatchRequests || published !== outgoing)
    throw new BenchInvariantError(
      `The relay counted ${changeFeedRequests} change feed reads, ${dispatchRequests} patches and ${outgoing} messages; ` +
        `the server served ${served} requests and the publisher took ${published} messages.`,
    );
  return {
    outgoing,
    changeFeedRequests,
    changeFeedRequestCharge: round2(changeFeedRequestCharge),
    dispatchRequests,
    dispatchRequestCharge: round2(dispatchRequestCharge),
    requestsPerMessage: round2((changeFeedRequests + dispatchRequests) / Math.max(1, outgoing)),
    requestChargePerMessage: round2(
      (changeFeedRequestCharge + dispatchRequestCharge) / Math.max(1, outgoing),
    ),
  };
}

function readBefore(path: string): NonNullable<Results['before']> {
  try {
    const { command, machine, rows, ratios } = JSON.parse(readFileSync(path, 'utf8')) as Results;
    if (!Array.isArray(rows) || !Array.isArray(ratios)) throw new Error('it has no rows and ratios');
    return { command, machine, rows, ratios };
  } catch (error) {
    throw usageError(
      `--before must be a results.json the bench wrote; '${path}': ${(error as Error).message}`,
    );
  }
}

function positive(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw usageError(`--${name} must be a positive integer; got '${text}'.`);
  return value;
}

const usageError = (message: string): UsageError => new UsageError(`${message}\n${USAGE}`);

export const command: Command = { name: 'bench', main, exitWhenDone: true };

if (require.main === module) runCommand(command);
