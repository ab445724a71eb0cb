import { randomUUID } from 'node:crypto';

import type {
  RegisteredFunction,
  RpcBindingInfo,
  RpcInvocationRequest,
  RpcRetryContext,
  RpcTypedData,
} from './core';

/**
 * The RPC `InvocationRequest` the Azure Functions host (4.x, .NET) sends the Node.js worker for a
 * Service Bus trigger (extension 5.x) and a timer trigger, built from the host's source:
 *
 * - the trigger input: the body decoded as UTF-8 text, sent as `string` (the host binds a trigger
 *   without `dataType` to `string`: WebJobs `GetDefaultType`; with `dataType: 'binary'`, `bytes`);
 *   a timer's `TimerInfo` serialized by Json.NET, sent as `json`;
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
 * A Cosmos DB trigger (extension 4.x, Azure/azure-webjobs-sdk-extensions
 * src/WebJobs.Extensions.CosmosDB/Trigger): the change feed processor hands the listener one page of
 * changes as `IReadOnlyCollection<JObject>` (a `string` parameter, as the host binds a trigger
 * without `dataType`, is bound with T = JObject: `CosmosDBTriggerAttributeBindingProviderGenerator`);
 * `CosmosDBTriggerValueBinder` turns it into `JArray.FromObject(value).ToString(Formatting.None)`,
 * one compact JSON array sent as `string`, which the library JSON-parses into the handler's
 * `documents` array. `CosmosDBTriggerBinding` has no binding data, so there is no trigger metadata.
 * The documents went through Json.NET twice on the way, and the Cosmos SDK's default serializer
 * (`CosmosJsonDotNetSerializer`, no settings: the extension's `DefaultCosmosDBSerializerFactory`
 * returns null) parses with `DateParseHandling.DateTime`: a string that looks like an ISO date
 * becomes a DateTime and is written back in Json.NET's format (see `jsonNetDate`). Known and left
 * as is: Azure/Azure-Functions#1399, Azure/azure-functions-host#7114,
 * Azure/azure-webjobs-sdk-extensions#898. A function with a retry policy gets the host's
 * RetryContext on every attempt (WebJobs `FunctionExecutorExtensions.TryExecuteAsync`; the host's
 * `ScriptInvocationContextExtensions` copies it into the request).
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

/** What the timer extension knows about one run. */
export interface TimerRun {
  /** Default false. */
  isPastDue?: boolean;
  /** The schedule monitor's record; default none (serialized as null). */
  scheduleStatus?: { last: Date; next: Date; lastUpdated: Date };
  /** When the run fires; default now. */
  firedAt?: Date;
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

  return request(registered, triggerName, input, metadata);
}

export function timerInvocationRequest(
  registered: RegisteredFunction,
  run: TimerRun = {},
): RpcInvocationRequest {
  const [triggerName, trigger] = triggerBinding(registered, 'timertrigger');
  const status = run.scheduleStatus;
  const timerInfo = {
    // A cron schedule adjusts for daylight saving time; a TimeSpan one ("00:05:00") does not.
    Schedule: { AdjustForDST: String(trigger.schedule).includes(' ') },
    ScheduleStatus: status
      ? {
          Last: `${dotnetDate(status.last)}+00:00`,
          Next: `${dotnetDate(status.next)}+00:00`,
          LastUpdated: `${dotnetDate(status.lastUpdated)}+00:00`,
        }
      : null,
    IsPastDue: run.isPastDue ?? false,
  };
  const metadata = new BindingData();
  // The extension's only binding data: DateTime.Now.ToString() (the library ignores timer metadata).
  metadata.set('TimerTrigger', { string: usDateTime(run.firedAt ?? new Date()) });
  return request(registered, triggerName, { json: JSON.stringify(timerInfo) }, metadata);
}

/** One page of the change feed (latest version: each changed document as stored, with `_lsn`). */
export function cosmosDBInvocationRequest(
  registered: RegisteredFunction,
  documents: readonly unknown[],
  retryContext?: RpcRetryContext,
): RpcInvocationRequest {
  const [triggerName] = triggerBinding(registered, 'cosmosdbtrigger');
  const input = { string: JSON.stringify(documents.map(jsonNetDates)) };
  return request(registered, triggerName, input, new BindingData(), retryContext);
}

