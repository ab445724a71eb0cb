import type { ParseArgsConfig } from 'node:util';

import type { ServiceBusReceivedMessage } from '@azure/service-bus';

import { formatDuration, parseDurationSeconds } from '../src/inbox/duration';
import { EXIT_CODES, type ExitCode, parseFlags, processContext, runTool, type ToolContext } from './cli';
import {
  type DeadLetterQueue,
  describeQueue,
  isNamed,
  label,
  peekDeadLetters,
  planResubmit,
  resubmit,
  type ResubmitPlan,
  resubmittedCopy,
  type Selection,
  sequenceOf,
} from './deadLetterQueue';
import { UsageError } from './errors';
import { connectServiceBus, topicOfSubscription } from './serviceBus';

const USAGE = `Usage:
  npm run dead-letters -- list <subscription>
  npm run dead-letters -- show <subscription> <messageId|sequence-number>
  npm run dead-letters -- resubmit <subscription> (--message-id <id> [--message-id <id>...] | --all)
                          [--dry-run] [--duplicate-window PT1H] [--force]
Options:
  --topic <name>          default: the topic of the subscription in src/topology.json
  --dry-run               print what would be resubmitted; send, complete and lock nothing
  --duplicate-window <d>  the topic's duplicate detection window (ISO-8601, default PT1H, as the Bicep sets it)
  --force                 DANGEROUS: resubmit messages still inside the duplicate window. The broker drops
                          such a copy as a duplicate (and reports success) while the tool completes the
                          dead-lettered original: the message is lost. Only for a topic without duplicate
                          detection, or a window you know is shorter than --duplicate-window says.
Environment: SERVICEBUS_NAMESPACE (identity) or SERVICEBUS_CONNECTION_STRING (emulator/local peer only).`;

const COMMANDS = ['list', 'show', 'resubmit'] as const;
type Command = (typeof COMMANDS)[number];

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values, positionals } = parseFlags(argv, FLAGS, USAGE);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  const [command, subscription, ...rest] = positionals;
  if (!COMMANDS.includes(command as Command) || !subscription) {
    throw new UsageError(`Say what to do and with which subscription.\n${USAGE}`);
  }
  const resubmitFlags = ['message-id', 'all', 'dry-run', 'force', 'duplicate-window'].filter(
    (flag) => (values as Record<string, unknown>)[flag] !== undefined,
  );
  if (command !== 'resubmit' && resubmitFlags.length > 0) {
    throw new UsageError(`${resubmitFlags.map((f) => `--${f}`).join(', ')} only apply to resubmit.`);
  }
  if (rest.length > (command === 'show' ? 1 : 0) || (command === 'show' && rest.length === 0)) {
    throw new UsageError(`Unexpected arguments for ${command}.\n${USAGE}`);
  }

  const { client, description } = connectServiceBus(context.env);
  const queue: DeadLetterQueue = {
    client,
    topic: topicOfSubscription(subscription, values.topic),
    subscription,
  };
  try {
    const deadLetters = await peekDeadLetters(queue);
    context.out(`${describeQueue(queue)} on ${description}: ${deadLetters.length} message(s).`);
    switch (command as Command) {
      case 'list':
        listMessages(deadLetters, context);
        return EXIT_CODES.ok;
      case 'show':
        return showMessages(deadLetters, rest[0]!, context);
      case 'resubmit':
        return await resubmitMessages(queue, deadLetters, values, context);
    }
  } finally {
    await client.close();
  }
}

function listMessages(deadLetters: readonly ServiceBusReceivedMessage[], context: ToolContext): void {
  if (deadLetters.length === 0) return;
  const rows = deadLetters.map((message) => [
    sequenceOf(message),
    idText(message.messageId) ?? '',
    message.subject ?? '',
    message.deadLetterReason ?? '',
    truncate(message.deadLetterErrorDescription ?? '', 60),
    String(message.deliveryCount ?? ''),
    message.enqueuedTimeUtc?.toISOString() ?? '',
  ]);
  const header = ['seq', 'messageId', 'subject', 'reason', 'description', 'deliveries', 'enqueued (UTC)'];
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]!.length)),
  );
  for (const row of [header, ...rows]) {
    context.out(
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join('  ')
        .trimEnd(),
    );
  }
}

function showMessages(
  deadLetters: readonly ServiceBusReceivedMessage[],
  key: string,
  context: ToolContext,
): ExitCode {
  const matches = deadLetters.filter((message) => isNamed(message, key));
  if (matches.length === 0) {
    context.err(`No dead-lettered message has MessageId or sequence number '${key}'.`);
    return EXIT_CODES.failed;
  }
  for (const message of matches) {
    context.out('');
    context.out(`#${sequenceOf(message)}`);
    const fields: [string, string | number | undefined][] = [
      ['messageId', idText(message.messageId)],
      ['subject', message.subject],
      ['correlationId', idText(message.correlationId)],
      ['contentType', message.contentType],
      ['enqueued (UTC)', message.enqueuedTimeUtc?.toISOString()],
      ['deliveries', message.deliveryCount],
      ['DeadLetterReason', message.deadLetterReason],
      ['DeadLetterErrorDescription', message.deadLetterErrorDescription],
      ['applicationProperties', JSON.stringify(resubmittedCopy(message).applicationProperties ?? {})],
    ];
    for (const [name, value] of fields) {
      if (value !== undefined) context.out(`  ${`${name}:`.padEnd(28)}${value}`);
    }
    context.out('  body:');
    for (const line of bodyText(message.body).split('\n')) context.out(`    ${line}`);
  }
  return EXIT_CODES.ok;
}

