import type { ParseArgsConfig } from 'node:util';

import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import { formatDuration, parseDurationSeconds } from '@idempotent-consumers/inbox/internal';

import { localRunContext } from '../build/localRun';
import { bounded, EnvironmentError, UsageError } from '../cli/errors';
import { table } from '../cli/table';
import {
  type Command as CliCommand,
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  runCommand,
  type ToolContext,
} from '../cli/tool';
import {
  type DeadLetterQueue,
  describeQueue,
  discard,
  isNamed,
  peekDeadLetters,
  planDiscard,
  planResubmit,
  resubmit,
  type Selection,
  sequenceOf,
} from './deadLetterQueue';
import {
  bodyText,
  checkInbox,
  type DeadLetterReport,
  discardDone,
  discardLines,
  type ListRules,
  planLines,
  readDeadLetterReport,
  resubmitDone,
  resubmitRefused,
  showFields,
} from './deadLetterReport';
import { connectInbox } from './inboxState';
import { connectServiceBus, routedSubjects, takesRetryCopies, topicOfSubscription } from './serviceBus';

const USAGE = `Usage:
  npm run dead-letters -- list <subscription> [--duplicate-window PT1H] [--clock-skew PT5M]
  npm run dead-letters -- show <subscription> <messageId|sequence-number>
  npm run dead-letters -- resubmit <subscription> (--message-id <id> [--message-id <id>...] | --all)
                          [--dry-run] [--force] [--include-poison] [--duplicate-window PT1H]
                          [--clock-skew PT5M] [--ignore-duplicate-window]
  npm run dead-letters -- discard <subscription> (--message-id <id> [--message-id <id>...] | --all)
                          [--dry-run] [--force]
Options:
  --topic <name>          default: the topic of the subscription in src/topology.json
  --dry-run               print what would be resubmitted, completed or discarded; send, complete and lock nothing
  --force                 resubmit payload mismatches and messages whose inbox state is unknown too;
                          discard messages whose effect never happens then (not applied, failed, unknown,
                          payload mismatch, or the inbox not checked)
  --include-poison        resubmit poison and rejected messages too: once the consumer takes them (after a fix)
  --duplicate-window <d>  the topic's duplicate detection window (ISO-8601; default SERVICEBUS_DUPLICATE_WINDOW
                          when the environment or a running npm start sets it, else PT1H, as the Bicep sets it)
  --clock-skew <d>        how far this machine's clock may be ahead of the broker's (ISO-8601; default
                          SERVICEBUS_CLOCK_SKEW when set, PT0S with npm start, whose broker runs on this
                          machine's clock; else PT5M): a message is resubmitted only this long after its
                          duplicate window has passed
  --ignore-duplicate-window
                          DANGEROUS: resubmit messages still inside the duplicate window. The broker drops
                          such a copy as a duplicate (and reports success) while the tool completes the
                          dead-lettered original: the message is lost. Only for a topic without duplicate
                          detection, or a window you know is shorter than --duplicate-window says.
Environment: SERVICEBUS_NAMESPACE (identity) or SERVICEBUS_CONNECTION_STRING (emulator/local peer only);
  COSMOS_ENDPOINT, COSMOS_DATABASE, COSMOS_CONTAINER (COSMOS_KEY only for the local server or an emulator)
  to check each message against its consumer's inbox; INBOX_RETENTION as the app has it;
  SERVICEBUS_DUPLICATE_WINDOW and SERVICEBUS_CLOCK_SKEW, the defaults of --duplicate-window and --clock-skew. With neither SERVICEBUS_* nor COSMOS_ENDPOINT
  set: the local Service Bus and Cosmos DB of a running npm start, and the topics it serves (its settings file;
  LOCAL_RUN_FILE moves it).
Delayed-retry copies (Subject inbox.retry): list shows each as attempt n of its original MessageId, next to the
  rest of its family; its inbox state is its original's, and resubmit sends it as it is (its own MessageId,
  Subject and inboxRetry* properties), so only its own subscription takes it.
discard removes dead letters for good (completes them in the dead-letter queue): without --force only those
  whose effect is in place (inbox state applied or versioned) or whose consumer refuses them (poison, rejected).`;