function request(
  registered: RegisteredFunction,
  triggerName: string,
  input: RpcTypedData,
  metadata: BindingData,
  retryContext?: RpcRetryContext,
): RpcInvocationRequest {
  return {
    invocationId: randomUUID(),
    functionId: registered.metadata.functionId,
    inputData: [{ name: triggerName, data: input }],
    triggerMetadata: metadata.toRpc(),
    traceContext: {
      traceParent: `00-${hex(32)}-${hex(16)}-00`,
      traceState: '',
      attributes: {},
    },
    ...(retryContext === undefined ? {} : { retryContext }),
  };
}

/** Random lowercase hex digits (a W3C trace id is 32, a span id 16). */
function hex(digits: number): string {
  return randomUUID().replaceAll('-', '').slice(0, digits);
}

function triggerBinding(registered: RegisteredFunction, type: string): [string, RpcBindingInfo] {
  const found = Object.entries(registered.metadata.bindings).find(
    ([, binding]) => binding.direction === 'in' && binding.type?.toLowerCase() === type,
  );
  if (!found) throw new Error(`Function "${registered.name}" has no ${type} binding.`);
  return found;
}

/** The host's binding data: a dictionary whose keys compare ignoring case, in insertion order. */
class BindingData {
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

/** A JSON value with every string that Json.NET takes for a date rewritten as it writes it back. */
function jsonNetDates(value: unknown): unknown {
  if (typeof value === 'string') return jsonNetDate(value);
  if (Array.isArray(value)) return value.map(jsonNetDates);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, jsonNetDates(item)]));
}

/**
 * What `DateParseHandling.DateTime` and `DateTimeZoneHandling.RoundtripKind` make of an ISO date
 * string (`DateTimeUtils.TryParseDateTimeIso`, then "yyyy-MM-ddTHH:mm:ss.FFFFFFFK"): the fraction
 * loses its trailing zeros; "Z" stays; no zone stays none; an offset becomes the host's local
 * time, UTC on Azure, written "+00:00" ("2026-11-29T12:00:00+02:00" → "2026-11-29T10:00:00+00:00").
 * Anything else, an impossible date included, is left alone.
 */
export function jsonNetDate(value: string): string {
  const match = JSON_NET_ISO.exec(value);
  if (!match) return value;
  const [, date = '', time = '', digits = '', zone] = match;
  const wall = new Date(`${date}T${time}Z`);
  if (Number.isNaN(wall.getTime()) || wall.toISOString().slice(0, 19) !== `${date}T${time}`) return value;
  const fraction = digits.replace(/0+$/, '');
  const suffix = fraction ? `.${fraction}` : '';
  if (zone === undefined || zone === 'Z') return `${date}T${time}${suffix}${zone ?? ''}`;
  const [, sign, hours = '0', minutes = '0'] = /^([+-])(\d{2}):?(\d{2})?$/.exec(zone) ?? [];
  const offsetMs = (sign === '-' ? -1 : 1) * (Number(hours) * 60 + Number(minutes)) * 60_000;
  return `${new Date(wall.getTime() - offsetMs).toISOString().slice(0, 19)}${suffix}+00:00`;
}

/** Json.NET's ISO form: a 'T', seconds, up to 7 fraction digits, and Z, ±HH, ±HHmm or ±HH:mm. */
const JSON_NET_ISO = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d{1,7}))?(Z|[+-]\d{2}(?::?\d{2})?)?$/;

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

/** A DateTime as Json.NET writes it ("yyyy-MM-ddTHH:mm:ss.FFFFFFF", trailing zeros dropped), without a zone. */
function dotnetDate(date: Date): string {
  const [seconds, fraction = ''] = date.toISOString().slice(0, -1).split('.');
  const trimmed = fraction.replace(/0+$/, '');
  return trimmed ? `${seconds}.${trimmed}` : `${seconds}`;
}

/** DateTime.ToString() in en-US, as in the library's own test data ("8/24/2022 10:05:00 PM"). */
function usDateTime(date: Date): string {
  const hours = date.getUTCHours() % 12 || 12;
  const pad = (n: number): string => String(n).padStart(2, '0');
  return (
    `${date.getUTCMonth() + 1}/${date.getUTCDate()}/${date.getUTCFullYear()} ` +
    `${hours}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} ${date.getUTCHours() < 12 ? 'AM' : 'PM'}`
  );
}

const DATE_TIME_MAX = '9999-12-31T23:59:59.9999999';
/** The trigger's ServiceBusClient is created once; its Identifier is the namespace and a GUID. */
const CLIENT_GUID = randomUUID();
let lastSequenceNumber = 0;
