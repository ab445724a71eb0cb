import { statSync } from 'node:fs';
import { dirname, extname } from 'node:path';

import {
  commandWithFlags,
  duplicateWindowFlag,
  EXIT_CODES,
  type ExitCode,
  type FlagValues,
  formatted,
  numberFlag,
  runCommand,
  type ToolContext,
  usageError,
  writeFormatted,
} from '@idempotent-consumers/devkit';

import { topology } from '../src/topology';
import { causesIn, type CauseTable } from './scenario/causes';
import { demoDefaults, replayCommand } from './scenario/replay';
import {
  type CosmosOutage,
  ScenarioEnvironment,
  type ScenarioOptions,
  type ScenarioReport,
  type TopicOutage,
} from './scenario/run';
import { recordSpans, traceContinuity } from './scenario/traces';

/**
 * npm run demo: the whole pipeline offline, on an embedded default. A local Cosmos DB server, a
 * model of Service Bus and of the Functions host driving the real registered handlers, a workload
 * with producer resends, poison and faults; then a report and the invariant verdict.
 */
const usage = `Usage: npm run demo -- [options]

  --messages <n>          distinct business events to publish (default 3000)
  --seed <n>              seed for the workload and the faults (default: random, printed)
  --resend-inside <rate>  share of events the producer sends twice at once (default 0.05)
  --resend-outside <rate> share of events sent again after the duplicate window (default 0.03)
  --poison <rate>         share of poison messages (default 0.01)
  --remint <rate>         share of payments the producer sends again at once under a fresh MessageId,
                          which only the payment applier's event key can absorb (default 0.01)
  --crash-before <rate>   host dies before the handler commits (default 0.01)
  --crash-after <rate>    host dies after the commit, before completing (default 0.01)
  --completion-lost <rate> the completion never reaches Service Bus (default 0.01)
  --cosmos-429 <rate>     Cosmos DB throttles a write (the SDK retries) (default 0.02)
  --cosmos-503 <rate>     Cosmos DB is unavailable for a write (default 0.01)
  --cosmos-drop <rate>    a write commits but its response is lost (default 0.01)
  --slow <rate>           a write outlasts the message lock (default 0.002)
  --relay-send-fail <rate>  an outbox send to Service Bus fails (default 0.02)
  --relay-ack-lost <rate>   an outbox send is taken but reported failed (default 0.01)
  --relay-crash <rate>      the relay's instance dies after a page, before its checkpoint (default 0.01)
  --relay-checkpoint-lost <rate>
                          the checkpoint write after a relay page is lost (default 0.01)
  --relay-restart <rate>    the relay's host stops mid-page; another instance takes the lease (default 0.005)
  --cosmos-outage <start-minute>:<minutes>
                          every Cosmos DB request fails (503) from that model minute after publishing
                          starts, for that many minutes; repeatable
  --cosmos-throttling <start-minute>:<minutes>
                          every Cosmos DB request is throttled (429 beyond the SDK's retries); repeatable
  --topic-refuses <topic>:<start-minute>:<minutes>
                          the topic refuses every outbox send (its Data Sender role missing) from that
                          model minute after publishing starts, for that many minutes; repeatable. The
                          invariant 'topics' checks that the other topics' events are sent meanwhile
  --slow-dependency <start-minute>:<minutes>
                          the delayed-retry consumers' dependency (the payment applier's pricing or
                          fraud service) times out from that model minute after publishing starts, for
                          that many minutes: their handlers throw, and delayedRetry (src/topology.json)
                          schedules copies for later; repeatable
  --concurrency <n>       host.json maxConcurrentCalls per function (default 16)
  --duplicate-window <d>  the topics' duplicate detection window, and the app's SERVICEBUS_DUPLICATE_WINDOW
                          (ISO 8601, PT20S to P7D; default PT1H). A short one lets the relay's resends
                          through to the inboxes (relay_resend in Duplicates by cause)
  --json                  print one JSON object on stdout (progress still goes to stderr)
  --out <file>            write the report to this file instead of stdout, formatted as the repository's
                          prettier config wants it (JSON with --json; a .md file gets the text report
                          under the command that wrote it)
  -h, --help`;

const rateOptions = demoDefaults.rates;

