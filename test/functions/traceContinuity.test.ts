import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  contextOf,
  DIAGNOSTIC_ID,
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutboxMessage,
  type OutboxPublisher,
  type RelayDependencies,
  relayOutbox,
  serviceBusMessageOf,
  sweepOutbox,
} from '@idempotent-consumers/inbox/internal';
import { documentsIn, OUTBOX_SETTINGS } from '@idempotent-consumers/inbox/testing';
import {
  type FunctionApp,
  loadFunctionApp,
  pick,
  seededRandom,
  spansNamed,
  useLocalStack,
  useSpanExporter,
} from '@idempotent-consumers/local-azure';
import { ROOT_CONTEXT, trace } from '@opentelemetry/api';

import { onHandle, PUBLISHER_PROBE } from '../support/publisherProbe';

/**
 * Trace continuity end to end, through the real @azure/functions invocation path (the host's RPC
 * request, with the trace context the Service Bus extension continues from Diagnostic-Id): a
 * delivery's spans are in the message's trace, what it publishes carries that trace, and the
 * downstream delivery of what the relay sends joins it, whatever faults the relay goes through.
 */
const stack = useLocalStack();
const { exporter, reseed } = useSpanExporter(24);

let app: FunctionApp;
beforeAll(async () => {
  app = await loadFunctionApp(PUBLISHER_PROBE);
});

const traceIdOf = (traceparent: unknown): string | undefined =>
  typeof traceparent === 'string'
    ? trace.getSpanContext(contextOf({ traceparent }) ?? ROOT_CONTEXT)?.traceId
    : undefined;

/** The probe publishes one message for an upstream account (`up-`), nothing for a downstream one. */
function publishOnce(): void {
  onHandle((input, tx) => {
    tx.create({ id: 'balance', amount: input.amount });
    if (input.accountId.startsWith('up-'))
      tx.publish({
        topic: 'orders',
        subject: 'OrderPlaced',
        name: 'next',
        body: { accountId: `down-${input.accountId}`, amount: input.amount },
      });
  });
}

const outboxOf = async (account: string): Promise<OutboxDocument[]> =>
  (await documentsIn(stack.container, `account:${account}`)).filter(
    (d) => d.type === OUTBOX_TYPE,
  ) as OutboxDocument[];

/** Delivers a message of the relay's to the probe, as the broker would: its properties, its trace. */
async function deliverDownstream(message: OutboxMessage): Promise<void> {
  const outgoing = serviceBusMessageOf(message);
  const result = await app.invokeServiceBus('publisherProbe', {
    body: JSON.stringify(message.body),
    messageId: message.messageId,
    subject: message.subject,
    applicationProperties: outgoing.applicationProperties,
  });
  if (result.error) throw result.error;
}

describe('a delivery through the worker path', () => {
  it('runs in the trace of its Diagnostic-Id, and stores that trace in what it publishes', async () => {
    publishOnce();
    const diagnosticId = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

    const result = await app.invokeServiceBus('publisherProbe', {
      body: JSON.stringify({ accountId: 'up-worker', amount: 3 }),
      messageId: 'm-up-worker',
      subject: 'Test',
      applicationProperties: { [DIAGNOSTIC_ID]: diagnosticId },
    });

    expect(result.error).toBeUndefined();
    const [span, ...more] = spansNamed(exporter, 'process test.consumer');
    expect(more).toEqual([]);
    expect(span?.spanContext().traceId).toBe(traceIdOf(diagnosticId));
    expect(span?.attributes).toEqual({
      'messaging.system': 'servicebus',
      'messaging.operation.type': 'process',
      'messaging.destination.name': 'test.consumer',
      'messaging.message.id': 'm-up-worker',
      'messaging.servicebus.message.delivery_count': 1,
    });
    const [document] = await outboxOf('up-worker');
    // The stored context is the delivery span's own: the downstream operation is its child.
    expect(document?.trace?.traceparent).toBe(
      `00-${span?.spanContext().traceId}-${span?.spanContext().spanId}-01`,
    );
  });

  it('names no MessageId on the span of a message that has none (it ends poison)', async () => {
    publishOnce();

    await app.invokeServiceBus('publisherProbe', {
      body: JSON.stringify({ accountId: 'up-no-id', amount: 3 }),
      subject: 'Test',
    });

    const [span] = spansNamed(exporter, 'process test.consumer');
    expect(span?.attributes['messaging.message.id']).toBe('');
  });

  it('continues the host invocation trace when the message carries none, and stores it', async () => {
    publishOnce();

    const result = await app.invokeServiceBus('publisherProbe', {
      body: JSON.stringify({ accountId: 'up-untraced', amount: 3 }),
      messageId: 'm-up-untraced',
      subject: 'Test',
    });

    expect(result.error).toBeUndefined();
    const [document] = await outboxOf('up-untraced');
    const [span] = spansNamed(exporter, 'process test.consumer');
    expect(span?.parentSpanContext?.traceId).toBe(span?.spanContext().traceId);
    expect(document?.trace?.traceparent).toBe(
      `00-${span?.spanContext().traceId}-${span?.spanContext().spanId}-01`,
    );
  });
});