export const DUPLICATE_WINDOW = 'SERVICEBUS_DUPLICATE_WINDOW';
export const DEFAULT_DUPLICATE_WINDOW_SECONDS = 3600;
export const CLOCK_SKEW = 'SERVICEBUS_CLOCK_SKEW';
export const DEFAULT_CLOCK_SKEW_SECONDS = 300;

const COMMANDS = ['list', 'show', 'resubmit', 'discard'] as const;
type Command = (typeof COMMANDS)[number];

/** The flags each command takes besides --topic and --help. */
const COMMAND_FLAGS: Record<Command, readonly string[]> = {
  list: ['duplicate-window', 'clock-skew'],
  show: [],
  resubmit: [
    'message-id',
    'all',
    'dry-run',
    'force',
    'include-poison',
    'duplicate-window',
    'clock-skew',
    'ignore-duplicate-window',
  ],
  discard: ['message-id', 'all', 'dry-run', 'force'],
};

interface Request {
  command: Command;
  subscription: string;
  topic: string;
  /** show: the MessageId or sequence number. */
  key: string | undefined;
  duplicateWindowSeconds: number;
  clockSkewSeconds: number;
  flags: Flags;
}

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values, positionals } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  // Every usage error is found here, before anything is connected to.
  const parsed = parseRequest(values, positionals);
  const { env, localRun } = localRunContext(context);
  const request = {
    ...parsed,
    duplicateWindowSeconds:
      parsed.duplicateWindowSeconds ??
      durationFromEnvironment(env, DUPLICATE_WINDOW, DEFAULT_DUPLICATE_WINDOW_SECONDS),
    clockSkewSeconds:
      parsed.clockSkewSeconds ?? durationFromEnvironment(env, CLOCK_SKEW, DEFAULT_CLOCK_SKEW_SECONDS),
  };
  const inbox = request.command === 'show' ? undefined : connectInbox(env);
  const { client, description } = connectServiceBus(env);
  const queue: DeadLetterQueue = { client, topic: request.topic, subscription: request.subscription };
  const rules = {
    duplicateWindowMs: request.duplicateWindowSeconds * 1000,
    clockSkewMs: request.clockSkewSeconds * 1000,
    nowMs: context.now(),
    // The topics a running npm start serves, when the tool uses it; else src/topology.json.
    routedSubjects: routedSubjects(request.topic, localRun?.topology),
    retryCopies: {
      subscription: request.subscription,
      taken: takesRetryCopies(request.topic, request.subscription, localRun?.topology),
    },
  };
  try {
    if (request.command === 'list') {
      const report = await readDeadLetterReport(queue, inbox, rules);
      context.out(`${report.queue} on ${description}: ${report.rows.length} message(s).`);
      if (report.inboxNote) context.out(report.inboxNote);
      printReport(report, context);
      return EXIT_CODES.ok;
    }
    const deadLetters = await peekDeadLetters(queue);
    context.out(`${describeQueue(queue)} on ${description}: ${deadLetters.length} message(s).`);
    if (request.command === 'show')
      return showMessages(deadLetters, request.key!, request.subscription, context);
    // --message-id reads only the markers of the messages it was asked for.
    const asked = request.flags['message-id'];
    const checked = asked ? deadLetters.filter((m) => asked.includes(String(m.messageId))) : deadLetters;
    const { note, states: inboxStates } = await checkInbox(checked, request.subscription, inbox, rules);
    if (note) context.out(note);
    if (request.command === 'discard')
      return await discardMessages(queue, deadLetters, request.flags, inboxStates, context);
    return await resubmitMessages(queue, deadLetters, request, { ...rules, inboxStates }, context);
  } finally {
    if (typeof inbox === 'object') inbox.close();
    await client.close();
  }
}

