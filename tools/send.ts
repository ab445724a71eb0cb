import { readFile } from 'node:fs/promises';
import type { ParseArgsConfig } from 'node:util';

import { EXIT_CODES, type ExitCode, parseFlags, processContext, runTool, type ToolContext } from './cli';
import { UsageError } from './errors';
import { EVENT_KINDS, type EventKind, parseEvent, parseEventLines, type SampleEvent } from './events';
import { connectServiceBus, topicFor, toServiceBusMessage } from './serviceBus';

const USAGE = `Usage:
  npm run send -- payment --invoice <id> --payment <id> --amount <12.50> --currency <EUR|USD|GBP>
  npm run send -- order   --order <id> --product <id> --quantity <n>
  npm run send -- status  --invoice <id> --status <Draft|Issued|Paid|Void> --version <n>
  npm run send -- --file <events.jsonl>      one {"subject": ..., "body": {...}, "messageId"?: ...} per line
Options:
  --repeat <n>        send every event n times with the same MessageId (default 1), to watch duplicates
  --message-id <id>   override the MessageId of an event built from flags (default: from its business id)
  --topic <name>      default: the topic in src/topology.json whose subscriptions filter on the subject
Environment:
  SERVICEBUS_NAMESPACE=<name>.servicebus.windows.net   signs in with DefaultAzureCredential (az login)
  SERVICEBUS_CONNECTION_STRING=...;UseDevelopmentEmulator=true;   the emulator or the local peer only`;

/** The flags each event kind takes, and the body field each fills. */
const FIELDS: Record<EventKind, Record<string, { field: string; type: 'string' | 'number' }>> = {
  payment: {
    invoice: { field: 'invoiceId', type: 'string' },
    payment: { field: 'paymentId', type: 'string' },
    amount: { field: 'amount', type: 'number' },
    currency: { field: 'currency', type: 'string' },
  },
  order: {
    order: { field: 'orderId', type: 'string' },
    product: { field: 'productId', type: 'string' },
    quantity: { field: 'quantity', type: 'number' },
  },
  status: {
    invoice: { field: 'invoiceId', type: 'string' },
    status: { field: 'status', type: 'string' },
    version: { field: 'version', type: 'number' },
  },
};

const EVENT_FLAGS = [
  'invoice',
  'payment',
  'amount',
  'currency',
  'order',
  'product',
  'quantity',
  'status',
  'version',
];

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values, positionals } = parseFlags(argv, FLAGS, USAGE);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  const repeat = positiveInteger(values.repeat ?? '1', '--repeat');
  const events = await eventsFrom(values, positionals);

  const { client, description } = connectServiceBus(context.env);
  try {
    let sent = 0;
    for (const event of events) {
      const topic = topicFor(event.subject, values.topic);
      const sender = client.createSender(topic);
      try {
        for (let copy = 1; copy <= repeat; copy++) {
          await sender.sendMessages(toServiceBusMessage(event));
          sent++;
          const body = copy === 1 ? ` ${JSON.stringify(event.body)}` : '';
          const note = repeat > 1 ? ` (copy ${copy} of ${repeat}, same MessageId)` : '';
          context.out(`sent ${event.subject} messageId=${event.messageId} to ${topic}${body}${note}`);
        }
      } finally {
        await sender.close();
      }
    }
    context.out(`Sent ${sent} message(s), ${events.length} event(s), to ${description}.`);
    if (repeat > 1 || new Set(events.map((e) => e.messageId)).size < events.length) {
      context.out(
        'Every send reports success, but within the topic duplicate detection window (PT1H) Service Bus keeps only ' +
          "the first copy of a MessageId; after it, a repeat is delivered and the consumer's inbox absorbs it.",
      );
    }
    return EXIT_CODES.ok;
  } finally {
    await client.close();
  }
}

type Flags = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

const FLAGS = {
  allowPositionals: true,
  strict: true,
  options: {
    file: { type: 'string' },
    repeat: { type: 'string' },
    'message-id': { type: 'string' },
    topic: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
    ...Object.fromEntries(EVENT_FLAGS.map((flag) => [flag, { type: 'string' as const }])),
  },
} satisfies ParseArgsConfig;

async function eventsFrom(values: Flags, positionals: string[]): Promise<SampleEvent[]> {
  const given = EVENT_FLAGS.filter((flag) => (values as Record<string, unknown>)[flag] !== undefined);
  if (values.file !== undefined) {
    if (positionals.length > 0 || given.length > 0 || values['message-id'] !== undefined) {
      throw new UsageError('--file takes its events from the file; drop the event kind and its flags.');
    }
    let text: string;
    try {
      text = await readFile(values.file, 'utf8');
    } catch (error) {
      throw new UsageError(`Cannot read ${values.file}: ${(error as Error).message}`, { cause: error });
    }
    return parseEventLines(text, values.file);
  }
  const [kind, ...extra] = positionals;
  if (kind === undefined || !(kind in EVENT_KINDS) || extra.length > 0) {
    throw new UsageError(`Say what to send: payment, order, status, or --file <events.jsonl>.\n${USAGE}`);
  }
  const fields = FIELDS[kind as EventKind];
  const foreign = given.filter((flag) => !(flag in fields));
  if (foreign.length > 0) {
    throw new UsageError(`${kind} does not take ${foreign.map((flag) => `--${flag}`).join(', ')}.`);
  }
  const missing = Object.keys(fields).filter((flag) => !given.includes(flag));
  if (missing.length > 0) {
    throw new UsageError(`${kind} needs ${missing.map((flag) => `--${flag}`).join(', ')}.`);
  }
  const body: Record<string, string | number> = {};
  for (const [flag, { field, type }] of Object.entries(fields)) {
    const text = String((values as Record<string, unknown>)[flag]);
    body[field] = type === 'number' ? numberFlag(text, `--${flag}`) : text;
  }
  const messageId = values['message-id'];
  return [
    parseEvent(
      { subject: EVENT_KINDS[kind as EventKind], body, ...(messageId === undefined ? {} : { messageId }) },
      `${kind} flags`,
    ),
  ];
}

function numberFlag(text: string, flag: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value))
    throw new UsageError(`${flag} must be a number; got '${text}'.`);
  return value;
}

function positiveInteger(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > 100) {
    throw new UsageError(`${flag} must be a whole number from 1 to 100; got '${text}'.`);
  }
  return value;
}

if (require.main === module) {
  void runTool('send', main, process.argv.slice(2), processContext()).then((code) => {
    process.exitCode = code;
  });
}
