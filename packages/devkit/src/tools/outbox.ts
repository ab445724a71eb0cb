import { createHash } from 'node:crypto';
import type { ParseArgsConfig } from 'node:util';

import type { Container } from '@azure/cosmos';
import {
  discardUnsendable,
  formatDuration,
  OUTBOX_TYPE,
  type OutboxDocument,
  outboxEntryOf,
  resendUnsendable,
} from '@idempotent-consumers/inbox/internal';

import { localRunContext } from '../build/localRun';
import { bounded, EnvironmentError } from '../cli/errors';
import { table } from '../cli/table';
import {
  type Command as CliCommand,
  EXIT_CODES,
  type ExitCode,
  numberFlag,
  parseFlags,
  runCommand,
  type ToolContext,
  usageError,
} from '../cli/tool';
import { connectInbox } from './inboxState';

const DEFAULT_MAX = 50;
const MAX = 1000;

const USAGE = `Usage:
  npm run outbox [-- list] [--pending | --unsendable] [--max ${DEFAULT_MAX}]
  npm run outbox -- show <messageId>
  npm run outbox -- resend <messageId> [<messageId>...] [--dry-run]
  npm run outbox -- discard <messageId> [<messageId>...] [--dry-run]
The outbox of the app's Cosmos DB container: the messages consumers published (tx.publish) that are
not sent yet (pending), or that the relay set aside as unsendable, with why. Never their content: the
message's size and the start of its SHA-256 (show --body prints it).
  list      (the default) oldest first: status, age, topic, subject, MessageId, who published it, and the reason
            an unsendable one was set aside
  show      one outbox message, by the MessageId it is sent with
  resend    an unsendable message back to pending, once what made it unsendable is fixed: the relay
            sends it within seconds (or sets it aside again, with its reason)
  discard   delete an unsendable message: it is never sent
Options:
  --pending / --unsendable  list only those (default: both)
  --max <n>                 at most n of each, the oldest (1 to ${MAX}, default ${DEFAULT_MAX})
  --body                    show: print the message's body
  --dry-run                 resend, discard: say what would be done; change nothing
Environment: COSMOS_ENDPOINT, COSMOS_DATABASE, COSMOS_CONTAINER (COSMOS_KEY only for the local server or an
  emulator; otherwise DefaultAzureCredential); with no COSMOS_ENDPOINT, the local Cosmos DB server of a
  running npm start (its settings file; LOCAL_RUN_FILE moves it).`;

const COMMANDS = ['list', 'show', 'resend', 'discard'] as const;
type Command = (typeof COMMANDS)[number];

const FLAGS = {
  allowPositionals: true,
  strict: true,
  options: {
    pending: { type: 'boolean' },
    unsendable: { type: 'boolean' },
    max: { type: 'string' },
    body: { type: 'boolean' },
    'dry-run': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
} satisfies ParseArgsConfig;

type Flags = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

/** The flags each command takes besides --help. */
const COMMAND_FLAGS: Record<Command, readonly (keyof Flags)[]> = {
  list: ['pending', 'unsendable', 'max'],
  show: ['body'],
  resend: ['dry-run'],
  discard: ['dry-run'],
};

interface Request {
  command: Command;
  messageIds: string[];
  statuses: ('pending' | 'unsendable')[];
  max: number;
  flags: Flags;
}

type StoredOutboxDocument = OutboxDocument & { _etag: string };

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values, positionals } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  // Every usage error is found here, before anything is connected to.
  const request = parseRequest(values, positionals);
  const inbox = connectInbox(localRunContext(context).env);
  if (typeof inbox === 'string') throw new EnvironmentError(`${inbox}.`);
  try {
    context.out(`Outbox: ${inbox.description}.`);
    const nowSeconds = Math.floor(context.now() / 1000);
    switch (request.command) {
      case 'list':
        await list(inbox.container, request, nowSeconds, context);
        return EXIT_CODES.ok;
      case 'show':
        return await show(inbox.container, request, nowSeconds, context);
      default:
        return await act(inbox.container, request, context);
    }
  } finally {
    inbox.close();
  }
}

function parseRequest(values: Flags, positionals: string[]): Request {
  // Nothing said: list, what one runs the command to see.
  const [command = 'list', ...messageIds] = positionals;
  if (!COMMANDS.includes(command as Command))
    throw usageError(`Unknown command '${bounded(command, 40)}': list, show, resend or discard.`, USAGE);
  const chosen = command as Command;
  const stray = (Object.keys(values) as (keyof Flags)[]).filter(
    (flag) => flag !== 'help' && values[flag] !== undefined && !COMMAND_FLAGS[chosen].includes(flag),
  );
  if (stray.length > 0) throw usageError(`${chosen} does not take --${stray.join(', --')}.`, USAGE);
  if (chosen === 'list' && messageIds.length > 0)
    throw usageError(`Unexpected arguments: ${bounded(messageIds.join(' '))}.`, USAGE);
  if (chosen === 'show' && messageIds.length !== 1) throw usageError('show takes one MessageId.', USAGE);
  if ((chosen === 'resend' || chosen === 'discard') && messageIds.length === 0)
    throw usageError(`Say which MessageIds to ${chosen}.`, USAGE);
  const tooLong = messageIds.find((id) => id.length === 0 || id.length > 128);
  if (tooLong !== undefined)
    throw usageError(`'${bounded(tooLong)}' is not a MessageId (1 to 128 characters).`, USAGE);
  const statuses =
    values.pending && !values.unsendable
      ? (['pending'] as const)
      : values.unsendable && !values.pending
        ? (['unsendable'] as const)
        : (['pending', 'unsendable'] as const);
  return {
    command: chosen,
    messageIds,
    statuses: [...statuses],
    max: numberFlag('max', values.max ?? DEFAULT_MAX, USAGE, { min: 1, max: MAX, integer: true }),
    flags: values,
  };
}

