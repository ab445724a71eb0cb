import { randomUUID } from 'node:crypto';

import type { RegisteredFunction, RpcInvocationRequest, RpcTypedData } from './core';
import { BindingData, dotnetDate, invocationRequest, triggerBinding } from './invocationRequest';

/**
 * The RPC `InvocationRequest` the Azure Functions host (4.x, .NET) sends the Node.js worker for a
 * Service Bus trigger (extension 5.x), built from the host's source:
 *
 * - the trigger input: the body decoded as UTF-8 text, sent as `string` (the host binds a trigger
 *   without `dataType` to `string`: WebJobs `GetDefaultType`; with `dataType: 'binary'`, `bytes`);
 * - the trigger metadata: the extension's binding data (`ServiceBusTriggerBindingStrategy`), each
 *   value through the host's `ToRpc`: a string as `string`, anything else (numbers, dates,
 *   dictionaries, SDK objects) serialized by Json.NET as `json`; null values and `sys` are left out
 *   (`ScriptInvocationContextExtensions.ShouldSkipBindingData`);
 * - then, when the body is a JSON object, its top-level properties (arrays and nulls aside) are
 *   added to the metadata and **replace** same-named entries, names compared ignoring case
 *   (`WorkerFunctionInvoker.TransformInput` → `Utility.ApplyBindingData`): a body
 *   `{"messageId": …}` shadows the broker's MessageId.
 *
 * Dates follow Json.NET: `EnqueuedTimeUtc`/`ExpiresAtUtc` are `DateTimeOffset.DateTime`, so they
 * carry no zone designator ("2026-11-29T10:00:00.12"); `EnqueuedTime`/`ExpiresAt` end in "+00:00".
 * Host-local times are taken as UTC (Azure's default time zone).
 *
 */

/** What the broker knows about one delivery of a message. */
export interface ServiceBusDelivery {
  /** The message body: text, or bytes (decoded as UTF-8 unless the binding asks for binary). */
  body: string | Buffer;
  messageId?: string;
  /** The host's count, 1-based (the JS SDK's is 0-based). Default 1. */
  deliveryCount?: number;
  subject?: string;
  correlationId?: string;
  contentType?: string;
  applicationProperties?: Record<string, string | number | boolean | Date>;
  /** Default: now. */
  enqueuedTimeUtc?: Date;
  /** Default: never (a message TTL of TimeSpan.MaxValue). */
  expiresAtUtc?: Date;
  /** Default: the next of a process-wide sequence. */
  sequenceNumber?: number;
  /** Default: a new GUID. */
  lockToken?: string;
}

