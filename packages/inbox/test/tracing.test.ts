import {
  carrierOf,
  contextOf,
  deliveryParent,
  DIAGNOSTIC_ID,
  messageTrace,
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutboxMessage,
  type OutboxPublisher,
  processDelivery,
  relayOutbox,
  storedTrace,
  sweepOutbox,
  type TraceCarrier,
  traceProperties,
} from '@idempotent-consumers/inbox/internal';
import { spansNamed, useLocalStack, useSpanExporter } from '@idempotent-consumers/local-azure';
import { ROOT_CONTEXT, SpanStatusCode, trace } from '@opentelemetry/api';

import { delivery, dependencies, documentsIn, OUTBOX_SETTINGS, testConsumer } from '../src/testing';

/**
 * Trace continuity through the outbox (issue 24): the delivery's trace context goes into each
 * outbox document its batch commits, and the relay (or the sweeper, or a retried page) sends the
 * message with it, under a send span of its own that links to it.
 */
const stack = useLocalStack();
const { exporter } = useSpanExporter(24);

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const OTHER = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

const sent: OutboxMessage[] = [];
const recording: OutboxPublisher = {
  send: (_topic, messages) => Promise.resolve((sent.push(...messages), [])),
  close: () => Promise.resolve(),
};
beforeEach(() => {
  sent.length = 0;
});

const publishing = testConsumer((message, tx) => {
  tx.create({ id: 'balance', amount: message.amount });
  tx.publish({
    topic: 'business-events',
    subject: 'BalanceOpened',
    name: 'opened',
    body: { amount: message.amount },
  });
});

let accounts = 0;
/** Commits a delivery of `publishing` with `carrier`, and returns its outbox documents. */
async function published(carrier: TraceCarrier | undefined, now = new Date()): Promise<OutboxDocument[]> {
  const account = `trace-${++accounts}`;
  await processDelivery(
    publishing,
    delivery({ accountId: account, amount: 1 }, { messageId: `m-${account}` }),
    dependencies(stack.container, { now: () => now }),
    carrier,
  );
  return (await documentsIn(stack.container, `account:${account}`)).filter(
    (d) => d.type === OUTBOX_TYPE,
  ) as OutboxDocument[];
}

const traceIdOf = (traceparent: string): string | undefined =>
  trace.getSpanContext(contextOf({ traceparent }) ?? ROOT_CONTEXT)?.traceId;