async function resubmitMessages(
  queue: DeadLetterQueue,
  deadLetters: readonly ServiceBusReceivedMessage[],
  values: Flags,
  context: ToolContext,
): Promise<ExitCode> {
  const messageIds = values['message-id'] ?? [];
  if (messageIds.length > 0 === Boolean(values.all)) {
    throw new UsageError('resubmit needs --message-id <id> (one or more) or --all, not both.');
  }
  const windowSeconds = durationSeconds(values['duplicate-window'] ?? 'PT1H');
  const selection: Selection = values.all ? { all: true } : { messageIds };
  const dryRun = Boolean(values['dry-run']);
  const plan = planResubmit(deadLetters, selection, {
    duplicateWindowMs: windowSeconds * 1000,
    force: Boolean(values.force),
    nowMs: context.now(),
  });
  describePlan(plan, formatDuration(windowSeconds), dryRun, context);
  if (values.force && plan.resubmit.length > 0) {
    context.err(
      'warning: --force resubmits without waiting for the duplicate window. A copy the broker drops as a duplicate ' +
        'is lost when its dead-lettered original is completed.',
    );
  }
  const problems = plan.tooEarly.length + plan.sameMessageId.length + plan.notFound.length;
  if (dryRun) {
    context.out('Dry run: nothing was sent, completed or locked.');
    return problems === 0 ? EXIT_CODES.ok : EXIT_CODES.failed;
  }
  const outcome = await resubmit(queue, plan, context.out);
  for (const message of outcome.notReceived) {
    context.out(
      `not received ${label(message)}: another receiver holds it, or it left the queue; left alone`,
    );
  }
  context.out(
    `Resubmitted ${outcome.resubmitted.length}, refused ${plan.tooEarly.length}, skipped ${plan.sameMessageId.length}, ` +
      `not found ${plan.notFound.length}, failed ${outcome.failed.length + outcome.sentButNotCompleted.length}, ` +
      `not received ${outcome.notReceived.length}; ${outcome.leftInPlace} other message(s) locked on the way were given back unchanged.`,
  );
  const failures = outcome.failed.length + outcome.sentButNotCompleted.length + outcome.notReceived.length;
  return problems + failures === 0 ? EXIT_CODES.ok : EXIT_CODES.failed;
}

function describePlan(plan: ResubmitPlan, window: string, dryRun: boolean, context: ToolContext): void {
  const verb = dryRun ? 'would resubmit' : 'will resubmit';
  for (const message of plan.resubmit) {
    context.out(`${verb} ${label(message)} (reason: ${message.deadLetterReason ?? 'none'})`);
  }
  for (const { message, resubmittableAt } of plan.tooEarly) {
    context.out(
      `refused ${label(message)}: first sent ${message.enqueuedTimeUtc?.toISOString() ?? '(unknown)'}, still inside the ` +
        `topic's duplicate detection window (${window}). Resubmit it from ${resubmittableAt.toISOString()}: ` +
        'sent now, the broker would drop it as a duplicate while the dead-lettered copy is completed, and it would be lost.',
    );
  }
  for (const message of plan.sameMessageId) {
    context.out(
      `skipped ${label(message)}: another message with this MessageId is resubmitted in this run; the broker would ` +
        'drop this one as its duplicate. Left in the dead-letter queue.',
    );
  }
  for (const messageId of plan.notFound)
    context.out(`not found: no dead-lettered message has MessageId ${messageId}`);
}

type Flags = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

const FLAGS = {
  allowPositionals: true,
  strict: true,
  options: {
    topic: { type: 'string' },
    'message-id': { type: 'string', multiple: true },
    all: { type: 'boolean' },
    'dry-run': { type: 'boolean' },
    force: { type: 'boolean' },
    'duplicate-window': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
} satisfies ParseArgsConfig;

function durationSeconds(text: string): number {
  try {
    const seconds = parseDurationSeconds(text, '--duplicate-window');
    if (seconds <= 0) throw new Error('must be longer than zero');
    return seconds;
  } catch (error) {
    throw new UsageError(`--duplicate-window: ${(error as Error).message}`, { cause: error });
  }
}

/** JSON pretty-printed, other UTF-8 as text, anything else as base64. */
function bodyText(body: unknown): string {
  if (!Buffer.isBuffer(body)) return JSON.stringify(body, null, 2) ?? String(body);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return `(${body.length} bytes, base64) ${body.toString('base64')}`;
  }
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** AMQP ids may be numbers or uuid bytes; Service Bus producers send strings. */
function idText(id: string | number | Buffer | undefined): string | undefined {
  if (id === undefined) return undefined;
  return Buffer.isBuffer(id) ? id.toString('hex') : String(id);
}

function truncate(text: string, length: number): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length > length ? `${line.slice(0, length - 1)}…` : line;
}

if (require.main === module) {
  void runTool('dead-letters', main, process.argv.slice(2), processContext()).then((code) => {
    process.exitCode = code;
  });
}
