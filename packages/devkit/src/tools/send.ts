import { readFileSync } from 'node:fs';
import type { ParseArgsConfig } from 'node:util';

import type { ServiceBusClient } from '@azure/service-bus';
import { carrierOf, traceProperties } from '@idempotent-consumers/inbox/internal';
import { ROOT_CONTEXT, SpanKind, trace, type Tracer } from '@opentelemetry/api';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';

import { LOCAL_RUN_FILE, type LocalRun, localRunContext } from '../build/localRun';
import { bounded, UsageError } from '../cli/errors';
import { appTopology } from '../cli/project';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  parseFlags,
  runCommand,
  type ToolContext,
} from '../cli/tool';
import {
  loadSubjectRules,
  type OutgoingEvent,
  parseEvent,
  parseEventLines,
  sampleShortcuts,
  type SubjectRules,
} from './events';
import { planSend, type SendPlan, sendPlanLines } from './sendPlan';
import { connectServiceBus, routedSubjects, topicFor, toServiceBusMessage } from './serviceBus';

const topology = appTopology();

const SHORTCUTS = sampleShortcuts();

const USAGE = `Usage:
  npm run send -- --subject <Subject> --body '<json>'   any subject a consumer reads (src/topology.json)
  npm run send -- --subject <Subject> --raw-body '<text>'   the text as the body, unparsed (not JSON: poison)
  npm run send -- --file <events.jsonl>      one {"subject": ..., "body": {...} or "rawBody": "...", "messageId"?: ...} per line
${Object.entries(SHORTCUTS)
  .map(
    ([kind, { flags }]) =>
      `  npm run send -- ${kind.padEnd(7)} ${Object.keys(flags)
        .map((flag) => `--${flag} <${flag}>`)
        .join(' ')}`,
  )
  .join('\n')}
Options:
  --repeat <n>        send every event n times with the same MessageId (default 1), to watch duplicates
  --message-id <id>   override the MessageId of an event built from flags (default: derived from the event)
  --allow-invalid     send events their consumers' schemas refuse (or a body that is not JSON) anyway:
                      poison messages, on purpose, to watch the dead-letter queue act (default: refuse them)
  --topic <name>      default: the topic in src/topology.json whose subscriptions filter on the subject
  --dry-run           say what would be sent and send nothing: topic, MessageId, body size and SHA-256,
                      the subscriptions whose filters take it, and which consumers accept or refuse it
Environment:
  SERVICEBUS_NAMESPACE=<name>.servicebus.windows.net   signs in with DefaultAzureCredential (azd auth login or az login)
  SERVICEBUS_CONNECTION_STRING=...;UseDevelopmentEmulator=true;   the emulator or the local peer only
  neither: the local Service Bus of a running npm start (its settings file, ${LOCAL_RUN_FILE} to move it)`;

let ownTracer: Tracer | undefined;
/**
 * The tool's tracer: a provider of its own, which makes real W3C ids and exports nothing (the
 * operator finds the trace id in Application Insights from the consumers' side).
 */
function tracer(): Tracer {
  return (ownTracer ??= new BasicTracerProvider().getTracer('npm run send'));
}

/** Every flag a shortcut takes. */
const EVENT_FLAGS = [...new Set(Object.values(SHORTCUTS).flatMap(({ flags }) => Object.keys(flags)))];

