import { createHash } from 'node:crypto';

import type { Delivery } from './delivery';

/**
 * The inbox marker: proof that one consumer applied one message's effect. It lives in the same
 * logical partition as the business documents the message changes, and is created in the same
 * transactional batch, first; a second delivery's batch fails on it (409) and writes nothing.
 */
export const MARKER_TYPE = 'inbox-marker';

export interface Marker {
  /** `inbox-` + base64url(SHA-256(consumer, messageId)): deterministic, 49 characters, legal for Cosmos DB. */
  id: string;
  partitionKey: string;
  type: typeof MARKER_TYPE;
  consumer: string;
  /** As the delivery carried it; any characters, up to 128 of them. */
  messageId: string;
  /** SHA-256 of the canonical JSON body, to tell a redelivery from a different message reusing the id. */
  payloadHash: string;
  /** The handler's fallback, when it took one (for example `backorder`). */
  alternative?: string;
  processedAt: string;
  processedAtEpochSeconds: number;
  /** When the purge timer may delete the marker: processedAt + retention. */
  expiresAtEpochSeconds: number;
  deliveryCount: number;
  enqueuedTimeUtc?: string;
  /** Cosmos DB TTL backstop in seconds (retention + backstop), when enabled. */
  ttl?: number;
}

export function markerId(consumer: string, messageId: string): string {
  const digest = createHash('sha256').update(consumer).update('\u0000').update(messageId).digest('base64url');
  return `inbox-${digest}`;
}

/**
 * The key the marker is stored under. Normally (consumer, MessageId). When the host could only hand
 * a MessageId that lost digits (see Delivery.messageIdIsLossy), different messages can share it, so
 * the payload hash joins the key: a redelivery still maps to the same marker (same body), and two
 * different messages do not suppress each other.
 */
export function markerKey(
  delivery: Pick<Delivery, 'messageIdIsLossy'>,
  messageId: string,
  payloadHash: string,
): string {
  return delivery.messageIdIsLossy ? `${messageId}\u0000${payloadHash}` : messageId;
}

/** SHA-256 over JSON with sorted keys, so a producer that re-serialises the same event is not a mismatch. */
export function payloadHash(body: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(body)).digest('base64url')}`;
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export interface MarkerInput {
  consumer: string;
  messageId: string;
  key: string;
  partitionKey: string;
  payloadHash: string;
  delivery: Delivery;
  now: Date;
  retentionSeconds: number;
  ttlBackstopSeconds: number | undefined;
  alternative?: string;
}

export function buildMarker(input: MarkerInput): Marker {
  const processedAtEpochSeconds = Math.floor(input.now.getTime() / 1000);
  return {
    id: markerId(input.consumer, input.key),
    partitionKey: input.partitionKey,
    type: MARKER_TYPE,
    consumer: input.consumer,
    messageId: input.messageId,
    payloadHash: input.payloadHash,
    ...(input.alternative === undefined ? {} : { alternative: input.alternative }),
    processedAt: input.now.toISOString(),
    processedAtEpochSeconds,
    expiresAtEpochSeconds: processedAtEpochSeconds + input.retentionSeconds,
    deliveryCount: input.delivery.deliveryCount,
    ...(input.delivery.enqueuedTimeUtc
      ? { enqueuedTimeUtc: input.delivery.enqueuedTimeUtc.toISOString() }
      : {}),
    ...(input.ttlBackstopSeconds === undefined
      ? {}
      : { ttl: input.retentionSeconds + input.ttlBackstopSeconds }),
  };
}
