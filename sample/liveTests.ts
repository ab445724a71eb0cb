import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ParseArgsConfig } from 'node:util';

import type { Container } from '@azure/cosmos';
import {
  type Command,
  connectServiceBus,
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  runCommand,
  type ToolContext,
  topicFor,
  toServiceBusMessage,
  UsageError,
} from '@idempotent-consumers/devkit';
import { createCosmosClient, loadSettings, MARKER_TYPE } from '@idempotent-consumers/inbox/internal';

import { type Invoice, invoicePartition, toMinorUnits } from './src/documents';
import { SAMPLE_EVENTS } from './src/events';

/**
 * Tests that need real services, each run only when its environment is there, each skipped with one
 * line saying why otherwise (and the script still exits 0, so CI without Azure stays green):
 *   1. the Cosmos DB conformance suite against a real account or the emulator (COSMOS_ENDPOINT + COSMOS_KEY);
 *   2. end to end against the deployed app (SERVICEBUS_NAMESPACE + COSMOS_ENDPOINT, identity): a
 *      fresh invoice, one PaymentReceived published twice with the same MessageId, and Cosmos DB
 *      polled until the invoice is paid exactly once and exactly one inbox marker records it.
 */
const USAGE = `Usage: npm run test:live -- [--timeout-seconds 180] [--settle-seconds 15]
Environment:
  COSMOS_ENDPOINT, COSMOS_KEY             the Cosmos DB conformance suite (an emulator, or an account that allows keys)
  SERVICEBUS_NAMESPACE, COSMOS_ENDPOINT   the end-to-end check against the deployed app (DefaultAzureCredential;
                                          COSMOS_KEY only for an emulator; COSMOS_DATABASE/COSMOS_CONTAINER default app/state)`;

export type Result = 'passed' | 'failed' | 'skipped';

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  const timeoutMs = seconds(values['timeout-seconds'] ?? '180', '--timeout-seconds') * 1000;
  const settleMs = seconds(values['settle-seconds'] ?? '15', '--settle-seconds') * 1000;

  const results: Record<string, Result> = {
    'cosmos conformance': await cosmosConformance(context),
    'end to end': await endToEnd(context, { timeoutMs, settleMs }),
  };
  context.out(
    `live tests: ${Object.entries(results)
      .map(([name, result]) => `${name} ${result}`)
      .join(', ')}`,
  );
  return Object.values(results).includes('failed') ? EXIT_CODES.failed : EXIT_CODES.ok;
}

async function cosmosConformance(context: ToolContext): Promise<Result> {
  const { COSMOS_ENDPOINT, COSMOS_KEY } = context.env;
  if (!COSMOS_ENDPOINT || !COSMOS_KEY) {
    context.out(
      'skip: Cosmos DB conformance suite: COSMOS_ENDPOINT and COSMOS_KEY are not set (it needs the emulator or an account that allows key auth).',
    );
    return 'skipped';
  }
  context.out(`Cosmos DB conformance suite against ${COSMOS_ENDPOINT}:`);
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    const child = spawn('npx', ['jest', 'packages/local-azure/test/cosmos/conformance', '--runInBand'], {
      env: { ...process.env, ...context.env },
      stdio: 'inherit',
    });
    child.on('error', reject);
    child.on('exit', resolve);
  });
  return exitCode === 0 ? 'passed' : 'failed';
}

interface Progress {
  paidMinor: number | undefined;
  markers: number;
}

