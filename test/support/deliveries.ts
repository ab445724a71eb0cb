import { format } from 'node:util';

import { InvocationContext } from '@azure/functions';

/**
 * Delivers a message to a Service Bus trigger handler the way the Functions host (Node.js v4) does:
 * the body JSON-parsed when it is JSON, and every trigger metadata value JSON-parsed too (so an
 * all-digit MessageId arrives as a number), keys camelCased.
 */
export interface DeliveryOptions {
  messageId?: string;
  deliveryCount?: number;
  subject?: string;
  enqueuedTimeUtc?: Date;
  correlationId?: string;
  applicationProperties?: Record<string, unknown>;
}

export interface LogLine {
  level: string;
  text: string;
}

export type Handler = (message: unknown, context: InvocationContext) => Promise<void>;

/** Body text → what the host hands the function: parsed JSON, or the raw string when it is not JSON. */
export function hostBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export function hostContext(options: DeliveryOptions, logs: LogLine[] = []): InvocationContext {
  const raw: Record<string, string> = {
    ...(options.messageId === undefined ? {} : { MessageId: options.messageId }),
    DeliveryCount: String(options.deliveryCount ?? 1),
    EnqueuedTimeUtc: (options.enqueuedTimeUtc ?? new Date()).toISOString(),
    ...(options.subject === undefined ? {} : { Subject: options.subject }),
    ...(options.correlationId === undefined ? {} : { CorrelationId: options.correlationId }),
    ApplicationProperties: JSON.stringify(options.applicationProperties ?? {}),
  };
  const triggerMetadata = Object.fromEntries(
    Object.entries(raw).map(([key, value]) => [key[0]!.toLowerCase() + key.slice(1), hostBody(value)]),
  );
  return new InvocationContext({
    functionName: 'test',
    triggerMetadata,
    logHandler: (level, ...args) => logs.push({ level, text: format(...args) }),
  });
}

/** Delivers `body` (an object is sent as JSON text) and reports how the host would settle it. */
export async function deliver(
  handler: Handler,
  body: unknown,
  options: DeliveryOptions = {},
  logs: LogLine[] = [],
): Promise<{ settled: 'completed' | 'abandoned'; error?: Error }> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  try {
    await handler(hostBody(text), hostContext(options, logs));
    return { settled: 'completed' };
  } catch (error) {
    return { settled: 'abandoned', error: error as Error };
  }
}
