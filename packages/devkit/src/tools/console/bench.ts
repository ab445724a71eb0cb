// The console's page load, measured in headless Chromium against the local stack filled with many
// documents and dead letters: the first view (the pipeline with its counts), a consumer's view (its
// inbox and outbox aggregates over every marker) and a page of its dead-letter queue (with the inbox
// state of each). Prints the median and the slowest of each over the runs; no assert: a benchmark.
//
//   npx tsx packages/devkit/src/tools/console/bench.ts [--documents 10000] [--dead-letters 1000] [--runs 5]

import { parseArgs } from 'node:util';

import { CosmosClient } from '@azure/cosmos';
import { ServiceBusClient } from '@azure/service-bus';
import { MARKER_TYPE } from '@idempotent-consumers/inbox/internal';
import { ensureAppContainer, startInWorker, startServiceBus } from '@idempotent-consumers/local-azure';

import { median } from '../../build/package';
import { appTopology, RETRY_COPIES } from '../../cli/project';
import { findChromium, launchBrowser } from './browser';
import { Feed } from './feed';
import { startLocalConsole } from './local';

const topology = appTopology();

const { values } = parseArgs({
  options: {
    documents: { type: 'string', default: '10000' },
    'dead-letters': { type: 'string', default: '1000' },
    runs: { type: 'string', default: '5' },
  },
});
const DOCUMENTS = Number(values.documents);
const DEAD_LETTERS = Number(values['dead-letters']);
const RUNS = Number(values.runs);
const SUBSCRIPTION = topology.topics[0]!.subscriptions[0]!;
const TOPIC = topology.topics[0]!.name;

async function main(): Promise<void> {
  const chromium = findChromium();
  if (chromium === undefined) throw new Error('No Chromium: apt-get install chromium, or set CHROMIUM_PATH.');
  const cosmos = await startInWorker({ port: 0 });
  const serviceBus = await startServiceBus({ port: 0, topology, retryCopies: RETRY_COPIES });
  const cosmosClient = new CosmosClient({ endpoint: cosmos.endpoint, key: cosmos.key });
  const database = (await cosmosClient.databases.createIfNotExists({ id: 'app' })).database;
  const container = await ensureAppContainer(database, 'state');
  const client = new ServiceBusClient(serviceBus.connectionString);
  try {
    process.stdout.write(`Seeding ${DOCUMENTS} documents (half of them ${SUBSCRIPTION.name}'s markers)...\n`);
    await seedDocuments(container);
    process.stdout.write(`Seeding ${DEAD_LETTERS} dead letters in ${SUBSCRIPTION.name}...\n`);
    await seedDeadLetters(client);
    const console = await startLocalConsole({
      port: 0,
      serviceBus,
      run: {
        pid: process.pid,
        startedAt: new Date().toISOString(),
        environment: {
          SERVICEBUS_CONNECTION_STRING: serviceBus.connectionString,
          COSMOS_ENDPOINT: cosmos.endpoint,
          COSMOS_KEY: cosmos.key,
          COSMOS_DATABASE: 'app',
          COSMOS_CONTAINER: 'state',
        },
      },
      duplicateWindowSeconds: 3600,
      app: () => undefined,
      topology: () => topology,
      feed: new Feed(() => undefined),
    });
    const browser = await launchBrowser(chromium);
    const timings: Record<'first view' | 'consumer' | 'dead letters', number[]> = {
      'first view': [],
      consumer: [],
      'dead letters': [],
    };
    for (let run = 1; run <= RUNS; run++) {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      let started = performance.now();
      await page.goto(console.url);
      await page.waitForSelector(`[data-counts="${SUBSCRIPTION.name}"]`);
      timings['first view'].push(performance.now() - started);
      started = performance.now();
      await page.click(`[data-subscription="${SUBSCRIPTION.name}"]`);
      await page.waitForSelector('#open-dead-letters');
      timings.consumer.push(performance.now() - started);
      started = performance.now();
      await page.click('#open-dead-letters');
      await page.waitForSelector('table.dead-letters tbody tr');
      timings['dead letters'].push(performance.now() - started);
      await page.close();
      process.stdout.write(`run ${run}/${RUNS} done\n`);
    }
    await browser.close();
    await console.stop();
    process.stdout.write(
      `\n${DOCUMENTS} documents, ${DEAD_LETTERS} dead letters, ${RUNS} runs (ms):\n` +
        '| view | median | slowest |\n| --- | ---: | ---: |\n' +
        Object.entries(timings)
          .map(([view, ms]) => `| ${view} | ${Math.round(median(ms))} | ${Math.round(Math.max(...ms))} |`)
          .join('\n') +
        '\n',
    );
  } finally {
    await client.close();
    cosmosClient.dispose();
    await serviceBus.stop();
    await cosmos.stop();
  }
}

/** Half markers of the first consumer, half business documents, in partitions of ten. */
async function seedDocuments(container: Awaited<ReturnType<typeof ensureAppContainer>>): Promise<void> {
  const now = Math.floor(Date.now() / 1000);
  const documents = Array.from({ length: DOCUMENTS }, (_, i) => {
    const partitionKey = `bench:${Math.floor(i / 10)}`;
    return i % 2 === 0
      ? {
          id: `inbox-bench-${i}`,
          partitionKey,
          type: MARKER_TYPE,
          consumer: SUBSCRIPTION.name,
          messageId: `bench-${i}`,
          payloadHash: 'x',
          processedAt: new Date((now - i) * 1000).toISOString(),
          processedAtEpochSeconds: now - i,
          expiresAtEpochSeconds: now - i + 604_800,
          deliveryCount: 1,
        }
      : { id: `state-${i}`, partitionKey, type: 'bench-state', amount: i };
  });
  for (let i = 0; i < documents.length; i += 50) {
    await Promise.all(documents.slice(i, i + 50).map((document) => container.items.create(document)));
  }
}

/** Sent to the subscription, then received and dead-lettered, as a poison message ends there. */
async function seedDeadLetters(client: ServiceBusClient): Promise<void> {
  const sender = client.createSender(TOPIC);
  for (let i = 0; i < DEAD_LETTERS; i += 100) {
    await sender.sendMessages(
      Array.from({ length: Math.min(100, DEAD_LETTERS - i) }, (_, j) => ({
        messageId: `dead-${i + j}`,
        subject: SUBSCRIPTION.subjects[0],
        body: 'not JSON',
      })),
    );
  }
  await sender.close();
  const receiver = client.createReceiver(TOPIC, SUBSCRIPTION.name);
  let left = DEAD_LETTERS;
  while (left > 0) {
    const batch = await receiver.receiveMessages(100, { maxWaitTimeInMs: 2000 });
    for (const message of batch) {
      await receiver.deadLetterMessage(message, {
        deadLetterReason: 'Bench',
        deadLetterErrorDescription: 'seeded',
      });
    }
    left -= batch.length;
    if (batch.length === 0) break;
  }
  await receiver.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
