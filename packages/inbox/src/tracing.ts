import {
  type Attributes,
  type Context,
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

import { bounded } from './errors';

/**
 * Trace continuity through the inbox and the outbox, on the OpenTelemetry API: the Azure Monitor
 * distro (src/azureMonitor.ts) registers the tracer provider and exports the spans; without it the
 * API's no-op tracer still carries the trace ids through (a no-op span keeps its parent's
 * context), so a message published by a consumer still joins the trace it was delivered with.
 * Headers are parsed and written by the W3C propagator of @opentelemetry/core, never by hand.
 *
 * Internal: nothing here is part of the library's public entry (packages/inbox/src/index.ts).
 */

/** A W3C trace context as text: what an outbox document stores and a message carries. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

/** The application property the Service Bus SDKs and the Functions extension read a message's trace from. */
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads (packages/devkit/src/build/README.md#mutation-testing); packages/inbox/test/tracing.test.ts pins the name
export const DIAGNOSTIC_ID = 'Diagnostic-Id';
/** W3C caps tracestate at 512 characters; a longer one is dropped, not cut. */
const MAX_TRACESTATE_CHARS = 512;
/** A traceparent is 55 characters (version 00); a future version may add fields, not megabytes. */
const MAX_TRACEPARENT_CHARS = 256;

// Stryker disable next-line StringLiteral: static: evaluated once when the module loads (packages/devkit/src/build/README.md#mutation-testing)
const TRACER_NAME = 'idempotent-servicebus-consumers';
const propagator = new W3CTraceContextPropagator();
const tracer = trace.getTracer(TRACER_NAME);

/**
 * The context a carrier names, or undefined when it names none (missing, malformed, all-zero ids):
 * the W3C propagator reads it.
 */
export function contextOf(
  carrier: Partial<TraceCarrier> | undefined,
  base: Context = ROOT_CONTEXT,
): Context | undefined {
  const { traceparent, tracestate } = carrier ?? {};
  if (typeof traceparent !== 'string' || traceparent.length > MAX_TRACEPARENT_CHARS) return undefined;
  const headers: Record<string, string> = { traceparent };
  if (typeof tracestate === 'string' && tracestate.length <= MAX_TRACESTATE_CHARS)
    headers.tracestate = tracestate;
  const extracted = propagator.extract(base, headers, defaultTextMapGetter);
  const spanContext = trace.getSpanContext(extracted);
  return spanContext !== undefined && isSpanContextValid(spanContext) ? extracted : undefined;
}

/** The carrier of a context's span, or undefined when it has none (the propagator writes it). */
export function carrierOf(ctx: Context): TraceCarrier | undefined {
  const headers: Record<string, string> = {};
  propagator.inject(ctx, headers, defaultTextMapSetter);
  if (headers.traceparent === undefined) return undefined;
  return headers.tracestate
    ? { traceparent: headers.traceparent, tracestate: headers.tracestate }
    : { traceparent: headers.traceparent };
}

/**
 * The trace a Service Bus message was sent with: its `traceparent` application property, else its
 * `Diagnostic-Id` (the Service Bus SDKs write a W3C traceparent there), with `tracestate`.
 */
export function messageTrace(
  applicationProperties: Readonly<Record<string, unknown>>,
): TraceCarrier | undefined {
  const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
  const tracestate = text(applicationProperties.tracestate);
  for (const traceparent of [
    text(applicationProperties.traceparent),
    text(applicationProperties[DIAGNOSTIC_ID]),
  ]) {
    // Stryker disable next-line ConditionalExpression: equivalent: contextOf reads no trace from an undefined traceparent
    if (traceparent === undefined) continue;
    const carrier = tracestate === undefined ? { traceparent } : { traceparent, tracestate };
    if (contextOf(carrier) !== undefined) return carrier;
  }
  return undefined;
}

/**
 * The application properties that carry a trace context on a Service Bus message: `traceparent`
 * (and `tracestate`) for OpenTelemetry consumers, and `Diagnostic-Id`, the same traceparent, which
 * the Service Bus SDKs and the Functions extension read.
 */
export function traceProperties(carrier: TraceCarrier | undefined): Record<string, string> {
  if (carrier === undefined) return {};
  return {
    [DIAGNOSTIC_ID]: carrier.traceparent,
    traceparent: carrier.traceparent,
    ...(carrier.tracestate === undefined ? {} : { tracestate: carrier.tracestate }),
  };
}

/** The invocation's trace context, as @azure/functions v4 hands it (InvocationContext.traceContext). */
export interface InvocationTrace {
  traceParent?: string | null;
  traceState?: string | null;
}

/**
 * Where a delivery's spans go: under the invocation's trace context (the Functions host continues
 * the message's Diagnostic-Id there), else under the trace the message carries. The message's own
 * context is also a link when the invocation's is in another trace (a host that did not read it).
 */
export function deliveryParent(
  invocation: InvocationTrace | undefined,
  applicationProperties: Readonly<Record<string, unknown>>,
): { parent: Context; links: Link[] } {
  const base = context.active();
  const sent = messageTrace(applicationProperties);
  const fromMessage = contextOf(sent, base);
  const fromHost = contextOf(
    {
      traceparent: invocation?.traceParent ?? undefined,
      ...(invocation?.traceState ? { tracestate: invocation.traceState } : {}),
    },
    base,
  );
  const parent = fromHost ?? fromMessage ?? base;
  const parentTrace = trace.getSpanContext(parent)?.traceId;
  const messageSpan = fromMessage === undefined ? undefined : trace.getSpanContext(fromMessage);
  const links =
    messageSpan !== undefined && messageSpan.traceId !== parentTrace ? [{ context: messageSpan }] : [];
  return { parent, links };
}

/** A link to the context a carrier names, or none. */
export function linkTo(carrier: Partial<TraceCarrier> | undefined, attributes: Attributes = {}): Link[] {
  const found = contextOf(carrier);
  const spanContext = found === undefined ? undefined : trace.getSpanContext(found);
  return spanContext === undefined ? [] : [{ context: spanContext, attributes }];
}

/** OpenTelemetry's messaging attributes for Service Bus. */
export function messagingAttributes(
  operation: 'process' | 'send',
  destination: string,
  extra: Attributes = {},
): Attributes {
  return {
    'messaging.system': 'servicebus',
    'messaging.operation.type': operation,
    'messaging.destination.name': destination,
    ...extra,
  };
}

/**
 * Runs `work` in a span: a child of `parent`, with `links`, made the active context for what it
 * awaits (with the distro's context manager), ended when `work` settles, its status an error when
 * `work` throws (the error's name, bounded: never the message content).
 */
export async function inSpan<T>(
  name: string,
  options: { kind: SpanKind; parent: Context; links: Link[]; attributes: Attributes },
  work: (span: Span, ctx: Context) => Promise<T>,
): Promise<T> {
  const span = tracer.startSpan(
    name,
    { kind: options.kind, links: options.links, attributes: options.attributes },
    options.parent,
  );
  const ctx = trace.setSpan(options.parent, span);
  try {
    return await context.with(ctx, () => work(span, ctx));
  } catch (error) {
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: bounded(error instanceof Error ? error.name : typeof error, 100),
    });
    throw error;
  } finally {
    span.end();
  }
}

export { SpanKind };