const FLAGS = {
  options: {
    messages: { type: 'string', default: String(demoDefaults.messages) },
    seed: { type: 'string' },
    concurrency: { type: 'string', default: String(demoDefaults.concurrency) },
    'duplicate-window': { type: 'string', default: demoDefaults.duplicateWindow },
    json: { type: 'boolean', default: false },
    out: { type: 'string' },
    'cosmos-outage': { type: 'string', multiple: true, default: [] as string[] },
    'cosmos-throttling': { type: 'string', multiple: true, default: [] as string[] },
    'topic-refuses': { type: 'string', multiple: true, default: [] as string[] },
    'slow-dependency': { type: 'string', multiple: true, default: [] as string[] },
    help: { type: 'boolean', short: 'h', default: false },
    ...(Object.fromEntries(
      Object.entries(rateOptions).map(([name, rate]) => [name, { type: 'string', default: String(rate) }]),
    ) as Record<keyof typeof rateOptions, { type: 'string'; default: string }>),
  },
} as const;

async function main(values: FlagValues<typeof FLAGS>, context: ToolContext): Promise<ExitCode> {
  const number = (name: string, text: unknown, range: Parameters<typeof numberFlag>[3] = {}): number =>
    numberFlag(name, text, usage, range);
  const outage = (name: string, text: string, kind: CosmosOutage['kind']): CosmosOutage => {
    const [start, minutes, ...rest] = text.split(':');
    if (rest.length > 0 || minutes === undefined) {
      throw usageError(`--${name} must be <start-minute>:<minutes>; got '${text.slice(0, 40)}'.`, usage);
    }
    return {
      // Whole model milliseconds: a replay command's minutes give back the run's exact times.
      startMs: Math.round(number(name, start, { max: 10_000 }) * 60_000),
      durationMs: Math.round(number(name, minutes, { min: 0.01, max: 10_000 }) * 60_000),
      kind,
    };
  };
  const topicOutage = (text: string): TopicOutage => {
    const [topic, start, minutes, ...rest] = text.split(':');
    const known = topology.topics.map((t) => t.name);
    if (rest.length > 0 || minutes === undefined || topic === undefined || !known.includes(topic)) {
      throw usageError(
        `--topic-refuses must be <topic>:<start-minute>:<minutes> with a topic of src/topology.json (${known.join(', ')}); got '${text.slice(0, 60)}'.`,
        usage,
      );
    }
    const window = outage('topic-refuses', `${start}:${minutes}`, 'unavailable');
    return { topic, startMs: window.startMs, durationMs: window.durationMs };
  };
  const rate = (name: keyof typeof rateOptions): number =>
    number(name, (values as Record<string, unknown>)[name], { max: 1 });
  const seed =
    values.seed === undefined
      ? Math.floor(Math.random() * 2 ** 31)
      : number('seed', values.seed, { integer: true });
  const options: ScenarioOptions = {
    seed,
    messages: number('messages', values.messages, { min: 1, max: 1_000_000, integer: true }),
    resendInsideWindow: rate('resend-inside'),
    resendOutsideWindow: rate('resend-outside'),
    poison: rate('poison'),
    remintIds: rate('remint'),
    maxConcurrentCalls: number('concurrency', values.concurrency, { min: 1, max: 1000, integer: true }),
    duplicateWindowMs: duplicateWindowFlag('duplicate-window', values['duplicate-window'], usage) * 1000,
    faults: {
      crashBeforeCommit: rate('crash-before'),
      crashAfterCommit: rate('crash-after'),
      completionLost: rate('completion-lost'),
      cosmosThrottle: rate('cosmos-429'),
      cosmosUnavailable: rate('cosmos-503'),
      cosmosDropAfterCommit: rate('cosmos-drop'),
      slowHandler: rate('slow'),
      relaySendFailure: rate('relay-send-fail'),
      relayAckLost: rate('relay-ack-lost'),
      relayCrash: rate('relay-crash'),
      relayCheckpointLost: rate('relay-checkpoint-lost'),
      relayRestart: rate('relay-restart'),
      cosmosOutages: [
        ...values['cosmos-outage'].map((text) => outage('cosmos-outage', text, 'unavailable')),
        ...values['cosmos-throttling'].map((text) => outage('cosmos-throttling', text, 'throttle')),
      ],
      topicOutages: values['topic-refuses'].map(topicOutage),
      slowDependencies: values['slow-dependency'].map((text) => {
        const { startMs, durationMs } = outage('slow-dependency', text, 'unavailable');
        return { startMs, durationMs };
      }),
    },
    timeoutMs: 30 * 60_000,
    onProgress: progressPrinter(),
  };
  const out = values.out;
  if (out !== undefined && !statSync(dirname(out), { throwIfNoEntry: false })?.isDirectory())
    throw usageError(`--out: the folder of '${out.slice(0, 200)}' does not exist.`, usage);

  context.err(
    `Starting the offline stack (local Cosmos DB server, Service Bus and Functions host models), seed ${seed}…`,
  );
  const environment = await ScenarioEnvironment.start();
  // The app's spans, exported in memory: each delivery of a relayed message must be in the trace of
  // the delivery that published it, whatever the relay went through.
  const recorded = recordSpans();
  let report: ScenarioReport;
  try {
    report = await environment.run(options);
  } finally {
    await environment.stop();
  }
  process.stderr.write('\n');
  const traces = traceContinuity(recorded.spans());
  context.err(
    traces.broken.length === 0
      ? `Trace continuity: each of ${traces.checked} deliveries of the ${traces.relayed} relayed messages (${traces.resent} sent more than once) is in the trace of the delivery that published it.`
      : `Trace continuity broken: ${traces.broken.join('; ')}`,
  );
  const target = outageTarget(report);
  const text = values.json
    ? JSON.stringify({
        options: { ...options, onProgress: undefined },
        replay: replayCommand(options),
        ...report,
        deliveryLog: undefined,
        outageTarget: target,
      })
    : render(report, options, target);
  // JSON on stdout comes formatted too: `npm run --silent demo -- --json > report.json` leaves a file
  // the format check accepts.
  if (out === undefined) context.out(values.json ? (await formatted('report.json', text)).trimEnd() : text);
  else {
    const command = ['npm run demo --', ...process.argv.slice(2)].join(' ');
    await writeFormatted(out, !values.json && extname(out) === '.md' ? markdownReport(text, command) : text);
    context.err(`Wrote ${out}.`);
  }
  const passed =
    report.ok && (target?.met ?? true) && traces.broken.length === 0 && report.duplicateCauses.diagonal;
  return passed ? EXIT_CODES.ok : EXIT_CODES.failed;
}