/** The request as the flags say it; the duplicate window is left to the environment when not given. */
function parseRequest(
  values: Flags,
  positionals: string[],
): Omit<Request, 'duplicateWindowSeconds' | 'clockSkewSeconds'> & {
  /** Undefined when the flag is not given: the environment's, or the default. */
  duplicateWindowSeconds: number | undefined;
  clockSkewSeconds: number | undefined;
} {
  const [command, subscription, ...rest] = positionals;
  if (!COMMANDS.includes(command as Command) || !subscription) {
    throw usageError('Say what to do (list, show, resubmit or discard) and with which subscription.');
  }
  const given = Object.keys(values).filter(
    (flag) => flag !== 'topic' && (values as Record<string, unknown>)[flag] !== undefined,
  );
  const misplaced = given.filter((flag) => !COMMAND_FLAGS[command as Command].includes(flag));
  if (misplaced.length > 0) {
    throw usageError(`${misplaced.map((f) => `--${f}`).join(', ')} do(es) not apply to ${command}.`);
  }
  if (command === 'show' && rest.length === 0) {
    throw usageError(
      `show needs the MessageId or sequence number of the message to show (list prints both).`,
    );
  }
  if (rest.length > (command === 'show' ? 1 : 0)) {
    throw usageError(`Unexpected arguments for ${command}: ${bounded(rest.join(' '))}.`);
  }
  if (
    (command === 'resubmit' || command === 'discard') &&
    (values['message-id'] ?? []).length > 0 === Boolean(values.all)
  ) {
    throw usageError(`${command} needs --message-id <id> (one or more) or --all, not both.`);
  }
  let topic: string;
  try {
    topic = topicOfSubscription(subscription, values.topic);
  } catch (error) {
    throw usageError((error as Error).message, error);
  }
  return {
    command: command as Command,
    subscription,
    topic,
    key: rest[0],
    duplicateWindowSeconds:
      values['duplicate-window'] === undefined
        ? undefined
        : durationSeconds('--duplicate-window', values['duplicate-window'], 1),
    clockSkewSeconds:
      values['clock-skew'] === undefined
        ? undefined
        : durationSeconds('--clock-skew', values['clock-skew'], 0),
    flags: values,
  };
}

/** The table list prints, then what its columns mean; nothing for an empty queue. */
function printReport(report: DeadLetterReport, context: ToolContext): void {
  if (report.rows.length === 0) return;
  const copies = report.delayedRetryColumn;
  // Every message is checked when the inbox is: the column is there exactly then.
  const inbox = report.rows.some((row) => row.inbox !== undefined);
  const header = [
    'seq',
    'messageId',
    'subject',
    ...(copies ? ['delayed retry'] : []),
    'reason',
    'description',
    'deliveries',
    'enqueued (UTC)',
    ...(inbox ? ['inbox'] : []),
    'resubmittable from (UTC)',
  ];
  const rows = report.rows.map((row) => [
    row.sequence,
    row.messageId ?? '',
    row.subject ?? '',
    ...(copies ? [row.family ?? ''] : []),
    row.reason ?? '',
    row.description ?? '',
    String(row.deliveries ?? ''),
    row.enqueuedAt ?? '',
    ...(inbox ? [row.inbox?.text ?? ''] : []),
    row.resubmittableFrom ?? `never: ${row.never}`,
  ]);
  for (const line of table([header, ...rows])) context.out(line);
  context.out('');
  for (const line of report.legend) context.out(line);
}

function showMessages(
  deadLetters: readonly ServiceBusReceivedMessage[],
  key: string,
  subscription: string,
  context: ToolContext,
): ExitCode {
  const matches = deadLetters.filter((message) => isNamed(message, key));
  if (matches.length === 0) {
    context.err(`No dead-lettered message has MessageId or sequence number '${bounded(key)}'.`);
    return EXIT_CODES.failed;
  }
  for (const message of matches) {
    context.out('');
    context.out(`#${sequenceOf(message)}`);
    for (const [name, value] of showFields(message, subscription))
      context.out(`  ${`${name}:`.padEnd(28)}${value}`);
    context.out('  body:');
    for (const line of bodyText(message.body).split('\n')) context.out(`    ${line}`);
  }
  return EXIT_CODES.ok;
}

