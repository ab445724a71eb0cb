import type { RegisteredFunction, RpcInvocationRequest, RpcRetryContext } from './core';
import { BindingData, invocationRequest, triggerBinding } from './invocationRequest';

/**
 * The RPC `InvocationRequest` the Azure Functions host sends the Node.js worker for a Cosmos DB trigger (extension 4.x, Azure/azure-webjobs-sdk-extensions
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

/** One page of the change feed (latest version: each changed document as stored, with `_lsn`). */
export function cosmosDBInvocationRequest(
  registered: RegisteredFunction,
  documents: readonly unknown[],
  retryContext?: RpcRetryContext,
): RpcInvocationRequest {
  const [triggerName] = triggerBinding(registered, 'cosmosdbtrigger');
  const input = { string: JSON.stringify(documents.map(jsonNetDates)) };
  return invocationRequest(registered, triggerName, input, new BindingData(), retryContext);
}

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