/** Exported for the offline test, which runs it against the local peer, the local Cosmos server and the host model. */
export async function endToEnd(
  context: ToolContext,
  limits: { timeoutMs: number; settleMs: number },
): Promise<Result> {
  const env = context.env;
  const serviceBus = env.SERVICEBUS_NAMESPACE || env.SERVICEBUS_CONNECTION_STRING;
  if (!serviceBus || !env.COSMOS_ENDPOINT) {
    const missing = [
      serviceBus ? [] : ['SERVICEBUS_NAMESPACE'],
      env.COSMOS_ENDPOINT ? [] : ['COSMOS_ENDPOINT'],
    ].flat();
    context.out(
      `skip: end-to-end check against the deployed app: ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} ` +
        'not set (it signs in with DefaultAzureCredential: az login or a managed identity).',
    );
    return 'skipped';
  }
  const cleanup: (() => Promise<void> | void)[] = [];
  try {
    const settings = loadSettings(env).cosmos;
    const cosmos = createCosmosClient(settings);
    cleanup.push(() => cosmos.dispose());
    const { client, description } = connectServiceBus(env);
    cleanup.push(() => client.close());
    const container = cosmos.database(settings.database).container(settings.container);

    const run = randomUUID().slice(0, 8);
    const invoiceId = `live-${run}`;
    const amount = 12.34;
    const { subject, schema, messageId } = SAMPLE_EVENTS.payment;
    const body = schema.parse({ paymentId: `live-${run}`, invoiceId, amount, currency: 'EUR' });
    const payment = { subject, body, messageId: messageId(body) };
    const invoice: Invoice = {
      id: invoiceId,
      partitionKey: invoicePartition(invoiceId),
      type: 'invoice',
      currency: 'EUR',
      totalMinor: 100_000,
      paidMinor: 0,
      status: 'Open',
      // A test invoice removes itself after a week; its inbox markers expire on their own.
      ttl: 7 * 86_400,
      createdBy: 'sample/liveTests.ts',
    };
    await container.items.create(invoice);
    context.out(
      `created invoice ${invoiceId} in ${settings.database}/${settings.container} at ${settings.endpoint}`,
    );

    const sender = client.createSender(topicFor(payment.subject));
    for (const copy of [1, 2]) {
      await sender.sendMessages(toServiceBusMessage(payment));
      context.out(
        `published PaymentReceived messageId=${payment.messageId} (copy ${copy} of 2) to ${description}`,
      );
    }
    await sender.close();

    const { consumer } = SAMPLE_EVENTS.payment;
    const amountMinor = toMinorUnits(amount);
    context.out(
      `waiting up to ${limits.timeoutMs / 1000} s for paidMinor=${amountMinor} and exactly one inbox marker ` +
        `for (${consumer}, ${payment.messageId})`,
    );
    return await poll(
      context,
      limits,
      () => progress(container, invoice, consumer, payment.messageId),
      amountMinor,
    );
  } catch (error) {
    context.err(`end to end failed: ${(error as Error).message}`);
    return 'failed';
  } finally {
    for (const step of cleanup.reverse()) await step();
  }
}

async function progress(
  container: Container,
  invoice: Invoice,
  consumer: string,
  messageId: string,
): Promise<Progress> {
  const { resource } = await container.item(invoice.id, invoice.partitionKey).read<Invoice>();
  const { resources: markers } = await container.items
    .query<{ id: string }>(
      {
        query:
          'SELECT c.id FROM c WHERE c.type = @type AND c.consumer = @consumer AND c.messageId = @messageId',
        parameters: [
          { name: '@type', value: MARKER_TYPE },
          { name: '@consumer', value: consumer },
          { name: '@messageId', value: messageId },
        ],
      },
      { partitionKey: invoice.partitionKey },
    )
    .fetchAll();
  return { paidMinor: resource?.paidMinor, markers: markers.length };
}

/**
 * Done when the payment is applied once and recorded once, and it stays so for the settle time
 * (a second application would arrive after the first). Applied more than once fails at once.
 */
async function poll(
  context: ToolContext,
  limits: { timeoutMs: number; settleMs: number },
  read: () => Promise<Progress>,
  amountMinor: number,
): Promise<Result> {
  const startedAt = Date.now();
  let doneAt: number | undefined;
  let last = '';
  for (;;) {
    const state = await read();
    const elapsedSeconds = Math.round((Date.now() - startedAt) / 1000);
    const line = `paidMinor=${state.paidMinor ?? '(invoice missing)'} of ${amountMinor}, inbox markers=${state.markers}`;
    if (line !== last) context.out(`  ${elapsedSeconds} s: ${line}`);
    last = line;
    if ((state.paidMinor ?? 0) > amountMinor || state.markers > 1) {
      context.err(`end to end failed: the payment was applied more than once (${line}).`);
      return 'failed';
    }
    const done = state.paidMinor === amountMinor && state.markers === 1;
    if (!done) doneAt = undefined;
    else doneAt ??= Date.now();
    if (doneAt !== undefined && Date.now() - doneAt >= limits.settleMs) {
      context.out(
        `end to end passed: applied once, one inbox marker, stable for ${limits.settleMs / 1000} s.`,
      );
      return 'passed';
    }
    if (Date.now() - startedAt > limits.timeoutMs) {
      context.err(
        `end to end failed: after ${limits.timeoutMs / 1000} s, ${line}. Is the function app running, and does its ` +
          'subscription receive? Check its logs in Application Insights and the dead-letter queue (npm run dead-letters -- list ...).',
      );
      return 'failed';
    }
    await sleep(2_000);
  }
}

const FLAGS = {
  strict: true,
  options: {
    'timeout-seconds': { type: 'string' },
    'settle-seconds': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
} satisfies ParseArgsConfig;

function seconds(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0)
    throw new UsageError(`${flag} must be a number of seconds; got '${text.slice(0, 40)}'.\n${USAGE}`);
  return value;
}

export const command: Command = { name: 'test:live', main };

if (require.main === module) runCommand(command);
