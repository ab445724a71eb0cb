import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ParseArgsConfig } from 'node:util';

import {
  CONSUMER_NAME,
  ENTITY_NAME,
  functionNameOf,
  type Topology,
} from '@idempotent-consumers/inbox/internal';

import { UsageError } from '../cli/errors';
import { formatted } from '../cli/formatted';
import { appTopology, PROJECT_ROOT, relative, writeTopology } from '../cli/project';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  runCommand,
  type ToolContext,
} from '../cli/tool';
import { writeEmulatorConfig } from '../emulators/generateConfig';
import { loadConsumers } from './consumers';

const topology = appTopology();

const USAGE = `Usage:
  npm run new:consumer -- --name <area.consumer> --topic <topic> --subject <Subject> [--kind inbox|versioned]
  npm run new:consumer -- --name <area.consumer> --topic <topic> --subject <Subject> --fan-out --example-body '<json>'
  npm run new:consumer -- --remove <area.consumer> [--force]
Writes a working consumer of <Subject> messages on <topic>, and everything that registers, deploys and tests it:
  src/consumers/<function>.ts          its message schema (zod) and handler
  functions/<function>.ts              its function: app.serviceBusTopic(...consumerTrigger(consumer))
  src/topology.json                    its subscription, named <area.consumer> (and the topic, if new)
  emulators/servicebus-config.json     regenerated, as npm run emulators:config does
  test/functions/<function>.test.ts    delivered through the worker path against the local Cosmos DB server
where <function> is the name with '-' for '.': billing.refund-issuer → billing-refund-issuer.
Options:
  --name <area.consumer>   lowercase words joined by '-', dotted: the consumer, its subscription (3-50 characters)
  --topic <topic>          an existing topic of src/topology.json, or a new one (letters, digits, '.', '-', '_')
  --subject <Subject>      the event's name, the Subject its subscription filters on: PascalCase, e.g. RefundIssued
  --kind inbox             (default) an effect applied exactly once: an inbox marker commits with it
  --kind versioned         the message carries absolute state and a version: written only over an older one
  --fan-out                another consumer of a subject a consumer of the topic already reads: it takes that
                           consumer's schema and partition key (an inbox consumer's), and counts the messages
  --example-body <json>    with --fan-out: a body that consumer's schema takes, for the generated test
  --remove <area.consumer> undo: delete the three files it wrote and its subscription (the topic too, when the
                           scaffold created it and nothing else is on it), and regenerate the emulator config;
                           refused when a file was changed since, unless --force`;

