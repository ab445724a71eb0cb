import { createHash } from 'node:crypto';
import type { ParseArgsConfig } from 'node:util';

import type { ServiceBusReceivedMessage } from '@azure/service-bus';

import { localRunContext } from '../build/localRun';
import { bounded } from '../cli/errors';
import { table } from '../cli/table';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  numberFlag,
  parseFlags,
  runCommand,
  type ToolContext,
  usageError,
} from '../cli/tool';
import { idText } from './deadLetterIdentity';
import { type DeadLetterQueue, describeQueue, peekQueue, sequenceOf } from './deadLetterQueue';
import { connectServiceBus, topicOfSubscription } from './serviceBus';

const DEFAULT_MAX = 20;
const MAX = 1000;

const USAGE = `Usage:
  npm run peek -- <subscription> [--dead-letter] [--max ${DEFAULT_MAX}] [--topic <name>]
Lists the messages waiting in a subscription, or with --dead-letter in its dead-letter queue, oldest
first, without locking or settling any: the consumers receive them as if nobody had looked. One line
per message: sequence number, MessageId, Subject, enqueued time, delivery count, the body's size and
the start of its SHA-256 (never its content; npm run dead-letters -- show prints a dead letter's body),
and for a dead letter its DeadLetterReason and DeadLetterErrorDescription.
Options:
  --dead-letter   the subscription's dead-letter queue
  --max <n>       at most n messages, the oldest (1 to ${MAX}, default ${DEFAULT_MAX})
  --topic <name>  default: the topic of the subscription in src/topology.json
Environment: SERVICEBUS_NAMESPACE (identity) or SERVICEBUS_CONNECTION_STRING (emulator/local peer only);
  with neither, the local Service Bus of a running npm start (its settings file; LOCAL_RUN_FILE moves it).`;

type Flags = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

const FLAGS = {
  allowPositionals: true,
  strict: true,
  options: {
    'dead-letter': { type: 'boolean' },
    max: { type: 'string' },
    topic: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
} satisfies ParseArgsConfig;

interface Request {
  queue: Omit<DeadLetterQueue, 'client'>;
  deadLetter: boolean;
  max: number;
}

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values, positionals } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  // Every usage error is found here, before anything is connected to.
  const { queue, deadLetter, max } = parseRequest(values, positionals);
  const { client, description } = connectServiceBus(localRunContext(context).env);
  try {
    const target = { ...queue, client };
    const messages = await peekQueue(target, { deadLetter, max });
    const where = deadLetter ? describeQueue(target) : `${queue.topic}/Subscriptions/${queue.subscription}`;
    const more = messages.length === max ? ` (the oldest ${max}; --max shows more)` : '';
    context.out(
      `${where} on ${description}: ${messages.length} message(s)${more}, peeked: none locked or settled.`,
    );
    if (messages.length > 0) for (const line of table(rows(messages, deadLetter))) context.out(line);
    return EXIT_CODES.ok;
  } finally {
    await client.close();
  }
}

function parseRequest(values: Flags, positionals: string[]): Request {
  const [subscription, ...rest] = positionals;
  if (!subscription) throw usageError('Say which subscription to peek.', USAGE);
  if (rest.length > 0) throw usageError(`Unexpected arguments: ${bounded(rest.join(' '))}.`, USAGE);
  const max = numberFlag('max', values.max ?? DEFAULT_MAX, USAGE, { min: 1, max: MAX, integer: true });
  let topic: string;
  try {
    topic = topicOfSubscription(subscription, values.topic);
  } catch (error) {
    throw usageError((error as Error).message, USAGE, { cause: error });
  }
  return { queue: { topic, subscription }, deadLetter: Boolean(values['dead-letter']), max };
}

function rows(messages: readonly ServiceBusReceivedMessage[], deadLetter: boolean): string[][] {
  const header = ['seq', 'messageId', 'subject', 'enqueued (UTC)', 'deliveries', 'body'];
  return [
    deadLetter ? [...header, 'reason', 'description'] : header,
    ...messages.map((message) => {
      const row = [
        sequenceOf(message),
        bounded(idText(message.messageId) ?? ''),
        bounded(message.subject ?? ''),
        message.enqueuedTimeUtc?.toISOString() ?? '',
        String(message.deliveryCount ?? ''),
        bodyDigest(message.body),
      ];
      return deadLetter
        ? [
            ...row,
            bounded(message.deadLetterReason ?? '', 40),
            bounded(message.deadLetterErrorDescription ?? '', 60),
          ]
        : row;
    }),
  ];
}

/**
 * The body's size and the first 16 hex digits of its SHA-256: enough to tell bodies apart, or to
 * match the hash a consumer logs for a body that is not JSON, without printing what they hold.
 */
function bodyDigest(body: unknown): string {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body) ?? '', 'utf8');
  return `${bytes.length} B sha256:${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}`;
}

export const command: Command = { name: 'peek', main };

if (require.main === module) runCommand(command);
