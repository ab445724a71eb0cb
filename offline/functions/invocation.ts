import { format } from 'node:util';

import { InvocationContext } from '@azure/functions';

/**
 * What the Azure Functions host (Node.js v4 programming model) hands a Service Bus trigger: the body
 * JSON-parsed when it is JSON (else the string, or the bytes), and `triggerMetadata` with camelCase
 * keys whose values are JSON-parsed too (so an all-digit MessageId arrives as a number). The
 * conversion mirrors @azure/functions' `fromRpcTypedData` for string data.
 */
export function hostBody(body: string | Buffer): unknown {
  if (Buffer.isBuffer(body)) return body;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return body;
  }
}

export interface ServiceBusMetadata {
  messageId?: string;
  deliveryCount: number;
  enqueuedTimeUtc: Date;
  expiresAtUtc?: Date;
  sequenceNumber?: number;
  lockToken?: string;
  subject?: string;
  correlationId?: string;
  contentType?: string;
  applicationProperties?: Record<string, unknown>;
}

export function hostTriggerMetadata(metadata: ServiceBusMetadata): Record<string, unknown> {
  const wire: Record<string, string> = {
    ...(metadata.messageId === undefined ? {} : { MessageId: metadata.messageId }),
    DeliveryCount: String(metadata.deliveryCount),
    EnqueuedTimeUtc: metadata.enqueuedTimeUtc.toISOString(),
    ...(metadata.expiresAtUtc ? { ExpiresAtUtc: metadata.expiresAtUtc.toISOString() } : {}),
    ...(metadata.sequenceNumber === undefined ? {} : { SequenceNumber: String(metadata.sequenceNumber) }),
    ...(metadata.lockToken === undefined ? {} : { LockToken: metadata.lockToken }),
    ...(metadata.subject === undefined ? {} : { Subject: metadata.subject, Label: metadata.subject }),
    ...(metadata.correlationId === undefined ? {} : { CorrelationId: metadata.correlationId }),
    ...(metadata.contentType === undefined ? {} : { ContentType: metadata.contentType }),
    ApplicationProperties: JSON.stringify(metadata.applicationProperties ?? {}),
  };
  return Object.fromEntries(
    Object.entries(wire).map(([key, value]) => [key.charAt(0).toLowerCase() + key.slice(1), hostBody(value)]),
  );
}

export interface LogLine {
  level: string;
  text: string;
}

/** An InvocationContext as the host builds it, with the function's log lines collected. */
export function hostInvocationContext(
  functionName: string,
  metadata: ServiceBusMetadata,
  logs: LogLine[] = [],
): InvocationContext {
  return new InvocationContext({
    functionName,
    invocationId: crypto.randomUUID(),
    triggerMetadata: hostTriggerMetadata(metadata),
    logHandler: (level, ...args) => logs.push({ level, text: format(...args) }),
  });
}

/** The outcome an inbox consumer logged for a delivery (its log lines end with JSON fields). */
export function loggedOutcome(logs: readonly LogLine[]): string | undefined {
  for (let i = logs.length - 1; i >= 0; i--) {
    const match = /"outcome":"(\w+)"/.exec(logs[i]?.text ?? '');
    if (match) return match[1];
  }
  return undefined;
}
