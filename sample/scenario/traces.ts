import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/**
 * Trace continuity in a scenario run (issue 24), read from the spans the app ended: the demo
 * exports them to an in-memory exporter (no Azure), as the Azure Monitor distro exports them to
 * Application Insights in Azure. The relay's `send <topic>` spans link to each message's publishing
 * delivery, naming the message (`messaging.message.id`); each `process <consumer>` span names the
 * message it delivered. So every delivery of a relayed message can be checked against the delivery
 * that published it.
 */
export interface Continuity {
  /** Deliveries of relayed messages, each checked. */
  checked: number;
  /** Those not in the trace of the delivery that published their message (at most 20, bounded). */
  broken: string[];
  /** Messages the relay or the sweeper sent, and how many of them were sent more than once. */
  relayed: number;
  resent: number;
}

/** Checks every delivery of a relayed message against the delivery that published it. */
export function traceContinuity(spans: readonly ReadableSpan[]): Continuity {
  const deliveries = spans.filter((span) => span.name.startsWith('process '));
  const bySpanId = new Map(deliveries.map((span) => [span.spanContext().spanId, span]));
  // messageId → the span context each send linked it to.
  const publishedBy = new Map<string, { traceId: string; spanId: string }[]>();
  for (const send of spans.filter((span) => span.name.startsWith('send '))) {
    for (const link of send.links) {
      const messageId = String(link.attributes?.['messaging.message.id']);
      publishedBy.set(messageId, [...(publishedBy.get(messageId) ?? []), link.context]);
    }
  }
  const broken: string[] = [];
  let checked = 0;
  for (const delivery of deliveries) {
    const messageId = String(delivery.attributes['messaging.message.id']);
    const links = publishedBy.get(messageId);
    if (links === undefined) continue; // a producer's message, not the outbox's
    checked++;
    // Every send of the message carried the same context: its publishing delivery's span.
    const origins = new Set(links.map((link) => `${link.traceId}-${link.spanId}`));
    const [origin] = links;
    const publisher = origin && bySpanId.get(origin.spanId);
    if (origins.size !== 1 || !publisher || publisher.spanContext().traceId !== origin.traceId)
      broken.push(`${messageId}: sent with ${[...origins].join(', ')}, no such publishing delivery`);
    else if (delivery.spanContext().traceId !== origin.traceId)
      broken.push(
        `${messageId}: delivered in trace ${delivery.spanContext().traceId}, published in ${origin.traceId}`,
      );
  }
  const resent = [...publishedBy.values()].filter((links) => links.length > 1).length;
  return { checked, broken: broken.slice(0, 20), relayed: publishedBy.size, resent };
}

/**
 * Starts keeping the spans the app ends, in memory, through a tracer provider registered as the
 * global one (for the rest of the process). Returns what reads them.
 */
export function recordSpans(): { spans: () => ReadableSpan[] } {
  const exporter = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
  return { spans: () => exporter.getFinishedSpans() };
}