describe("docs/monitor.md's Follow an event", () => {
  it('queries only the span names and attributes the code emits', async () => {
    publishOnce();
    const result = await app.invokeServiceBus('publisherProbe', {
      body: JSON.stringify({ accountId: 'up-readme', amount: 1 }),
      messageId: 'm-up-readme',
      subject: 'Test',
      applicationProperties: { [DIAGNOSTIC_ID]: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
    });
    if (result.error) throw result.error;
    await relayOutbox(await outboxOf('up-readme'), {
      container: stack.container,
      publisher: { send: () => Promise.resolve([]), close: () => Promise.resolve() },
      now: () => new Date(),
      settings: OUTBOX_SETTINGS,
    });
    const readme = readFileSync(join(__dirname, '..', '..', 'docs', 'monitor.md'), 'utf8');
    const section = /## Follow an event\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
    const queried = [...section.matchAll(/customDimensions\["([^"]+)"\]/g)].map((m) => m[1]);
    const spans = exporter.getFinishedSpans();
    // The Azure Monitor exporter writes span links as _MS.links.
    const emitted = new Set(['_MS.links', ...spans.flatMap((span) => Object.keys(span.attributes))]);

    expect(queried.length).toBeGreaterThan(3);
    expect(queried.filter((name) => !emitted.has(name!))).toEqual([]);
    expect(spans.map((span) => span.name).sort()).toEqual(['process test.consumer', 'send orders']);
    expect(section).toContain('`process <consumer>`');
    expect(section).toContain('`send <topic>`');
  });
});

/** What can happen to the relay between the commit and the downstream delivery. */
const FAULTS = ['none', 'crash-before-checkpoint', 'lost-checkpoint', 'sweeper-resend'] as const;
type Fault = (typeof FAULTS)[number];

/**
 * One seeded run: upstream deliveries, each with a trace of its own (ids from the seed), whose
 * published messages reach the downstream consumer through a relay with a fault the seed picks:
 *   crash-before-checkpoint  the relay sent and died before its checkpoint: the page comes again
 *   lost-checkpoint          the page comes again after the relay marked the documents
 *   sweeper-resend           the relay's send failed past its retries: the sweeper sends later
 * Every message sent is delivered downstream (a resend too: the inbox absorbs it). Returns, per
 * downstream delivery, its MessageId, the fault, the upstream trace and the downstream span's trace.
 */
async function run(
  seed: number,
  label: string,
): Promise<{ messageId: string; fault: Fault; upstream: string; downstream: string }[]> {
  reseed(seed);
  exporter.reset();
  publishOnce();
  const random = seededRandom(seed);
  const hex = (digits: number): string =>
    Array.from({ length: digits }, () => Math.floor(random() * 16).toString(16)).join('');
  const now = new Date('2026-12-01T10:00:00Z');
  const sent: OutboxMessage[] = [];
  const recording: OutboxPublisher = {
    send: (_topic, messages) => Promise.resolve((sent.push(...messages), [])),
    close: () => Promise.resolve(),
  };
  const failing: OutboxPublisher = {
    send: () => Promise.reject(new Error('ServiceCommunicationProblem')),
    close: () => Promise.resolve(),
  };
  const deps = (publisher: OutboxPublisher, at = now): RelayDependencies => ({
    container: stack.container,
    publisher,
    now: () => at,
    settings: OUTBOX_SETTINGS,
  });
  const upstreamTrace = new Map<string, string>();
  const faultOf = new Map<string, Fault>();
  const deliveries = 1 + Math.floor(random() * 3);
  for (let index = 0; index < deliveries; index++) {
    const account = `up-${label}-${seed}-${index}`;
    const diagnosticId = `00-${hex(32)}-${hex(16)}-01`;
    const fault = pick(random, FAULTS);
    const result = await app.invokeServiceBus('publisherProbe', {
      body: JSON.stringify({ accountId: account, amount: index }),
      messageId: `m-${account}`,
      subject: 'Test',
      applicationProperties: { [DIAGNOSTIC_ID]: diagnosticId },
    });
    if (result.error) throw result.error;
    const page = await outboxOf(account);
    for (const document of page) {
      upstreamTrace.set(document.messageId, traceIdOf(diagnosticId) ?? '');
      faultOf.set(document.messageId, fault);
    }
    if (fault === 'sweeper-resend') {
      await relayOutbox(page, deps(failing));
      // The documents are dated by the app's clock; the sweeper runs an hour later.
      await sweepOutbox(deps(recording, new Date(Date.now() + 3_600_000)));
    } else {
      await relayOutbox(page, deps(recording));
      // The same page again, as the change feed hands it once more: stale (pending) documents.
      if (fault === 'crash-before-checkpoint') await relayOutbox(page, deps(recording));
      // A lost checkpoint: the feed hands the documents again as they are now, dispatched.
      if (fault === 'lost-checkpoint') await relayOutbox(await outboxOf(account), deps(recording));
    }
  }
  exporter.reset();
  const rows = [];
  // Only this run's messages: the sweeper also sends what other tests left pending.
  for (const message of sent.filter((m) => upstreamTrace.has(m.messageId))) {
    await deliverDownstream(message);
    const [span] = spansNamed(exporter, 'process test.consumer');
    exporter.reset();
    rows.push({
      messageId: message.messageId,
      fault: faultOf.get(message.messageId) ?? 'none',
      upstream: upstreamTrace.get(message.messageId) ?? 'unknown',
      downstream: span?.spanContext().traceId ?? 'no span',
      linked: span?.links.map((link) => link.context.traceId) ?? [],
    });
  }
  return rows.map(({ linked, ...row }) => ({
    ...row,
    // A downstream delivery in another trace passes only if it links to the upstream one.
    downstream: linked.includes(row.upstream) ? row.upstream : row.downstream,
  }));
}

describe('every downstream delivery joins the trace of the delivery that published it', () => {
  const seeds = (process.env.TRACE_SEEDS ?? '1,2,3,4,5,6').split(',').map(Number);

  it.each(seeds)('seed %i: through relay crashes, lost checkpoints and sweeper resends', async (seed) => {
    const rows = await run(seed, 'each');

    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows)
      expect({ ...row, downstream: row.downstream }).toEqual({ ...row, downstream: row.upstream });
    // Each message sent once per relay pass: a crash or a lost checkpoint sends it twice.
    for (const row of rows)
      expect(rows.filter((other) => other.messageId === row.messageId)).toHaveLength(
        row.fault === 'crash-before-checkpoint' ? 2 : 1,
      );
  });

  it('replays a seed with the same traces', async () => {
    const replay = async (label: string): Promise<unknown[]> =>
      (await run(7, label)).map(({ fault, upstream, downstream }) => ({ fault, upstream, downstream }));

    const first = await replay('first');

    expect(first.length).toBeGreaterThan(0);
    expect(await replay('again')).toEqual(first);
  });
});