export function serviceBusInvocationRequest(
  registered: RegisteredFunction,
  delivery: ServiceBusDelivery,
): RpcInvocationRequest {
  const [triggerName, trigger] = triggerBinding(registered, 'servicebustrigger');
  const binary = trigger.dataType === 'binary';
  const body = Buffer.isBuffer(delivery.body) ? delivery.body.toString('utf8') : delivery.body;
  const input: RpcTypedData = binary ? { bytes: Buffer.from(delivery.body) } : { string: body };

  const metadata = new BindingData();
  const enqueued = delivery.enqueuedTimeUtc ?? new Date();
  const expires = delivery.expiresAtUtc ? dotnetDate(delivery.expiresAtUtc) : DATE_TIME_MAX;
  const text = (value: string | undefined): RpcTypedData | null =>
    value === undefined ? null : { string: value };
  const json = (value: unknown): RpcTypedData => ({ json: JSON.stringify(value) });
  const noActions = json({}); // ServiceBusMessageActions and ServiceBusReceiveActions: no public properties
  const properties = json(applicationProperties(delivery.applicationProperties ?? {}));
  const namespace = process.env[`${String(trigger.connection)}__fullyQualifiedNamespace`] ?? 'localhost';

  metadata.set('MessageReceiver', noActions);
  metadata.set('MessageSession', noActions);
  metadata.set('MessageActions', noActions);
  metadata.set('SessionActions', noActions);
  metadata.set('ReceiveActions', noActions);
  metadata.set(
    'Client',
    json({
      FullyQualifiedNamespace: namespace,
      IsClosed: false,
      TransportType: 0,
      Identifier: `${namespace}-${CLIENT_GUID}`,
    }),
  );
  metadata.set('DeliveryCount', json(delivery.deliveryCount ?? 1));
  metadata.set('DeadLetterSource', null);
  metadata.set('LockToken', { string: delivery.lockToken ?? randomUUID() });
  metadata.set('ExpiresAtUtc', json(expires));
  metadata.set('ExpiresAt', json(`${expires}+00:00`));
  metadata.set('EnqueuedTimeUtc', json(dotnetDate(enqueued)));
  metadata.set('EnqueuedTime', json(`${dotnetDate(enqueued)}+00:00`));
  metadata.set('MessageId', text(delivery.messageId));
  metadata.set('ContentType', text(delivery.contentType));
  metadata.set('ReplyTo', null);
  metadata.set('SequenceNumber', json(delivery.sequenceNumber ?? ++lastSequenceNumber));
  metadata.set('To', null);
  metadata.set('Subject', text(delivery.subject));
  metadata.set('Label', text(delivery.subject));
  metadata.set('CorrelationId', text(delivery.correlationId));
  metadata.set('ApplicationProperties', properties);
  metadata.set('UserProperties', properties);
  metadata.set('SessionId', null);
  metadata.set('ReplyToSessionId', null);
  metadata.set('PartitionKey', null);
  metadata.set('TransactionPartitionKey', null);
  if (!binary) applyBodyBindingData(body, metadata);

  // The extension's processor continues the trace of the message's Diagnostic-Id (the property the
  // Service Bus SDKs write a W3C traceparent to), and the invocation is its child.
  return invocationRequest(
    registered,
    triggerName,
    input,
    metadata,
    undefined,
    delivery.applicationProperties?.['Diagnostic-Id'],
  );
}

/**
 * `Utility.ApplyBindingData`: for a body that looks like JSON and parses as an object, each
 * top-level property that is not an array becomes binding data: an object as `json`, anything else
 * as Json.NET's `(string)` conversion of the value. (Json.NET parses a few things JSON.parse does
 * not, such as comments; numbers beyond 2^53 lose digits here.)
 */
function applyBodyBindingData(body: string, metadata: BindingData): void {
  const trimmed = body.trim();
  if (!(trimmed.startsWith('{') && trimmed.endsWith('}'))) return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    return;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return;
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (value === null || Array.isArray(value)) continue;
    if (typeof value === 'object') metadata.set(key, { json: JSON.stringify(value) });
    else metadata.set(key, { string: dotnetString(value as string | number | boolean) });
  }
}

/** Json.NET's `(string)JValue`: booleans as True/False, ISO date strings re-read as dates, doubles in .NET's notation. */
function dotnetString(value: string | number | boolean): string {
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (typeof value === 'number') {
    return String(value).replace(
      /e([+-])(\d+)$/,
      (_, sign: string, digits: string) => `E${sign}${digits.padStart(2, '0')}`,
    );
  }
  const iso = ISO_DATE.exec(value);
  if (!iso) return value;
  // DateParseHandling.DateTime: the string becomes a DateTime, and then invariant-culture text.
  const date = new Date(iso[1] ? value : `${value}Z`);
  const pad = (n: number): string => String(n).padStart(2, '0');
  return (
    `${pad(date.getUTCMonth() + 1)}/${pad(date.getUTCDate())}/${date.getUTCFullYear()} ` +
    `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}`
  );
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,7})?(Z|[+-]\d{2}:\d{2})?$/;

/** Json.NET writes application property dates with "Z" (they arrive as UTC DateTimes). */
function applicationProperties(
  properties: Record<string, string | number | boolean | Date>,
): Record<string, string | number | boolean> {
  return Object.fromEntries(
    Object.entries(properties).map(([key, value]) => [
      key,
      value instanceof Date ? `${dotnetDate(value)}Z` : value,
    ]),
  );
}

const DATE_TIME_MAX = '9999-12-31T23:59:59.9999999';
/** The trigger's ServiceBusClient is created once; its Identifier is the namespace and a GUID. */
const CLIENT_GUID = randomUUID();
let lastSequenceNumber = 0;