/** The text report as a markdown page, under the command that wrote it (sample/demo-report.md). */
function markdownReport(text: string, command: string): string {
  return [
    '# Offline demo report',
    '',
    `Written by \`${command}\`. The same command gives the same report on any machine, except the "Speed" section, which measures the machine it ran on.`,
    '',
    '```text',
    text,
    '```',
    '',
  ].join('\n');
}

/**
 * The goal for Cosmos DB outages (issue 10): no valid message dead-lettered, none lost, every
 * invariant kept, and processing resumed within one model minute of each recovery.
 */
interface OutageTarget {
  validDeadLettered: number;
  everyInvariantHolds: boolean;
  /** The slowest resumption, model seconds (null: nothing was pending at any recovery). */
  slowestResumptionSeconds: number | null;
  resumedWithinOneMinute: boolean;
  survivableOutageMinutes: number;
  met: boolean;
}

function outageTarget(report: ScenarioReport): OutageTarget | undefined {
  const { outages, survivableOutageSeconds } = report.breaker;
  if (outages.length === 0) return undefined;
  const resumptions = outages.flatMap((o) => (o.resumedAfterMs === null ? [] : [o.resumedAfterMs]));
  const slowest = resumptions.length > 0 ? Math.max(...resumptions) / 1000 : null;
  // A delayed-retry copy dead-lettered with its retries spent is the slow dependency's (--slow-dependency), not the outage's.
  const validDeadLettered =
    report.accounting.deadLettered.exhausted - report.accounting.deadLettered.retriesSpent;
  const resumedWithinOneMinute = slowest === null || slowest <= 60;
  return {
    validDeadLettered,
    everyInvariantHolds: report.ok,
    slowestResumptionSeconds: slowest,
    resumedWithinOneMinute,
    survivableOutageMinutes: Math.round((survivableOutageSeconds / 60) * 100) / 100,
    met: validDeadLettered === 0 && report.ok && resumedWithinOneMinute,
  };
}

function progressPrinter(): (progress: {
  sent: number;
  sends: number;
  settledCopies: number;
  deliveries: number;
}) => void {
  let lastLine = 0;
  return ({ sent, sends, settledCopies, deliveries }) => {
    const line = `  published ${sent}/${sends} sends · ${settledCopies} messages settled · ${deliveries} deliveries`;
    if (process.stderr.isTTY) process.stderr.write(`\r${line}`);
    else if (performance.now() - lastLine > 1000) {
      process.stderr.write(`${line}\n`);
      lastLine = performance.now();
    }
  };
}

/** The outcomes a reader cannot guess from their names (the rest are what the handler logged). */
const OUTCOME_NOTES: Record<string, string> = {
  'not-run':
    'the host crashed before the handler ran (--crash-before); Service Bus delivers the message again',
  unknown: 'no outcome logged: the invocation outlasted functionTimeout (--slow) and was abandoned',
};