const FLAGS = {
  allowPositionals: false,
  strict: true,
  options: {
    name: { type: 'string' },
    topic: { type: 'string' },
    subject: { type: 'string' },
    kind: { type: 'string' },
    'fan-out': { type: 'boolean' },
    'example-body': { type: 'string' },
    remove: { type: 'string' },
    force: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
} satisfies ParseArgsConfig;

/** The event's name: also the schema's identifier in the generated module, so PascalCase letters and digits. */
const SUBJECT = /^[A-Z][A-Za-z0-9]{0,99}$/;
const KINDS = ['inbox', 'versioned'] as const;
type Kind = (typeof KINDS)[number];

export interface ConsumerRequest {
  name: string;
  topic: string;
  subject: string;
  kind: Kind;
  /**
   * The topic declared the subject unsubscribed (its publishers send it, no one took it); the
   * subscription takes it now. The source says so, so that --remove puts it back.
   */
  wasUnsubscribed?: boolean;
  /** A second consumer of a subject another consumer reads (`--fan-out`): it takes that one's schema. */
  fanOut?: FanOut;
}

export interface FanOut {
  /** The consumer that reads the subject already. */
  from: string;
  /** Its export, and the module its function file imports it from (relative to functions/). */
  identifier: string;
  module: string;
  /** A body its schema takes (`--example-body`), for the generated test. */
  example: unknown;
}

/** Where each file of a consumer goes. */
export function consumerFiles(name: string): {
  source: string;
  functionFile: string;
  test: string;
  /** --fan-out's example body, which its test reads. */
  example: string;
} {
  const functionName = functionNameOf(name);
  return {
    source: path.join(PROJECT_ROOT, 'src', 'consumers', `${functionName}.ts`),
    functionFile: path.join(PROJECT_ROOT, 'functions', `${functionName}.ts`),
    test: path.join(PROJECT_ROOT, 'test', 'functions', `${functionName}.test.ts`),
    example: path.join(PROJECT_ROOT, 'test', 'functions', `${functionName}.example.json`),
  };
}

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  if (values.remove !== undefined)
    return removeConsumer(values.remove, Boolean(values.force), values, context);
  if (values.force) throw new UsageError(`--force goes with --remove.\n${USAGE}`);
  const checked = checkedRequest(values, topology);
  const fanOut = values['fan-out']
    ? await fanOutOf(
        checked.subject,
        readersOf(topology, checked.topic, checked.subject),
        values['example-body'],
      )
    : undefined;
  const wasUnsubscribed = topology.topics.some(
    (topic) => topic.name === checked.topic && topic.unsubscribedSubjects?.includes(checked.subject) === true,
  );
  const request = {
    ...checked,
    ...(wasUnsubscribed ? { wasUnsubscribed } : {}),
    ...(fanOut ? { fanOut } : {}),
  };
  const files = consumerFiles(request.name);
  const texts = await generatedFiles(request);

  const declared = withSubscription(topology, request);
  await writeTopology(declared);
  for (const [file, text] of texts) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  const emulatorLines = writeEmulatorConfig(declared);
  const newTopic = !topology.topics.some((topic) => topic.name === request.topic);

  context.out(
    `Added the ${request.kind} consumer ${request.name} of ${request.subject} on ${request.topic}` +
      (fanOut
        ? ` (fan-out: ${fanOut.from} reads it too, each applies it once; ${fanOut.from}'s schema)`
        : '') +
      ':',
  );
  context.out(
    `  ${relative(files.source)}   its schema and handler: replace the sample fields and effect with yours`,
  );
  context.out(`  ${relative(files.functionFile)}   its function, ${functionNameOf(request.name)}`);
  context.out(
    `  src/topology.json   the subscription ${request.name}${newTopic ? `, on the new topic ${request.topic}` : ''}` +
      (wasUnsubscribed ? `; ${request.subject} is no longer among the topic's unsubscribedSubjects` : ''),
  );
  context.out(`  ${emulatorLines[0] ?? ''} (only for the Docker emulators, if you use them)`);
  context.out(
    `  ${relative(files.test)}   processed once, a redelivery is a duplicate, a bad body is poison`,
  );
  if (fanOut) context.out(`  ${relative(files.example)}   the example body its test sends`);
  context.out('Next:');
  context.out(`  npx jest ${relative(files.test)} packages/inbox/test/topology.test.ts   then npm test`);
  context.out(
    '  npm start   (if it runs in watch mode, on by default in a terminal, it has restarted with the consumer and its subscription)',
  );
  context.out(
    `  npm run send -- --subject ${request.subject} --body '${JSON.stringify(exampleBody(request))}'   (in another terminal: npm start's terminal shows the delivery)`,
  );
  context.out(
    '  azd up (or azd provision, then azd deploy): the subscription, its filter and its role are Bicep resources; azd deploy alone ships only code, and until a provision the new consumer gets nothing',
  );
  context.out(`Undo: npm run new:consumer -- --remove ${request.name}`);
  return EXIT_CODES.ok;
}

/** What the scaffold writes for a request, each file as [path, text] after `format` (prettier's). */
export async function generatedFiles(
  request: ConsumerRequest,
  format: (file: string, text: string) => Promise<string> = formatted,
): Promise<[string, string][]> {
  const files = consumerFiles(request.name);
  const identifier = camelCase(functionNameOf(request.name));
  const sources = {
    [files.source]: request.fanOut
      ? fanOutSource(request, request.fanOut, identifier)
      : request.kind === 'inbox'
        ? inboxSource(request, identifier)
        : versionedSource(request, identifier),
    [files.functionFile]: functionSource(request, identifier),
    [files.test]: request.fanOut
      ? fanOutTest(request, request.fanOut)
      : request.kind === 'inbox'
        ? inboxTest(request)
        : versionedTest(request),
    ...(request.fanOut ? { [files.example]: `${JSON.stringify(request.fanOut.example, null, 2)}\n` } : {}),
  };
  return Promise.all(
    Object.entries(sources).map(async ([file, text]): Promise<[string, string]> => [
      file,
      await format(file, text),
    ]),
  );
}