describe('reading a trace context', () => {
  it('takes a message traceparent before its Diagnostic-Id, and tracestate with it', () => {
    expect(messageTrace({ traceparent: TRACEPARENT, [DIAGNOSTIC_ID]: OTHER, tracestate: 'a=1' })).toEqual({
      traceparent: TRACEPARENT,
      tracestate: 'a=1',
    });
    expect(messageTrace({ [DIAGNOSTIC_ID]: OTHER })).toEqual({ traceparent: OTHER });
  });

  it('ignores what the W3C propagator does not read: malformed, all-zero ids, not text, too long', () => {
    expect(messageTrace({ traceparent: 'not-a-trace', [DIAGNOSTIC_ID]: OTHER })).toEqual({
      traceparent: OTHER,
    });
    expect(messageTrace({ traceparent: `00-${'0'.repeat(32)}-b7ad6b7169203331-01` })).toBeUndefined();
    expect(messageTrace({ [DIAGNOSTIC_ID]: 42 })).toBeUndefined();
    expect(contextOf({ traceparent: `${TRACEPARENT}-${'0'.repeat(300)}` })).toBeUndefined();
  });

  it("parents a delivery on the invocation's context, linking the message's when it is another trace", () => {
    const traceOf = (ctx: Parameters<typeof trace.getSpanContext>[0]): string | undefined =>
      trace.getSpanContext(ctx)?.traceId;
    const same = deliveryParent({ traceParent: TRACEPARENT }, { [DIAGNOSTIC_ID]: TRACEPARENT });
    const other = deliveryParent({ traceParent: OTHER }, { [DIAGNOSTIC_ID]: TRACEPARENT });
    const noHost = deliveryParent({ traceParent: null }, { traceparent: OTHER });
    const nothing = deliveryParent(undefined, {});

    expect([traceOf(same.parent), same.links]).toEqual([traceIdOf(TRACEPARENT), []]);
    expect([traceOf(other.parent), other.links.map((link) => link.context.traceId)]).toEqual([
      traceIdOf(OTHER),
      [traceIdOf(TRACEPARENT)],
    ]);
    expect([traceOf(noHost.parent), noHost.links]).toEqual([traceIdOf(OTHER), []]);
    expect([traceOf(nothing.parent), nothing.links]).toEqual([undefined, []]);
  });

  it('writes a carrier as traceparent, tracestate and Diagnostic-Id', () => {
    expect(traceProperties({ traceparent: TRACEPARENT, tracestate: 'a=1' })).toEqual({
      [DIAGNOSTIC_ID]: TRACEPARENT,
      traceparent: TRACEPARENT,
      tracestate: 'a=1',
    });
    // The property the Service Bus SDKs and the Functions extension read, by its name.
    expect(traceProperties({ traceparent: TRACEPARENT })).toStrictEqual({
      'Diagnostic-Id': TRACEPARENT,
      traceparent: TRACEPARENT,
    });
    expect(traceProperties(undefined)).toEqual({});
  });

  it("reads a message's Diagnostic-Id by its name, and no tracestate that is not text", () => {
    expect(messageTrace({ 'Diagnostic-Id': OTHER, tracestate: 42 })).toStrictEqual({ traceparent: OTHER });
    expect(messageTrace({ traceparent: TRACEPARENT })).toStrictEqual({ traceparent: TRACEPARENT });
    expect(messageTrace({ traceparent: 42, 'Diagnostic-Id': OTHER })).toStrictEqual({ traceparent: OTHER });
  });

  it('keeps a tracestate of up to 512 characters and drops a longer one whole (W3C), and bounds the traceparent', () => {
    const stateOf = (carrier: Partial<TraceCarrier> | undefined): string | undefined => {
      const found = contextOf(carrier);
      return found === undefined ? undefined : (trace.getSpanContext(found)?.traceState?.serialize() ?? '');
    };
    // Two valid members, 256 + 1 + 255 characters: exactly the W3C limit.
    const limit = `a=${'x'.repeat(254)},b=${'y'.repeat(253)}`;
    expect(limit).toHaveLength(512);

    expect(stateOf({ traceparent: TRACEPARENT, tracestate: 'a=1' })).toBe('a=1');
    expect(stateOf({ traceparent: TRACEPARENT, tracestate: limit })).toBe(limit);
    // Longer: dropped whole, where OpenTelemetry alone would keep the members that fit.
    expect(stateOf({ traceparent: TRACEPARENT, tracestate: `c=1,${limit}` })).toBe('');
    expect(stateOf({ traceparent: TRACEPARENT, tracestate: 7 as unknown as string })).toBe('');
    expect(stateOf(undefined)).toBeUndefined();
    expect(stateOf({})).toBeUndefined();
    // A future version may add fields after the flags: read up to 256 characters, no more.
    const future = (length: number): string => {
      const head = 'cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-';
      return head + 'f'.repeat(length - head.length);
    };
    expect(stateOf({ traceparent: future(256) })).toBe('');
    expect(stateOf({ traceparent: future(257) })).toBeUndefined();
  });

  it('writes the carrier of a context with its tracestate, and none for a context without a span', () => {
    const found = contextOf({ traceparent: TRACEPARENT, tracestate: 'a=1' });

    expect(found && carrierOf(found)).toStrictEqual({ traceparent: TRACEPARENT, tracestate: 'a=1' });
    expect(carrierOf(ROOT_CONTEXT)).toBeUndefined();
  });

  it("keeps the host invocation's tracestate on the delivery's parent", () => {
    const { parent } = deliveryParent({ traceParent: TRACEPARENT, traceState: 'h=1' }, {});

    expect(trace.getSpanContext(parent)?.traceState?.serialize()).toBe('h=1');
  });
});