async function resubmitMessages(
  queue: DeadLetterQueue,
  deadLetters: readonly ServiceBusReceivedMessage[],
  request: Request,
  rules: ListRules,
  context: ToolContext,
): Promise<ExitCode> {
  const { flags } = request;
  const selection: Selection = flags.all ? { all: true } : { messageIds: flags['message-id'] ?? [] };
  const dryRun = Boolean(flags['dry-run']);
  const plan = planResubmit(deadLetters, selection, {
    ...rules,
    force: Boolean(flags.force),
    includePoison: Boolean(flags['include-poison']),
    ignoreDuplicateWindow: Boolean(flags['ignore-duplicate-window']),
  });
  for (const line of planLines(plan, { ...request, dryRun })) context.out(line.text);
  if (flags['ignore-duplicate-window'] && plan.resubmit.length > 0) {
    context.err(
      'warning: --ignore-duplicate-window resubmits without waiting for the duplicate window. A copy the broker ' +
        'drops as a duplicate is lost when its dead-lettered original is completed.',
    );
  }
  const problems = resubmitRefused(plan) + plan.sameMessageId.length + plan.notFound.length;
  if (dryRun) {
    context.out('Dry run: nothing was sent, completed or locked.');
    return problems === 0 ? EXIT_CODES.ok : EXIT_CODES.failed;
  }
  const done = resubmitDone(plan, await resubmit(queue, plan, context.out, context.now));
  for (const line of done.lines) context.out(line);
  return done.ok ? EXIT_CODES.ok : EXIT_CODES.failed;
}

async function discardMessages(
  queue: DeadLetterQueue,
  deadLetters: readonly ServiceBusReceivedMessage[],
  flags: Flags,
  inboxStates: ListRules['inboxStates'],
  context: ToolContext,
): Promise<ExitCode> {
  const selection: Selection = flags.all ? { all: true } : { messageIds: flags['message-id'] ?? [] };
  const dryRun = Boolean(flags['dry-run']);
  const plan = planDiscard(deadLetters, selection, { inboxStates, force: Boolean(flags.force) });
  for (const line of discardLines(plan, { dryRun })) context.out(line.text);
  const problems = plan.refused.length + plan.notFound.length;
  if (dryRun) {
    context.out('Dry run: nothing was completed or locked.');
    return problems === 0 ? EXIT_CODES.ok : EXIT_CODES.failed;
  }
  const done = discardDone(plan, await discard(queue, plan, context.out));
  for (const line of done.lines) context.out(line);
  return done.ok ? EXIT_CODES.ok : EXIT_CODES.failed;
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
    'include-poison': { type: 'boolean' },
    'duplicate-window': { type: 'string' },
    'clock-skew': { type: 'string' },
    'ignore-duplicate-window': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
} satisfies ParseArgsConfig;

function durationSeconds(flag: string, text: string, minimumSeconds: number): number {
  let seconds: number;
  try {
    seconds = parseDurationSeconds(text, flag);
  } catch (error) {
    throw usageError(
      `${flag} '${bounded(text)}' is not an ISO-8601 duration (for example PT1H or PT5M).`,
      error,
    );
  }
  if (seconds < minimumSeconds)
    throw usageError(`${flag} must be at least ${formatDuration(minimumSeconds)}.`);
  return seconds;
}

/**
 * A duration the flag leaves to the environment: npm start sets SERVICEBUS_DUPLICATE_WINDOW (its
 * local Service Bus's window) and SERVICEBUS_CLOCK_SKEW (PT0S: its broker runs on this machine's
 * clock); otherwise the default (PT1H as the Bicep sets it, and a PT5M margin).
 */
export function durationFromEnvironment(
  env: ToolContext['env'],
  name: string,
  fallbackSeconds: number,
): number {
  const text = env[name]?.trim();
  if (!text) return fallbackSeconds;
  try {
    return parseDurationSeconds(text, name);
  } catch (error) {
    throw new EnvironmentError(
      `${name} '${bounded(text)}' is not an ISO-8601 duration (for example PT1H or PT10M).`,
      { cause: error },
    );
  }
}

function usageError(message: string, cause?: unknown): UsageError {
  return new UsageError(`${message}\n${USAGE}`, cause === undefined ? undefined : { cause });
}

export const command: CliCommand = { name: 'dead-letters', main };

if (require.main === module) runCommand(command);