/** The request, or a usage error naming every problem; nothing is written before this passes. */
export function checkedRequest(
  values: {
    name?: string;
    topic?: string;
    subject?: string;
    kind?: string;
    'fan-out'?: boolean;
    'example-body'?: string;
  },
  declared: Topology,
): ConsumerRequest {
  const { name, topic, subject } = values;
  const kind = values.kind ?? 'inbox';
  if (name === undefined || topic === undefined || subject === undefined) {
    const missing = (['name', 'topic', 'subject'] as const).filter((flag) => values[flag] === undefined);
    throw new UsageError(`Missing ${missing.map((flag) => `--${flag}`).join(', ')}.\n${USAGE}`);
  }
  const problems: string[] = [];
  if (!CONSUMER_NAME.test(name)) {
    problems.push(
      `--name ${bounded(name)} is not a consumer name: lowercase words joined by '-', with at least one '.' (area.consumer), 3 to 50 characters`,
    );
  }
  if (!ENTITY_NAME.test(topic)) {
    problems.push(
      `--topic ${bounded(topic)} is not a Service Bus topic name: letters, digits, '.', '-' or '_', starting and ending with a letter or digit, at most 50 characters`,
    );
  }
  if (!SUBJECT.test(subject)) {
    problems.push(
      `--subject ${bounded(subject)} is not an event name: PascalCase letters and digits, e.g. RefundIssued`,
    );
  }
  if (!(KINDS as readonly string[]).includes(kind)) {
    problems.push(`--kind ${bounded(kind)}: inbox or versioned`);
  }
  if (problems.length === 0) problems.push(...collisions(name, declared));
  if (problems.length === 0)
    problems.push(...fanOutProblems(values, declared, { name, topic, subject, kind }));
  if (problems.length > 0) throw new UsageError(`${problems.join('\n')}\n${USAGE}`);
  return { name, topic, subject, kind: kind as Kind };
}

/** Names already taken: a consumer (its subscription), its function name, or one of its files. */
function collisions(name: string, declared: Topology): string[] {
  const problems: string[] = [];
  const functionName = functionNameOf(name);
  for (const topic of declared.topics) {
    for (const subscription of topic.subscriptions) {
      if (subscription.name === name) {
        problems.push(`--name ${name}: src/topology.json already declares it, on the topic ${topic.name}`);
      } else if (functionNameOf(subscription.name) === functionName) {
        problems.push(`--name ${name}: its function, ${functionName}, is already ${subscription.name}'s`);
      }
    }
  }
  for (const file of Object.values(consumerFiles(name))) {
    if (existsSync(file)) problems.push(`--name ${name}: ${relative(file)} already exists`);
  }
  return problems;
}

/** The consumers of the topic that read the subject already. */
function readersOf(declared: Topology, topic: string, subject: string): string[] {
  return (declared.topics.find((t) => t.name === topic)?.subscriptions ?? [])
    .filter((s) => s.subjects.includes(subject))
    .map((s) => s.name);
}

/**
 * A subject another consumer of the topic reads takes --fan-out (two consumers of one stream is a
 * choice), which takes --example-body and an inbox consumer; --fan-out needs such a consumer.
 */
function fanOutProblems(
  values: { 'fan-out'?: boolean; 'example-body'?: string },
  declared: Topology,
  { topic, subject, kind }: { name: string; topic: string; subject: string; kind: string },
): string[] {
  const readers = readersOf(declared, topic, subject);
  const fanOut = values['fan-out'] === true;
  if (!fanOut) {
    if (values['example-body'] !== undefined) return ['--example-body goes with --fan-out'];
    return readers.length === 0
      ? []
      : [
          `--subject ${subject}: ${readers.join(' and ')} already read${readers.length === 1 ? 's' : ''} it on ${topic}. ` +
            `Another consumer of the same messages (fan-out) is legitimate: add --fan-out and --example-body '<json>', ` +
            `and the new consumer takes ${readers[0]}'s schema`,
        ];
  }
  if (readers.length === 0)
    return [`--fan-out: no consumer reads ${subject} on ${topic}; leave --fan-out out`];
  const problems: string[] = [];
  if (kind !== 'inbox') problems.push('--fan-out writes an inbox consumer; leave --kind out');
  if (values['example-body'] === undefined) {
    problems.push(
      `--fan-out needs --example-body '<json>': a ${subject} body ${readers[0]}'s schema takes, for the test`,
    );
  }
  return problems;
}

/**
 * What a fan-out consumer takes from the consumer that reads the subject already: its export and
 * module (from its function file, which registers it), and the example body, checked with its
 * schema as the app registers it.
 */
async function fanOutOf(
  subject: string,
  readers: string[],
  exampleText: string | undefined,
): Promise<FanOut> {
  const from = readers[0]!;
  const functionFile = consumerFiles(from).functionFile;
  const text = existsSync(functionFile) ? readFileSync(functionFile, 'utf8') : '';
  const identifier = /consumerTrigger\((\w+)\)/.exec(text)?.[1];
  const imported =
    identifier === undefined
      ? undefined
      : new RegExp(`import \\{[^}]*\\b${identifier}\\b[^}]*\\} from '([^']+)'`).exec(text)?.[1];
  if (identifier === undefined || imported === undefined) {
    throw new UsageError(
      `--fan-out: ${relative(functionFile)} does not register ${from} as new:consumer writes it (app.serviceBusTopic(...consumerTrigger(<consumer>)) with the consumer imported); write this consumer by hand.`,
    );
  }
  const consumer = (await loadConsumers({ definitionsOnly: true })).get(from);
  if (consumer?.kind !== 'inbox') {
    throw new UsageError(
      `--fan-out: ${from} is a versioned consumer, which has no partition key to share; write this consumer by hand.`,
    );
  }
  let example: unknown;
  try {
    example = JSON.parse(exampleText ?? '');
  } catch (error) {
    throw new UsageError(`--example-body is not JSON (${bounded((error as Error).message)}).`, {
      cause: error,
    });
  }
  const parsed = consumer.schema.safeParse(example);
  if (!parsed.success) {
    const issues = parsed.error.issues
      .slice(0, 5)
      .map((issue) => `${issue.path.map(String).join('.') || '(body)'}: ${issue.message}`);
    throw new UsageError(`--example-body is not a ${subject} ${from}'s schema takes: ${issues.join('; ')}.`);
  }
  return { from, identifier, module: imported, example };
}

