import {
  buildOutboxDocument,
  type Marker,
  MARKER_TYPE,
  type Topology,
} from '@idempotent-consumers/inbox/internal';

import { type CosmosInputs, SYSTEM_PROPERTY_BYTES } from './model';

/** What the user says about a typical event and its handler (the cost tool's flags). */
export interface TypicalEvent {
  /** The event body's JSON bytes (what a published message carries). */
  eventBytes: number;
  handlerReads: number;
  businessWrites: number;
  businessDocumentBytes: number;
  publishes: number;
}

const stored = (document: unknown): number =>
  Buffer.byteLength(JSON.stringify(document)) + SYSTEM_PROPERTY_BYTES;

/**
 * The model's inputs for a typical event: the marker and the outbox document built as the library
 * builds them (a GUID MessageId, a partition key of 40 characters, the topology's longest consumer
 * name), so their sizes are those the library stores.
 */
export function cosmosInputs(event: TypicalEvent, topology: Topology): CosmosInputs {
  const consumer =
    topology.topics
      .flatMap((topic) => topic.subscriptions.map((subscription) => subscription.name))
      .sort((a, b) => b.length - a.length)[0] ?? 'billing.payment-applier';
  const partitionKey = 'p'.repeat(40);
  const messageId = '0'.repeat(32);
  const now = new Date(Date.UTC(2026, 0, 1));
  const seconds = Math.floor(now.getTime() / 1000);
  const marker: Marker = {
    id: `inbox-${'h'.repeat(43)}`,
    partitionKey,
    type: MARKER_TYPE,
    consumer,
    messageId,
    payloadHash: `sha256:${'h'.repeat(43)}`,
    processedAt: now.toISOString(),
    processedAtEpochSeconds: seconds,
    expiresAtEpochSeconds: seconds + 30 * 86_400,
    deliveryCount: 1,
    enqueuedTimeUtc: now.toISOString(),
    ttl: 37 * 86_400,
  };
  const outbox = buildOutboxDocument(
    {
      topic: 'business-events',
      subject: 'Published',
      body: { padding: 'x'.repeat(Math.max(0, event.eventBytes - 15)) },
    },
    0,
    { consumer, key: messageId, messageId, correlationId: undefined },
    partitionKey,
    now,
  );
  return {
    markerBytes: stored(marker),
    handlerReads: event.handlerReads,
    businessWrites: event.businessWrites,
    businessDocumentBytes: event.businessDocumentBytes + SYSTEM_PROPERTY_BYTES,
    publishes: event.publishes,
    outboxDocumentBytes: stored(outbox),
    purgePageSize: 100,
    purgeRowBytes: Buffer.byteLength(
      JSON.stringify({
        id: marker.id,
        partitionKey,
        expiresAtEpochSeconds: seconds,
        _etag: `"${'0'.repeat(36)}"`,
      }),
    ),
  };
}