/**
 * The inbox's duplicates by cause: rows the cause the run injected, columns the cause the inbox
 * named on the delivery's log line; every count off the diagonal is a duplicate named wrongly.
 */
function causeLines(table: CauseTable): string[] {
  const causes = causesIn(table);
  const width = Math.max(11, ...causes.map((cause) => cause.length)) + 2;
  // Wide enough for the longest cause as a row's label, so that every row's counts line up.
  const label = Math.max(20, ...causes.map((cause) => cause.length + 2));
  const header = 'Duplicates by cause (rows: injected by this run; columns: named by the inbox)';
  if (table.duplicates === 0) return [header, '  none: no inbox consumer absorbed a duplicate'];
  const wrong = Object.entries(table.counts).reduce(
    (sum, [injected, row]) =>
      sum + Object.entries(row).reduce((n, [named, count]) => n + (named === injected ? 0 : count), 0),
    0,
  );
  const versioned =
    table.versioned === 0
      ? ''
      : `; ${table.versioned} of versioned consumers not counted (no marker to date them)`;
  return [
    header,
    `  ${'injected \\ named'.padEnd(label)}${causes.map((cause) => cause.padStart(width)).join('')}`,
    ...causes
      .filter((injected) => table.counts[injected] !== undefined)
      .map(
        (injected) =>
          `  ${injected.padEnd(label)}${causes.map((named) => String(table.counts[injected]?.[named] ?? 0).padStart(width)).join('')}`,
      ),
    table.diagonal
      ? `  diagonal            yes: each of the ${table.duplicates} duplicates named as injected${versioned}`
      : `  diagonal            NO: ${wrong} of the ${table.duplicates} duplicates named otherwise${versioned}; the first of them:`,
    ...table.offDiagonal.map((line) => `                      ${line}`),
    ...(table.touching === 0
      ? []
      : [
          `  same instant        ${table.touching} of the lock_overlap: a redelivery that began in the model millisecond in which its first delivery, since ended, took the marker (the model's clock stands still while work runs; scenario/causes.ts)`,
        ]),
  ];
}