/**
 * Undoes new:consumer: the files it wrote (when they are still what it wrote, unless `force`), the
 * subscription, and the topic when nothing else is declared on it; the emulator config follows.
 */
async function removeConsumer(
  name: string,
  force: boolean,
  values: { topic?: string; subject?: string; kind?: string; name?: string },
  context: ToolContext,
): Promise<ExitCode> {
  const extra = (['name', 'topic', 'subject', 'kind'] as const).filter((flag) => values[flag] !== undefined);
  if (extra.length > 0) {
    throw new UsageError(
      `--remove takes only a consumer's name (and --force), not ${extra.map((f) => `--${f}`).join(', ')}.\n${USAGE}`,
    );
  }
  const topic = topology.topics.find((t) => t.subscriptions.some((s) => s.name === name));
  const subscription = topic?.subscriptions.find((s) => s.name === name);
  if (!topic || !subscription) {
    throw new UsageError(`--remove ${bounded(name)}: src/topology.json declares no such consumer.`);
  }
  if (topology.topics.some((t) => t.publishers?.includes(name))) {
    throw new UsageError(
      `--remove ${name}: it publishes through its outbox ("publishers" in src/topology.json); the scaffold never writes that, so remove it by hand.`,
    );
  }
  const files = consumerFiles(name);
  const present = Object.values(files).filter((file) => existsSync(file));
  const request = { name, topic: topic.name, subject: subscription.subjects[0] ?? '' };
  const variants: ConsumerRequest[] = KINDS.flatMap((kind) =>
    [false, true].map((wasUnsubscribed) => ({ ...request, kind, wasUnsubscribed })),
  );
  const fanOut = await writtenFanOut(name, request, files);
  if (fanOut) variants.push({ ...request, kind: 'inbox', fanOut });
  const written = await Promise.all(variants.map((variant) => generatedFiles(variant)));
  const unchanged = written.find((texts) =>
    texts.every(([file, text]) => !existsSync(file) || readFileSync(file, 'utf8') === text),
  );
  if (!unchanged && !force) {
    const changed = present.filter((file) =>
      written.every((texts) => texts.find(([path]) => path === file)?.[1] !== readFileSync(file, 'utf8')),
    );
    throw new UsageError(
      `--remove ${name}: ${changed.map(relative).join(', ')} changed since new:consumer wrote ${changed.length === 1 ? 'it' : 'them'}; ` +
        'removing would lose that work. Pass --force to remove anyway.',
    );
  }
  const source = existsSync(files.source) ? readFileSync(files.source, 'utf8') : '';
  const putBack = source.includes(UNSUBSCRIBED_MARK) ? subscription.subjects[0] : undefined;
  const declared = withoutSubscription(topology, name, putBack);
  await writeTopology(declared);
  for (const file of present) rmSync(file);
  const emulatorLines = writeEmulatorConfig(declared);
  const topicGone = !declared.topics.some((t) => t.name === topic.name);
  context.out(`Removed the consumer ${name} of ${subscription.subjects.join(', ')} on ${topic.name}:`);
  for (const file of present) context.out(`  ${relative(file)}   deleted`);
  context.out(
    `  src/topology.json   without the subscription ${name}${topicGone ? `, and without the topic ${topic.name}, now empty` : ''}` +
      (putBack === undefined ? '' : `; ${putBack} is among the topic's unsubscribedSubjects again`),
  );
  context.out(`  ${emulatorLines[0] ?? ''} (only for the Docker emulators, if you use them)`);
  context.out(
    'A deployment keeps the subscription until the next azd up (or azd provision), which deletes it; npm start in watch mode drops it at once (without, at its next start).',
  );
  return EXIT_CODES.ok;
}

/**
 * What --fan-out took when it wrote this consumer, read back from its files (the example body is in
 * its test), or undefined when it was not a fan-out or cannot be read back (then it counts as changed).
 */
