import { join } from 'node:path';

import { type Container, CosmosClient } from '@azure/cosmos';
import {
  commandWithFlags,
  EXIT_CODES,
  type ExitCode,
  type FlagValues,
  runCommand,
  type ToolContext,
  writeFormatted,
} from '@idempotent-consumers/devkit';
import {
  processDelivery,
  type ProcessDependencies,
  type PurgeReport,
  runPurge,
} from '@idempotent-consumers/inbox/internal';
import {
  type ClientUsage,
  ensureAppContainer,
  startCosmos as start,
} from '@idempotent-consumers/local-azure';

import { paymentApplier } from '../src';

/**
 * The payment applier without its opt-in event key: the purge's load is the markers, as when the
 * committed figures (bench/purge.md) were measured; an event key would add one document per message.
 */
const markersOnly = { ...paymentApplier, eventKey: undefined };
import { openInvoice, paymentDelivery } from './strategies';

/**
 * Consumer throughput on the local Cosmos server in provisioned mode, with no purge, with a large
 * purge running as it ran before it had a budget, and with the purge at its request-unit budget.
 * `npm run bench:purge` prints the figures; `-- --record` also writes sample/bench/purge.md.
 */
export interface PurgeUnderLoadOptions {
  /** Provisioned throughput of the local server, RU/s. */
  throughput: number;
  /** Expired markers the purge finds. */
  markers: number;
  /** Payments processed in each phase. */
  messages: number;
  concurrency: number;
  /** The purge's PURGE_MAX_RU_PER_SECOND. */
  purgeBudget: number;
  /** The purge's PURGE_MAX_DURATION, in ms. */
  purgeMaxDurationMs: number;
}

export interface Phase {
  name: string;
  messagesPerSecond: number;
  /** Deliveries that threw (a 429 after the SDK's own retries) and were redelivered. */
  redelivered: number;
  /** Messages that failed 10 deliveries (Service Bus would dead-letter them). */
  deadLettered: number;
  /** 429s the consumers were answered (the SDK retried them). */
  consumerThrottled: number;
  purge?: PurgeReport & {
    /** What the server counted for the purge's client, RU/s over its first to last request. */
    serverRuPerSecond: number;
    serverUsage: ClientUsage;
    budget: number | undefined;
  };
}

const DAY_MS = 86_400_000;
const INVOICES = 50;

export async function measurePurgeUnderLoad(options: PurgeUnderLoadOptions): Promise<Phase[]> {
  const server = await start({ seed: 1 });
  const clientFor = (who: string): CosmosClient =>
    new CosmosClient({ endpoint: server.endpoint, key: server.key, userAgentSuffix: who });
  const setup = clientFor('setup');
  const { database } = await setup.databases.createIfNotExists({ id: 'app' });
  const setupContainer = await ensureAppContainer(database);
  for (let i = 0; i < INVOICES; i++) {
    await setupContainer.items.create(openInvoice(`INV-${i}`));
  }
  let sent = 0;
  const consume = async (
    container: Container,
    count: number,
    ageDays: number,
  ): Promise<{ redelivered: number; deadLettered: number }> => {
    const deps: ProcessDependencies = {
      container,
      settings: { inbox: { retentionSeconds: 30 * 86_400, ttlBackstopSeconds: 7 * 86_400, maxAttempts: 5 } },
      now: () => new Date(Date.now() - ageDays * DAY_MS),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      random: Math.random,
    };
    const first = sent;
    sent += count;
    // A delivery that throws (a 429 past the SDK's retries) is given back and redelivered, as Service
    // Bus does; at the 10th delivery it would be dead-lettered.
    const queue = Array.from({ length: count }, (_, i) => ({ n: first + i, deliveryCount: 1 }));
    const outcome = { redelivered: 0, deadLettered: 0 };
    const worker = async (): Promise<void> => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        const { n, deliveryCount } = next;
        const body = { paymentId: `PAY-${n}`, invoiceId: `INV-${n % INVOICES}`, amount: 1, currency: 'EUR' };
        try {
          await processDelivery(markersOnly, paymentDelivery(body, `payment-${n}`, deliveryCount), deps);
        } catch {
          if (deliveryCount >= 10) outcome.deadLettered++;
          else {
            outcome.redelivered++;
            queue.push({ n, deliveryCount: deliveryCount + 1 });
          }
        }
      }
    };
    await Promise.all(Array.from({ length: options.concurrency }, worker));
    return outcome;
  };

  const phases: Phase[] = [];
  const run = async (name: string, budget: number | 'none' | undefined): Promise<void> => {
    // Markers of 40 days ago (expired at the 30-day retention), written with no limit, then the budget.
    server.setThroughput(undefined);
    if (budget !== 'none') await consume(setupContainer, options.markers, 40);
    server.setThroughput(options.throughput);
    const consumers = clientFor(`consumers-${phases.length}`);
    const purgeClient = clientFor(`purge-${phases.length}`);
    const purge =
      budget === 'none'
        ? undefined
        : runPurge(purgeClient.database('app').container('state'), {
            now: new Date(),
            maxItems: 5000, // PURGE_MAX_ITEMS
            maxDurationMs: options.purgeMaxDurationMs,
            ...(budget === undefined ? {} : { maxRequestUnitsPerSecond: budget }),
          });
    const started = performance.now();
    const { redelivered, deadLettered } = await consume(
      consumers.database('app').container('state'),
      options.messages,
      0,
    );
    const seconds = (performance.now() - started) / 1000;
    const report = await purge;
    const usage = server.usageByClient();
    const of = (who: string): ClientUsage | undefined => usage.find((u) => u.userAgent.endsWith(` ${who}`));
    const purgeUsage = of(`purge-${phases.length}`);
    phases.push({
      name,
      messagesPerSecond: Math.round((options.messages / seconds) * 10) / 10,
      redelivered,
      deadLettered,
      consumerThrottled: of(`consumers-${phases.length}`)?.throttled ?? 0,
      ...(report && purgeUsage
        ? {
            purge: {
              ...report,
              serverUsage: purgeUsage,
              serverRuPerSecond:
                Math.round(
                  (purgeUsage.requestCharge /
                    Math.max(0.001, (purgeUsage.lastAtMs - purgeUsage.firstAtMs) / 1000)) *
                    10,
                ) / 10,
              budget: budget === 'none' ? undefined : budget,
            },
          }
        : {}),
    });
    consumers.dispose();
    purgeClient.dispose();
  };

  try {
    await run('no purge', 'none');
    await run('purge without a budget (before)', undefined);
    await run(`purge at PURGE_MAX_RU_PER_SECOND=${options.purgeBudget}`, options.purgeBudget);
  } finally {
    setup.dispose();
    await server.stop();
  }
  return phases;
}