describe('the trace through the outbox', () => {
  it('stores the delivery trace in the outbox document, in the committed batch', async () => {
    const [document] = await published({ traceparent: TRACEPARENT, tracestate: 'a=1' });

    expect(document?.trace).toEqual({ traceparent: TRACEPARENT, tracestate: 'a=1' });
    expect(document && storedTrace(document)).toEqual({ traceparent: TRACEPARENT, tracestate: 'a=1' });
  });

  it('reads back only a stored trace the W3C propagator reads, and only a text tracestate', async () => {
    const [document] = await published({ traceparent: TRACEPARENT });
    if (!document) throw new Error('nothing published');
    const storing = (trace: unknown): OutboxDocument => ({ ...document, trace }) as OutboxDocument;

    expect(storedTrace(storing(null))).toBeUndefined();
    expect(storedTrace(storing('text'))).toBeUndefined();
    expect(storedTrace(storing({ traceparent: 'garbage' }))).toBeUndefined();
    expect(storedTrace(storing({ traceparent: 42 }))).toBeUndefined();
    expect(storedTrace(storing({ traceparent: TRACEPARENT, tracestate: 42 }))).toStrictEqual({
      traceparent: TRACEPARENT,
    });
  });

  it('stores nothing for a delivery without a trace, or with one that names none', async () => {
    const [none] = await published(undefined);
    const [malformed] = await published({ traceparent: 'garbage' });

    expect(none && 'trace' in none).toBe(false);
    expect(malformed && 'trace' in malformed).toBe(false);
  });

  it('sends each message with its document trace, as traceparent and Diagnostic-Id, from a send span linked to it', async () => {
    const documents = [
      ...(await published({ traceparent: TRACEPARENT })),
      ...(await published({ traceparent: OTHER })),
    ];

    const report = await relayOutbox(documents, {
      container: stack.container,
      publisher: recording,
      now: () => new Date(),
      settings: OUTBOX_SETTINGS,
    });

    expect(report.sent).toBe(2);
    expect(sent.map((m) => m.trace?.traceparent)).toEqual([TRACEPARENT, OTHER]);
    // The properties the app's publisher stamps on each message (test/functions/traceContinuity.test.ts).
    const properties = sent.map((m) => traceProperties(m.trace));
    expect(properties.map((p) => [p[DIAGNOSTIC_ID], p.traceparent])).toEqual([
      [TRACEPARENT, TRACEPARENT],
      [OTHER, OTHER],
    ]);
    const [span, ...more] = spansNamed(exporter, 'send business-events');
    expect(more).toEqual([]);
    expect(span?.links.map((link) => link.context.traceId)).toEqual([
      traceIdOf(TRACEPARENT),
      traceIdOf(OTHER),
    ]);
    // The relay's span is its own operation's: a batch send cannot be the child of two traces.
    expect([traceIdOf(TRACEPARENT), traceIdOf(OTHER)]).not.toContain(span?.spanContext().traceId);
    expect(span?.attributes).toMatchObject({
      'messaging.system': 'servicebus',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'business-events',
      'messaging.batch.message_count': 2,
    });
    // Each link names the message it was sent for.
    expect(span?.links.map((link) => link.attributes)).toEqual(
      sent.map((message) => ({ 'messaging.message.id': message.messageId })),
    );
  });

  it('keeps the trace through a retried page and the sweeper, which read the document again', async () => {
    const now = new Date('2026-12-01T10:00:00Z');
    const documents = await published({ traceparent: TRACEPARENT }, now);
    const failing: OutboxPublisher = {
      send: () => Promise.reject(new Error('ServiceCommunicationProblem')),
      close: () => Promise.resolve(),
    };
    const deps = { container: stack.container, now: () => now, settings: OUTBOX_SETTINGS };

    const first = await relayOutbox(documents, { ...deps, publisher: failing });
    await relayOutbox(documents, { ...deps, publisher: recording }, true);
    const later = new Date(now.getTime() + 3_600_000);
    const resent = await published({ traceparent: OTHER }, now);
    await sweepOutbox({ ...deps, now: () => later, publisher: recording });

    expect(first.retry).toBeDefined();
    // The failed send's span says it failed, naming the error's type only (never its message).
    const [failed] = spansNamed(exporter, 'send business-events');
    expect(failed?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'Error' });
    expect(sent.map((m) => m.trace?.traceparent)).toEqual([TRACEPARENT, OTHER]);
    expect(resent).toHaveLength(1);
  });

  it('sends a document written before traces were stored with the send span own context, and no link', async () => {
    const [document] = await published({ traceparent: TRACEPARENT });
    if (!document) throw new Error('nothing published');
    const old: OutboxDocument = { ...document };
    delete old.trace;

    await relayOutbox([old], {
      container: stack.container,
      publisher: recording,
      now: () => new Date(),
      settings: OUTBOX_SETTINGS,
    });

    const [span] = spansNamed(exporter, 'send business-events');
    expect(span?.links).toEqual([]);
    expect(sent.map((m) => m.trace?.traceparent)).toEqual([
      `00-${span?.spanContext().traceId}-${span?.spanContext().spanId}-01`,
    ]);
  });
});