async function writtenFanOut(
  name: string,
  request: { topic: string; subject: string },
  files: ReturnType<typeof consumerFiles>,
): Promise<FanOut | undefined> {
  const source = existsSync(files.source) ? readFileSync(files.source, 'utf8') : '';
  if (!source.includes('npm run new:consumer --fan-out')) return undefined;
  const example = existsSync(files.example) ? readFileSync(files.example, 'utf8') : undefined;
  const readers = readersOf(topology, request.topic, request.subject).filter((reader) => reader !== name);
  try {
    return await fanOutOf(request.subject, readers, example);
  } catch {
    return undefined;
  }
}

/**
 * The topology without a consumer's subscription (withSubscription's inverse): a subject it had
 * taken out of the topic's unsubscribedSubjects goes back (`putBack`), and the topic goes when
 * nothing else is declared on it (no subscription, publisher or unsubscribed subject).
 */
export function withoutSubscription(declared: Topology, name: string, putBack?: string): Topology {
  return {
    topics: declared.topics.flatMap((topic) => {
      if (!topic.subscriptions.some((s) => s.name === name)) return [topic];
      // Rebuilt in the file's key order: unsubscribedSubjects before subscriptions.
      const { unsubscribedSubjects, subscriptions: all, ...rest } = topic;
      const subscriptions = all.filter((s) => s.name !== name);
      const unsubscribed = [...(unsubscribedSubjects ?? []), ...(putBack === undefined ? [] : [putBack])];
      if (subscriptions.length === 0 && (topic.publishers ?? []).length === 0 && unsubscribed.length === 0) {
        return [];
      }
      return [
        {
          ...rest,
          ...(unsubscribed.length > 0 ? { unsubscribedSubjects: unsubscribed } : {}),
          subscriptions,
        },
      ];
    }),
  };
}

/**
 * The topology with the consumer's subscription. A subject the topic declared unsubscribed is one
 * now: it leaves "unsubscribedSubjects" (and the key goes with its last subject).
 */
export function withSubscription(declared: Topology, request: ConsumerRequest): Topology {
  const subscription = { name: request.name, subjects: [request.subject] };
  const exists = declared.topics.some((topic) => topic.name === request.topic);
  if (!exists)
    return { topics: [...declared.topics, { name: request.topic, subscriptions: [subscription] }] };
  return {
    topics: declared.topics.map((topic) => {
      if (topic.name !== request.topic) return topic;
      const { unsubscribedSubjects, ...rest } = topic;
      const left = (unsubscribedSubjects ?? []).filter((subject) => subject !== request.subject);
      return {
        ...rest,
        ...(left.length > 0 ? { unsubscribedSubjects: left } : {}),
        subscriptions: [...topic.subscriptions, subscription],
      };
    }),
  };
}

/** Echoed values stay short. */
const bounded = (text: string): string => JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text);