export function table(phases: Phase[]): string {
  const rows = phases.map((phase) => {
    const purge = phase.purge;
    return `| ${phase.name} | ${phase.messagesPerSecond} | ${phase.consumerThrottled} | ${phase.redelivered} | ${phase.deadLettered} | ${
      purge ? `${purge.purged} (${purge.stoppedBy})` : '-'
    } | ${purge ? purge.serverRuPerSecond : '-'} | ${purge ? purge.throttled : '-'} |`;
  });
  return [
    '| phase | consumer messages/s | consumer 429s (retried by the SDK) | redelivered (429 past the SDK retries) | dead-lettered | markers purged | purge RU/s (server count) | purge 429s |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

const DEFAULTS: PurgeUnderLoadOptions = {
  throughput: 1000,
  markers: 3000,
  messages: 1000,
  concurrency: 16,
  purgeBudget: 100,
  purgeMaxDurationMs: 60_000,
};

const USAGE = `Usage: npm run bench:purge -- [options]

Consumer throughput on the local Cosmos DB server at ${DEFAULTS.throughput} RU/s with no purge, an unbudgeted purge and a
budgeted purge running; prints the figures.

  --record    also write them to sample/bench/purge.md
  -h, --help`;

const FLAGS = {
  options: {
    record: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
} as const;

async function main(values: FlagValues<typeof FLAGS>, context: ToolContext): Promise<ExitCode> {
  const phases = await measurePurgeUnderLoad(DEFAULTS);
  const figures = table(phases);
  context.out(figures);
  if (values.record) {
    const command = `npm run bench:purge -- --record`;
    const text = [
      '# Consumer throughput with a purge running',
      '',
      `Written by \`${command}\` (\`sample/bench/purgeUnderLoad.ts\`): the local Cosmos server at ${DEFAULTS.throughput} RU/s ` +
        `(its provisioned-throughput mode; request charges are its estimates), ${DEFAULTS.messages} payments per phase ` +
        `through \`processDelivery\` (${DEFAULTS.concurrency} in flight), and in the purge phases ${DEFAULTS.markers} ` +
        'expired markers. Consumer messages/s is measured while the purge runs; the purge RU/s is what the server ' +
        "counted for the purge's client from its first request to its last. Figures from one run on one machine: " +
        'compare the rows, not the absolute numbers.',
      '',
      figures,
      '',
    ].join('\n');
    const path = join('sample', 'bench', 'purge.md');
    await writeFormatted(path, text);
    context.out(`Wrote ${path}.`);
  }
  return EXIT_CODES.ok;
}

export const command = commandWithFlags('bench:purge', FLAGS, USAGE, main, { exitWhenDone: true });

if (require.main === module) runCommand(command);