export async function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values, positionals } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return EXIT_CODES.ok;
  }
  const repeat = positiveInteger(values.repeat ?? '1', '--repeat');
  const rules = await loadSubjectRules({ warn: context.err });
  const events = eventsFrom(values, positionals, rules);

  const { env, localRun } = localRunContext(context);
  const plans = events.map((event) =>
    planSend(event, {
      // The topic src/topology.json carries the subject on; routed by the running npm start's filters.
      topic: topicFor(event.subject, values.topic, topology),
      copies: repeat,
      topology: localRun?.topology ?? topology,
    }),
  );
  if (values['dry-run']) {
    for (const plan of plans) for (const line of sendPlanLines(plan)) context.out(line);
    context.out('Dry run: nothing was sent.');
    return EXIT_CODES.ok;
  }
  const { client, description } = connectServiceBus(env);
  const unrouted = new Map<string, Set<string>>();
  try {
    let sent = 0;
    for (const plan of plans) {
      const { event } = plan;
      const result = await sendEvent(client, plan);
      if (result.unrouted) {
        unrouted.set(result.topic, (unrouted.get(result.topic) ?? new Set()).add(event.subject));
      }
      for (let copy = 1; copy <= result.copies; copy++) {
        sent++;
        const body = copy === 1 ? ` ${bodyText(event.body)}` : '';
        const note = repeat > 1 ? ` (copy ${copy} of ${repeat}, same MessageId)` : '';
        const poison = result.poison ? `; expected to be poison (${result.poison})` : '';
        context.out(
          `sent ${event.subject} messageId=${bounded(result.messageId, 128)} to ${result.topic}${body}${note}${poison}` +
            ` (trace ${result.traceId})`,
        );
      }
    }
    context.out(`Sent ${sent} message(s), ${events.length} event(s), to ${description}.`);
    for (const [topic, subjects] of unrouted) context.err(unroutedWarning(topic, [...subjects], localRun));
    if (repeat > 1 || new Set(events.map((e) => e.messageId)).size < events.length) {
      const window = bounded(env.SERVICEBUS_DUPLICATE_WINDOW?.trim() || 'PT1H', 20);
      context.out(
        `Every send reports success, but within the topic duplicate detection window (${window}) Service Bus keeps only ` +
          "the first copy of a MessageId; after it, a repeat is delivered and the consumer's inbox absorbs it.",
      );
    }
    const poisoned = [...new Set(events.filter((e) => e.poison).map((e) => e.subject))];
    if (poisoned.length > 0) {
      const subscriptions = poisoned.flatMap((subject) => [...(rules.get(subject)?.schemas.keys() ?? [])]);
      context.out(
        'Sent with --allow-invalid: the consumers refuse the poison message(s), the host retries them until ' +
          'maxDeliveryCount and Service Bus dead-letters them. Watch: ' +
          subscriptions.map((name) => `npm run peek -- ${name} --dead-letter`).join(', ') +
          '.',
      );
    }
    return EXIT_CODES.ok;
  } finally {
    await client.close();
  }
}

/** What sendEvent did: plain data, for the command line and a web form alike. */
export interface SentEvent {
  topic: string;
  /** As the event has it (the caller's own); bound it where it is echoed. */
  messageId: string;
  /** The W3C trace id the copies carry: the operation_Id of their deliveries in Application Insights. */
  traceId: string;
  /** How many copies were sent, all with the same MessageId. */
  copies: number;
  /** No subscription of the topic takes its Subject: Service Bus reported success and dropped it. */
  unrouted: boolean;
  /** Why its consumers are expected to refuse it (an event sent with --allow-invalid). */
  poison?: string;
}

/**
 * Sends what the plan says (sendPlan.ts): its event, its copies with the same MessageId, to its
 * topic, as one new trace: the copies carry the trace properties, and so does what its consumers
 * publish.
 */