const camelCase = (functionName: string): string =>
  functionName.replace(/-([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());

function exampleBody(request: ConsumerRequest): unknown {
  if (request.fanOut) return request.fanOut.example;
  return request.kind === 'inbox' ? { id: 'A-1', quantity: 2 } : { id: 'A-1', state: 'Ready', version: 1 };
}

const BUSINESS_ID = `/** Business ids become document ids and partition keys: characters Cosmos DB allows, at most 100. */
const businessId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/, 'must be 1-100 letters, digits, ".", "_", ":" or "-"');`;

/** A sentence of the consumer's doc comment that --remove reads back. */
function unsubscribedNote({ topic, subject, wasUnsubscribed }: ConsumerRequest): string {
  return wasUnsubscribed
    ? `\n *\n * ${subject} was among ${topic}'s unsubscribedSubjects before this consumer took it: ${UNSUBSCRIBED_MARK}.`
    : '';
}

const UNSUBSCRIBED_MARK = 'new:consumer -- --remove puts it back';

function inboxSource(request: ConsumerRequest, identifier: string): string {
  const { name, subject } = request;
  return `import { defineInboxConsumer } from '@idempotent-consumers/inbox';
import { z } from 'zod';

${BUSINESS_ID}

/** The ${subject} event. Generated by npm run new:consumer: replace these fields with your event's. */
export const ${subject} = z.object({
  /** What the event is about: the id of the document it changes. */
  id: businessId,
  quantity: z.number().int().positive().max(1_000_000),
});
export type ${subject} = z.infer<typeof ${subject}>;

/** The document ${name} keeps per id: how many events it applied, and their total quantity. */
export interface ${subject}Total {
  id: string;
  partitionKey: string;
  type: '${name}';
  events: number;
  quantity: number;
  [property: string]: unknown;
}

/** Everything about one id lives in one logical partition, with the markers of its messages. */
export const ${identifier}Partition = (id: string): string => \`${name}:\${id}\`;

/**
 * ${subject} → the id's total counts one more event and adds the quantity, exactly once per
 * message: the inbox marker commits in the same transactional batch. The first attempt increments;
 * when the total does not exist yet (404), the handler runs again and creates it.${unsubscribedNote(request)}
 */
export const ${identifier} = defineInboxConsumer({
  name: '${name}',
  schema: ${subject},
  examples: [{ id: 'A-1', quantity: 3 }],
  partitionKey: (event) => ${identifier}Partition(event.id),

  handle(event, tx) {
    if (tx.failed('add', 404)) {
      const total: ${subject}Total = {
        id: event.id,
        partitionKey: tx.partitionKey,
        type: '${name}',
        events: 1,
        quantity: event.quantity,
      };
      tx.create(total, { name: 'create' });
      return;
    }
    tx.patch(
      event.id,
      [
        { op: 'incr', path: '/events', value: 1 },
        { op: 'incr', path: '/quantity', value: event.quantity },
      ],
      { name: 'add' },
    );
  },
});
`;
}

function fanOutSource(request: ConsumerRequest, fanOut: FanOut, identifier: string): string {
  const { name, subject } = request;
  return `import { defineInboxConsumer, type InboxConsumer } from '@idempotent-consumers/inbox';

/** The document ${name} keeps in a partition: how many ${subject} events it applied there. */
export interface ${subject}Tally {
  id: string;
  partitionKey: string;
  type: '${name}';
  events: number;
  [property: string]: unknown;
}

/** The tally's id, in the partition of the message. */
export const ${identifier}TallyId = '${name}:tally';

/**
 * ${subject}, which ${fanOut.from} reads too: the same messages reach both consumers (fan-out),
 * each applying its own effect once. This one takes the other's schema and partition key (its
 * function file passes it in), and its tally counts one more event per message, exactly once: the
 * inbox marker commits in the same transactional batch. The first attempt increments; when the
 * tally does not exist yet (404), the handler runs again and creates it. Replace it with your effect.
 * Generated by npm run new:consumer --fan-out.${unsubscribedNote(request)}
 */
export function ${identifier}Of<M>(reads: InboxConsumer<M>): InboxConsumer<M> {
  return defineInboxConsumer({
    name: '${name}',
    schema: reads.schema,
    ...(reads.examples === undefined ? {} : { examples: reads.examples }),
    partitionKey: (message) => reads.partitionKey(message),

    handle(_message, tx) {
      if (tx.failed('add', 404)) {
        const tally: ${subject}Tally = {
          id: ${identifier}TallyId,
          partitionKey: tx.partitionKey,
          type: '${name}',
          events: 1,
        };
        tx.create(tally, { name: 'create' });
        return;
      }
      tx.patch(${identifier}TallyId, [{ op: 'incr', path: '/events', value: 1 }], { name: 'add' });
    },
  });
}
`;
}

function versionedSource(request: ConsumerRequest, identifier: string): string {
  const { name, subject } = request;
  return `import { defineVersionedConsumer } from '@idempotent-consumers/inbox';
import { z } from 'zod';

${BUSINESS_ID}

/** The ${subject} event. Generated by npm run new:consumer: replace these fields with your event's. */
export const ${subject} = z.object({
  /** What the event is about: the id of the document it sets. */
  id: businessId,
  state: z.string().min(1).max(100),
  /** Increases with every change at the source. */
  version: z.number().int().nonnegative(),
});
export type ${subject} = z.infer<typeof ${subject}>;

/** Everything about one id lives in one logical partition. */
export const ${identifier}Partition = (id: string): string => \`${name}:\${id}\`;

/**
 * ${subject} → the id's document holds the state of the newest version. The event carries the
 * whole state and a version, so it is written only over an older version: repeats and late
 * arrivals are no-ops, and no inbox marker is needed.${unsubscribedNote(request)}
 */
export const ${identifier} = defineVersionedConsumer({
  name: '${name}',
  schema: ${subject},
  examples: [{ id: 'A-1', state: 'Ready', version: 1 }],
  project: (event) => ({
    id: event.id,
    partitionKey: ${identifier}Partition(event.id),
    type: '${name}',
    state: event.state,
    version: event.version,
  }),
});
`;
}

function functionSource({ name, fanOut }: ConsumerRequest, identifier: string): string {
  if (fanOut) {
    const imports = sortedAsTheLintWants([
      [fanOut.module, `import { ${fanOut.identifier} } from '${fanOut.module}';`],
      ['../src/app', `import { consumerTrigger } from '../src/app';`],
      [
        `../src/consumers/${functionNameOf(name)}`,
        `import { ${identifier}Of } from '../src/consumers/${functionNameOf(name)}';`,
      ],
    ]);
    return `import { app } from '@azure/functions';

${imports.join('\n')}

app.serviceBusTopic(...consumerTrigger(${identifier}Of(${fanOut.identifier})));
`;
  }
  return `import { app } from '@azure/functions';

import { consumerTrigger } from '../src/app';
import { ${identifier} } from '../src/consumers/${functionNameOf(name)}';

app.serviceBusTopic(...consumerTrigger(${identifier}));
`;
}

/**
 * Named imports in the order the lint's import sort (simple-import-sort) wants them: by name, as its
 * collator compares (case and `type` aside), then by code point. Each entry is [name, as written].
 */
function sortedAsTheLintWants(specifiers: [name: string, written: string][]): string[] {
  const collator = new Intl.Collator('en', { sensitivity: 'base', numeric: true });
  const compare = (a: string, b: string): number => collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
  return [...specifiers].sort(([a], [b]) => compare(a, b)).map(([, written]) => written);
}

/** A generated test's imports, in the order the lint's import sort wants them, with the consumer's. */
const testPreamble = (
  consumerImport: string,
  siblingImport?: string,
  verified = false,
): string => `${verified ? "import { verifyConsumers } from '@idempotent-consumers/devkit';\n" : ''}import { PoisonMessageError } from '@idempotent-consumers/inbox';
import { loggedOutcome, useLocalStack } from '@idempotent-consumers/local-azure';

${consumerImport}
import { deliver, type LogLine } from '../support/deliveries';${siblingImport === undefined ? '' : `\n${siblingImport}`}

const stack = useLocalStack();`;

/** npm run verify in a scaffolded consumer's test: a small size for npm test, on a fixed seed (the same runs each time). */
const VERIFY_RUNS = 5;
const VERIFY_SEED = 1;

function inboxTest({ name, subject }: ConsumerRequest): string {
  const functionName = functionNameOf(name);
  const identifier = camelCase(functionName);
  const specifiers = sortedAsTheLintWants([
    [`${subject}Total`, `type ${subject}Total`],
    [`${identifier}Partition`, `${identifier}Partition`],
  ]);
  return `${testPreamble(`import { ${specifiers.join(', ')} } from '../../src/consumers/${functionName}';`, undefined, true)}

const total = async (id: string): Promise<${subject}Total | undefined> =>
  (await stack.container.item(id, ${identifier}Partition(id)).read<${subject}Total>()).resource;

describe('${name}', () => {
  it('applies a ${subject} once, and a second one on top', async () => {
    const first = await deliver('${functionName}', { id: 'A-1', quantity: 2 }, { messageId: 'a-1' });
    await deliver('${functionName}', { id: 'A-1', quantity: 5 }, { messageId: 'a-2' });

    expect(first.settled).toBe('completed');
    expect(await total('A-1')).toMatchObject({ events: 2, quantity: 7 });
  });

  it('absorbs a redelivery of the same message as a duplicate', async () => {
    const logs: LogLine[] = [];
    await deliver('${functionName}', { id: 'A-2', quantity: 3 }, { messageId: 'a-3' });
    const again = await deliver('${functionName}', { id: 'A-2', quantity: 3 }, { messageId: 'a-3', deliveryCount: 2 }, logs);

    expect(again.settled).toBe('completed');
    expect(loggedOutcome(logs)).toBe('duplicate');
    expect(await total('A-2')).toMatchObject({ events: 1, quantity: 3 });
  });

  it('gives back a body that fails the schema as poison, writing nothing', async () => {
    const result = await deliver('${functionName}', { id: 'A-3', quantity: 'three' }, { messageId: 'a-4' });

    expect(result.error).toBeInstanceOf(PoisonMessageError);
    expect((result.error as PoisonMessageError).reason).toBe('schema-violation');
    expect(await total('A-3')).toBeUndefined();
  });

  it('applies each message once under duplicates, crashes, lost completions and races (npm run verify)', async () => {
    const [verdict] = await verifyConsumers(['${name}'], { runs: ${VERIFY_RUNS}, seed: ${VERIFY_SEED} });

    expect(verdict?.failure ?? verdict?.skipped).toBeUndefined();
    expect(verdict?.ok).toBe(true);
  }, 120_000);
});
`;
}

function fanOutTest({ name, subject }: ConsumerRequest, fanOut: FanOut): string {
  const functionName = functionNameOf(name);
  const identifier = camelCase(functionName);
  return `import { verifyConsumers } from '@idempotent-consumers/devkit';
import { PoisonMessageError } from '@idempotent-consumers/inbox';
import { loggedOutcome, useLocalStack } from '@idempotent-consumers/local-azure';

import { registeredConsumers } from '../../src/app';
import { ${identifier}TallyId } from '../../src/consumers/${functionName}';
import { deliver, loadApp, type LogLine } from '../support/deliveries';
// A ${subject} that ${fanOut.from}'s schema takes (new:consumer's --example-body).
import example from './${functionName}.example.json';

const stack = useLocalStack();

beforeAll(() => loadApp());

/** The tally in the partition the consumer, as registered, puts the example in. */
async function tally(): Promise<number> {
  const consumer = registeredConsumers().get('${name}');
  if (consumer?.kind !== 'inbox') throw new Error('functions/${functionName}.ts registers no inbox consumer ${name}');
  const partitionKey = consumer.partitionKey(example);
  return (await stack.container.item(${identifier}TallyId, partitionKey).read<{ events: number }>()).resource?.events ?? 0;
}

describe('${name}', () => {
  it('applies each ${subject} once: two messages, two events', async () => {
    const before = await tally();
    const first = await deliver('${functionName}', example, { messageId: '${functionName}-1' });
    await deliver('${functionName}', example, { messageId: '${functionName}-2' });

    expect(first.settled).toBe('completed');
    expect(await tally()).toBe(before + 2);
  });

  it('absorbs a redelivery of the same message as a duplicate', async () => {
    const logs: LogLine[] = [];
    await deliver('${functionName}', example, { messageId: '${functionName}-3' });
    const before = await tally();
    const again = await deliver('${functionName}', example, { messageId: '${functionName}-3', deliveryCount: 2 }, logs);

    expect(again.settled).toBe('completed');
    expect(loggedOutcome(logs)).toBe('duplicate');
    expect(await tally()).toBe(before);
  });

  it('gives back a body that fails the schema as poison', async () => {
    const result = await deliver('${functionName}', [], { messageId: '${functionName}-4' });

    expect(result.error).toBeInstanceOf(PoisonMessageError);
    expect((result.error as PoisonMessageError).reason).toBe('schema-violation');
  });

  it('applies each message once under duplicates, crashes, lost completions and races (npm run verify)', async () => {
    const [verdict] = await verifyConsumers(['${name}'], { runs: ${VERIFY_RUNS}, seed: ${VERIFY_SEED} });

    expect(verdict?.failure ?? verdict?.skipped).toBeUndefined();
    expect(verdict?.ok).toBe(true);
  }, 120_000);
});
`;
}

function versionedTest({ name }: ConsumerRequest): string {
  const functionName = functionNameOf(name);
  const identifier = camelCase(functionName);
  return `${testPreamble(`import { ${identifier}Partition } from '../../src/consumers/${functionName}';`, undefined, true)}

const stored = async (id: string): Promise<Record<string, unknown> | undefined> =>
  (await stack.container.item(id, ${identifier}Partition(id)).read<Record<string, unknown>>()).resource;

describe('${name}', () => {
  it('keeps the state of the newest version, whatever the order of arrival', async () => {
    const first = await deliver('${functionName}', { id: 'A-1', state: 'Ready', version: 2 }, { messageId: 'a-1-v2' });
    await deliver('${functionName}', { id: 'A-1', state: 'Draft', version: 1 }, { messageId: 'a-1-v1' });

    expect(first.settled).toBe('completed');
    expect(await stored('A-1')).toMatchObject({ state: 'Ready', version: 2 });
  });

  it('absorbs a redelivery of the same message as a duplicate', async () => {
    const logs: LogLine[] = [];
    await deliver('${functionName}', { id: 'A-2', state: 'Ready', version: 1 }, { messageId: 'a-2-v1' });
    const again = await deliver('${functionName}', { id: 'A-2', state: 'Ready', version: 1 }, { messageId: 'a-2-v1', deliveryCount: 2 }, logs);

    expect(again.settled).toBe('completed');
    expect(loggedOutcome(logs)).toBe('duplicate');
  });

  it('gives back a body that fails the schema as poison, writing nothing', async () => {
    const result = await deliver('${functionName}', { id: 'A-3', version: -1 }, { messageId: 'a-3' });

    expect(result.error).toBeInstanceOf(PoisonMessageError);
    expect((result.error as PoisonMessageError).reason).toBe('schema-violation');
    expect(await stored('A-3')).toBeUndefined();
  });

  it('keeps the newest state under duplicates, crashes, lost completions and races (npm run verify)', async () => {
    const [verdict] = await verifyConsumers(['${name}'], { runs: ${VERIFY_RUNS}, seed: ${VERIFY_SEED} });

    expect(verdict?.failure ?? verdict?.skipped).toBeUndefined();
    expect(verdict?.ok).toBe(true);
  }, 120_000);
});
`;
}

export const command: Command = { name: 'new:consumer', main };

if (require.main === module) runCommand(command);