function render(report: ScenarioReport, options: ScenarioOptions, target: OutageTarget | undefined): string {
  const { accounting: a, deliveries, throughput, latency } = report;
  const list = (counts: Record<string, number>): string =>
    Object.entries(counts)
      .sort(([, x], [, y]) => y - x)
      .map(([key, value]) => `${key} ${value}`)
      .join(', ');
  const lines = [
    `Offline demo, seed ${report.seed} (replay: ${replayCommand(options)})`,
    '',
    'Published',
    `  events              ${a.uniqueEvents} distinct, ${a.sends} sends (${a.injectedDuplicates} producer duplicates)`,
    `  duplicates          ${a.droppedByBroker} dropped by the broker (inside the window), ${a.absorbedByInbox} absorbed by the inbox (after it, or re-minted)`,
    `  re-minted ids       ${a.reminted.sends} payments sent again under a fresh MessageId: ${a.reminted.detected} of ${a.reminted.absorbable} copies absorbed as suspected producer duplicates by the payment applier's event key, ${a.reminted.falsePositives} distinct events taken for one`,
    '',
    'Delivered',
    `  deliveries          ${deliveries.total}`,
    `  outcomes            ${list(deliveries.byOutcome)}`,
    ...Object.entries(OUTCOME_NOTES)
      .filter(([outcome]) => deliveries.byOutcome[outcome] !== undefined)
      .map(([outcome, note]) => `                      ${outcome}: ${note}`),
    `  settlements         ${list(deliveries.bySettlement)}`,
    `  delivery log        sha256 ${deliveries.digest} (a replay of the seed gives the same)`,
    '',
    ...causeLines(report.duplicateCauses),
    '',
    'Effects',
    `  payments applied    ${a.effects.payments} (+ ${a.effects.unappliedPayments} unapplied: unknown invoice or currency)`,
    `  stock reservations  ${a.effects.reservations} (+ ${a.effects.backorders} backorders)`,
    `  status projections  ${a.effects.statusVersions} invoices`,
    `  shipments planned   ${a.effects.shipments} (from the StockReserved / BackorderCreated the stock reserver published)`,
    `  dead-lettered       ${a.deadLettered.total} = ${a.deadLettered.poison} poison + ${a.deadLettered.exhausted} exhausted`,
    `                      poison: refused by the handler on every delivery until Service Bus's max delivery count ran out`,
    `                      exhausted: valid messages whose deliveries ran out under the injected faults`,
    `  broker reasons      ${list(a.deadLettered.byReason) || 'none'} (the DeadLetterReason Service Bus sets, poison included;` +
      ` the app's reason for a poison message is in its logs: docs/poison-on-first-delivery.md)`,
    ...(a.delayedRetries.scheduled === 0
      ? []
      : [
          `  delayed retries     ${a.delayedRetries.scheduled} copies scheduled (+ ${a.delayedRetries.droppedAsDuplicate} scheduled again, dropped by the topic): ` +
            `${a.delayedRetries.processed} processed, ${a.delayedRetries.retried} failed and scheduled the next, ${a.delayedRetries.deadLettered} dead-lettered` +
            ` (${a.deadLettered.retriesSpent} with their retries spent; src/topology.json delayedRetry)`,
        ]),
    '',
    'Outbox',
    `  events staged       ${a.outbox.staged} (one per reservation or backorder, and per shipment planned, in its batch)`,
    `  sends               ${a.outbox.sends} (${a.outbox.resends} resends: ${a.outbox.droppedResends} dropped by the broker's duplicate detection, ${a.outbox.discardedResends} discarded: no subscription takes them)`,
    `  relay pages         ${list(report.relay.pages) || 'none'}, in ${report.relay.invocations} invocations (retries included); ${report.relay.sendFailures} failed sends, ${report.relay.refusals} refused by a topic`,
    `  sweeper             ${report.relay.sweeperRuns} runs, ${report.relay.sweeperResent} messages resent`,
    `  first sent by       the relay ${a.outbox.firstSentBy.relay} of ${a.outbox.staged} (${percent(a.outbox.firstSentBy.relay, a.outbox.staged)}), the sweeper ${a.outbox.firstSentBy.sweeper}, never ${a.outbox.firstSentBy.none}`,
    `  commit → sent       ${
      a.outbox.commitToSend === undefined
        ? 'nothing sent'
        : `p50 ${seconds(a.outbox.commitToSend.p50)}, p99 ${seconds(a.outbox.commitToSend.p99)}, longest ${seconds(a.outbox.commitToSend.max)} model time (from the commit's second to the first send)`
    }`,
    '',
    'Speed (this machine: one Node.js process hosts the app, the broker model and the Cosmos server)',
    `  elapsed             ${(throughput.elapsedMs / 1000).toFixed(1)} s`,
    `  throughput          ${throughput.eventsPerSecond} events/s, ${throughput.deliveriesPerSecond} deliveries/s`,
    `  handler latency     p50 ${latency.handlerMs.p50} ms, p95 ${latency.handlerMs.p95} ms, p99 ${latency.handlerMs.p99} ms`,
    `  enqueue → complete  p50 ${latency.endToEndMs.p50} ms, p95 ${latency.endToEndMs.p95} ms, p99 ${latency.endToEndMs.p99} ms model time (the workload is published as a burst, so this includes queueing)`,
    '',
    'Cosmos DB circuit breaker',
    `  state changes       opened ${report.breaker.opened}, closed ${report.breaker.closed}`,
    ...report.breaker.outages.map(
      (o) =>
        `  ${o.kind === 'throttle' ? 'throttling' : 'outage'.padEnd(10)}          ${o.durationMs / 60_000} min: ${o.pendingAtRecovery} messages pending at recovery, ` +
        (o.resumedAfterMs === null
          ? 'nothing to resume'
          : `processing resumed ${(o.resumedAfterMs / 1000).toFixed(1)} s after it`),
    ),
    `  survives            outages up to ${(report.breaker.survivableOutageSeconds / 60).toFixed(1)} min with these settings without dead-lettering (README: Cosmos DB outages)`,
    ...(target === undefined
      ? ['  target              not checked: this run has no --cosmos-outage or --cosmos-throttling']
      : [
          `  target              ${target.met ? 'MET' : 'MISSED'}: ${target.validDeadLettered} valid messages dead-lettered, invariants ${target.everyInvariantHolds ? 'hold' : 'FAIL'}, resumed within a minute: ${target.resumedWithinOneMinute ? 'yes' : 'NO'}`,
        ]),
    '',
    'Invariants',
    ...report.invariants.map((i) => `  ${i.ok ? 'PASS' : 'FAIL'} ${i.name.padEnd(13)} ${i.detail}`),
    '',
    report.ok ? 'Verdict: every invariant holds.' : 'Verdict: an invariant FAILED (see above).',
  ];
  return lines.join('\n');
}

const percent = (part: number, whole: number): string =>
  whole === 0 ? '-' : `${((100 * part) / whole).toFixed(1)} %`;
const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

export const command = commandWithFlags('demo', FLAGS, usage, main, { exitWhenDone: true });

if (require.main === module) runCommand(command);