/** The indexed field that each state keeps its time in (see infra/modules/cosmos.bicep). */
const SINCE = {
  pending: 'pendingSinceEpochSeconds',
  unsendable: 'unsendableSinceEpochSeconds',
} as const;

async function list(
  container: Container,
  request: Request,
  nowSeconds: number,
  context: ToolContext,
): Promise<void> {
  for (const status of request.statuses) {
    const since = SINCE[status];
    const { resources } = await container.items
      .query<StoredOutboxDocument>({
        query: `SELECT TOP @max * FROM c WHERE c.type = '${OUTBOX_TYPE}' AND c.${since} <= @now ORDER BY c.${since}`,
        parameters: [
          { name: '@max', value: request.max },
          { name: '@now', value: nowSeconds },
        ],
      })
      .fetchAll();
    const more = resources.length === request.max ? ` (the oldest ${request.max}; --max shows more)` : '';
    context.out(`${status}: ${resources.length} message(s)${more}.`);
    if (resources.length === 0) continue;
    const header = ['since', 'topic', 'subject', 'messageId', 'published by', 'for message', 'message'];
    const rows = resources.map((document) => [
      `${formatDuration(Math.max(0, nowSeconds - (document[since] ?? nowSeconds)))} ago`,
      bounded(String(document.topic)),
      bounded(String(document.subject)),
      bounded(String(document.messageId)),
      bounded(String(document.consumer)),
      bounded(String(document.sourceMessageId), 40),
      digest(document.message),
      ...(status === 'unsendable'
        ? [`${document.unsendableReason ?? '?'}: ${bounded(document.unsendableDetail ?? '', 100)}`]
        : []),
    ]);
    for (const line of table([status === 'unsendable' ? [...header, 'why'] : header, ...rows]))
      context.out(line);
  }
}

async function show(
  container: Container,
  request: Request,
  nowSeconds: number,
  context: ToolContext,
): Promise<ExitCode> {
  const messageId = request.messageIds[0] ?? '';
  const document = await find(container, messageId);
  if (!document) {
    context.err(`outbox: no outbox message ${JSON.stringify(bounded(messageId))}.`);
    return EXIT_CODES.failed;
  }
  const since =
    document.status === 'dispatched' ? document.dispatchedAtEpochSeconds : document[SINCE[document.status]];
  const lines: [string, string][] = [
    ['messageId', bounded(String(document.messageId), 128)],
    [
      'status',
      `${document.status}${since === undefined ? '' : ` for ${formatDuration(Math.max(0, nowSeconds - since))}`}`,
    ],
    ['topic', bounded(String(document.topic))],
    ['subject', bounded(String(document.subject))],
    [
      'published by',
      `${bounded(String(document.consumer))}, for the message ${bounded(String(document.sourceMessageId), 128)}`,
    ],
    ['partition', bounded(String(document.partitionKey))],
    ['message', digest(document.message)],
  ];
  if (document.status === 'unsendable')
    lines.push([
      'why',
      `${document.unsendableReason ?? '?'}: ${bounded(document.unsendableDetail ?? '', 500)}`,
    ]);
  for (const [name, value] of lines) context.out(`${`${name}:`.padEnd(14)}${value}`);
  if (request.flags.body) {
    const read = outboxEntryOf(document);
    context.out(
      read.ok
        ? JSON.stringify(read.entry.message.body, null, 2)
        : `(no body the relay can read: ${read.detail})`,
    );
  }
  return EXIT_CODES.ok;
}

async function act(container: Container, request: Request, context: ToolContext): Promise<ExitCode> {
  const dryRun = Boolean(request.flags['dry-run']);
  let failed = 0;
  for (const messageId of request.messageIds) {
    const shown = JSON.stringify(bounded(messageId));
    const document = await find(container, messageId);
    if (!document || document.status !== 'unsendable') {
      context.err(
        `outbox: ${shown} ${document ? `is ${document.status}, not unsendable: left as it is` : 'is not in the outbox'}.`,
      );
      failed++;
      continue;
    }
    if (dryRun) {
      context.out(
        `${shown}: would ${request.command === 'resend' ? 'be put back to pending' : 'be deleted'} (--dry-run).`,
      );
      continue;
    }
    const done =
      request.command === 'resend'
        ? await resendUnsendable(container, document, new Date(context.now()))
        : await discardUnsendable(container, document);
    if (done) {
      context.out(
        request.command === 'resend'
          ? `${shown}: pending again; the relay sends it within seconds (or sets it aside again, with its reason).`
          : `${shown}: discarded; it will never be sent.`,
      );
    } else {
      context.err(`outbox: ${shown} changed while this ran: left as it is; look again with show.`);
      failed++;
    }
  }
  return failed === 0 ? EXIT_CODES.ok : EXIT_CODES.failed;
}

/** The outbox document a MessageId is sent with: its id is `outbox-<MessageId>` (id is always indexed). */
async function find(container: Container, messageId: string): Promise<StoredOutboxDocument | undefined> {
  const { resources } = await container.items
    .query<StoredOutboxDocument>({
      query: `SELECT * FROM c WHERE c.id = @id AND c.type = '${OUTBOX_TYPE}'`,
      parameters: [{ name: '@id', value: `outbox-${messageId}` }],
    })
    .fetchAll();
  return resources[0];
}

/** The message text's size and the start of its SHA-256: tells messages apart without showing them. */
function digest(text: unknown): string {
  const bytes = Buffer.from(typeof text === 'string' ? text : '', 'utf8');
  return `${bytes.length} B sha256:${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}`;
}

export const command: CliCommand = { name: 'outbox', main };

if (require.main === module) runCommand(command);