export async function sendEvent(client: ServiceBusClient, plan: SendPlan): Promise<SentEvent> {
  const { event, topic } = plan;
  const sender = client.createSender(topic);
  const span = tracer().startSpan(
    `send ${topic}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: { 'messaging.system': 'servicebus', 'messaging.destination.name': topic },
    },
    ROOT_CONTEXT,
  );
  const carrier = carrierOf(trace.setSpan(ROOT_CONTEXT, span));
  const message = { ...toServiceBusMessage(event), applicationProperties: traceProperties(carrier) };
  try {
    for (let copy = 1; copy <= plan.copies; copy++) await sender.sendMessages(message);
  } finally {
    span.end();
    await sender.close();
  }
  return {
    topic,
    messageId: event.messageId,
    traceId: span.spanContext().traceId,
    copies: plan.copies,
    unrouted: plan.subscriptions.length === 0,
    ...(event.poison ? { poison: event.poison } : {}),
  };
}

/**
 * Service Bus accepts a message that no subscription of its topic takes, reports success, and
 * drops it. Against a running npm start the tool knows its broker's subscriptions; otherwise those
 * src/topology.json declares (what azd deploys).
 */
function unroutedWarning(topic: string, subjects: string[], localRun: LocalRun | undefined): string {
  const named = subjects.map((subject) => bounded(subject, 100)).join(', ');
  const where = localRun?.topology === undefined ? 'in src/topology.json' : 'in the running npm start';
  const declaredNow = subjects.filter((subject) => routedSubjects(topic, topology).has(subject));
  const restart =
    localRun?.topology !== undefined && declaredNow.length > 0
      ? ` src/topology.json now has a subscription for ${declaredNow.join(', ')} that the running npm start has not loaded (it runs without watch mode): restart it.`
      : '';
  return (
    `Warning: no subscription of ${bounded(topic, 60)} ${where} takes ${named}: Service Bus reported success ` +
    `and dropped the message(s), as it drops every message no subscription takes.${restart}`
  );
}

/** The body as the user gave it, on one line and cut short: JSON, or a raw body's text. */
function bodyText(body: unknown): string {
  return bounded(
    Buffer.isBuffer(body) ? `(raw) ${body.toString('utf8')}` : (JSON.stringify(body) ?? ''),
    200,
  );
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
    subject: { type: 'string' },
    body: { type: 'string' },
    'raw-body': { type: 'string' },
    'allow-invalid': { type: 'boolean' },
    'dry-run': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
    ...Object.fromEntries(EVENT_FLAGS.map((flag) => [flag, { type: 'string' as const }])),
  },
} satisfies ParseArgsConfig;

function eventsFrom(
  values: Flags,
  positionals: string[],
  rules: ReadonlyMap<string, SubjectRules>,
): OutgoingEvent[] {
  const given = EVENT_FLAGS.filter((flag) => (values as Record<string, unknown>)[flag] !== undefined);
  const messageId = values['message-id'];
  const allowInvalid = Boolean(values['allow-invalid']);
  const rawBody = values['raw-body'];
  if (values.file !== undefined) {
    if (
      positionals.length > 0 ||
      given.length > 0 ||
      messageId !== undefined ||
      values.subject !== undefined ||
      values.body !== undefined ||
      rawBody !== undefined
    ) {
      throw new UsageError('--file takes its events from the file; drop the event kind and its flags.');
    }
    let text: string;
    try {
      text = readFileSync(values.file, 'utf8');
    } catch (error) {
      throw new UsageError(
        `Cannot read '${bounded(values.file)}' (${(error as NodeJS.ErrnoException).code ?? 'error'}).`,
        { cause: error },
      );
    }
    return parseEventLines(text, values.file, rules, allowInvalid);
  }
  const withId = messageId === undefined ? {} : { messageId };
  if (values.subject !== undefined || values.body !== undefined || rawBody !== undefined) {
    if (
      values.subject === undefined ||
      (values.body === undefined) === (rawBody === undefined) ||
      positionals.length > 0 ||
      given.length > 0
    ) {
      throw new UsageError(
        `--subject goes with one of --body and --raw-body, without an event kind or its flags.\n${USAGE}`,
      );
    }
    const where = `--subject/--${rawBody === undefined ? 'body' : 'raw-body'}`;
    if (rawBody !== undefined) {
      return [parseEvent({ subject: values.subject, rawBody, ...withId }, where, rules, allowInvalid)];
    }
    let body: unknown;
    try {
      body = JSON.parse(values.body!);
    } catch (error) {
      throw new UsageError(
        `--body is not JSON (${(error as Error).message}); --raw-body sends text as it is.`,
        { cause: error },
      );
    }
    return [parseEvent({ subject: values.subject, body, ...withId }, where, rules, allowInvalid)];
  }
  const [kind, ...extra] = positionals;
  const shortcut = kind === undefined ? undefined : SHORTCUTS[kind];
  if (shortcut === undefined || extra.length > 0) {
    const kinds = Object.keys(SHORTCUTS).join(', ');
    throw new UsageError(
      `Say what to send: --subject <Subject> --body <json>, --file <events.jsonl>${kinds ? `, or ${kinds}` : ''}.\n${USAGE}`,
    );
  }
  const fields = shortcut.flags;
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
  return [parseEvent({ subject: shortcut.subject, body, ...withId }, `${kind} flags`, rules, allowInvalid)];
}

function numberFlag(text: string, flag: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value))
    throw new UsageError(`${flag} must be a number; got '${bounded(text)}'.`);
  return value;
}

function positiveInteger(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > 100) {
    throw new UsageError(`${flag} must be a whole number from 1 to 100; got '${bounded(text)}'.`);
  }
  return value;
}

export const command: Command = { name: 'send', main };

if (require.main === module) runCommand(command);
