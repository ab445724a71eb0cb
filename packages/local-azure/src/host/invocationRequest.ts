import { randomUUID } from 'node:crypto';

import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  ROOT_CONTEXT,
  type SpanContext,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

import type {
  RegisteredFunction,
  RpcBindingInfo,
  RpcInvocationRequest,
  RpcRetryContext,
  RpcTypedData,
} from './core';

/**
 * What every RPC `InvocationRequest` the Azure Functions host (4.x, .NET) sends the Node.js worker
 * shares, whatever its trigger: the function's id, its trigger input under the trigger binding's
 * name, the trigger metadata (the extension's binding data, see BindingData) and a trace context.
 * One file per trigger builds the rest: toRpcServiceBus.ts, toRpcTimer.ts, toRpcCosmosDB.ts.
 */
export function invocationRequest(
  registered: RegisteredFunction,
  triggerName: string,
  input: RpcTypedData,
  metadata: BindingData,
  retryContext?: RpcRetryContext,
  /** The trace the trigger continues (a W3C traceparent); otherwise the invocation starts a trace. */
  continues?: unknown,
): RpcInvocationRequest {
  return {
    invocationId: randomUUID(),
    functionId: registered.metadata.functionId,
    inputData: [{ name: triggerName, data: input }],
    triggerMetadata: metadata.toRpc(),
    traceContext: {
      // A trace of its own, sampled (flags 01), for a message that carries none.
      traceParent: continuedTrace(continues) ?? `00-${hex(32)}-${hex(16)}-01`,
      traceState: '',
      attributes: {},
    },
    ...(retryContext === undefined ? {} : { retryContext }),
  };
}

/**
 * The invocation's traceparent when it continues `parent`: the host's own activity, a child of it
 * (the same trace id and flags, a span id of its own). The W3C propagator reads and writes it;
 * undefined when `parent` names no trace.
 */
function continuedTrace(parent: unknown): string | undefined {
  const spanContext = spanContextOf(parent);
  if (spanContext === undefined) return undefined;
  const headers: Record<string, string> = {};
  const child = trace.wrapSpanContext({ ...spanContext, spanId: hex(16), isRemote: false });
  propagator.inject(trace.setSpan(ROOT_CONTEXT, child), headers, defaultTextMapSetter);
  return headers.traceparent;
}

/** The trace id a traceparent names (the invocation's trace: an `operation_Id` in Application Insights). */
export function traceIdOf(traceparent: unknown): string | undefined {
  return spanContextOf(traceparent)?.traceId;
}

/** The span context a W3C traceparent names, read by the propagator; undefined when it names none. */
function spanContextOf(traceparent: unknown): SpanContext | undefined {
  if (typeof traceparent !== 'string') return undefined;
  const extracted = propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
  const spanContext = trace.getSpanContext(extracted);
  return spanContext !== undefined && isSpanContextValid(spanContext) ? spanContext : undefined;
}

const propagator = new W3CTraceContextPropagator();

/** Random lowercase hex digits (a W3C trace id is 32, a span id 16). */
function hex(digits: number): string {
  return randomUUID().replaceAll('-', '').slice(0, digits);
}

export function triggerBinding(registered: RegisteredFunction, type: string): [string, RpcBindingInfo] {
  const found = Object.entries(registered.metadata.bindings).find(
    ([, binding]) => binding.direction === 'in' && binding.type?.toLowerCase() === type,
  );
  if (!found) throw new Error(`Function "${registered.name}" has no ${type} binding.`);
  return found;
}

/** The host's binding data: a dictionary whose keys compare ignoring case, in insertion order. */
export class BindingData {
  private readonly entries = new Map<string, { key: string; value: RpcTypedData | null }>();

  /** Adds or replaces (keeping the first spelling and position); null values are not sent. */
  set(key: string, value: RpcTypedData | null): void {
    const folded = key.toLowerCase();
    this.entries.set(folded, { key: this.entries.get(folded)?.key ?? key, value });
  }

  toRpc(): Record<string, RpcTypedData> {
    const rpc: Record<string, RpcTypedData> = {};
    for (const { key, value } of this.entries.values()) if (value) rpc[key] = value;
    return rpc;
  }
}

/** A DateTime as Json.NET writes it ("yyyy-MM-ddTHH:mm:ss.FFFFFFF", trailing zeros dropped), without a zone. */
export function dotnetDate(date: Date): string {
  const [seconds, fraction = ''] = date.toISOString().slice(0, -1).split('.');
  const trimmed = fraction.replace(/0+$/, '');
  return trimmed ? `${seconds}.${trimmed}` : `${seconds}`;
}
