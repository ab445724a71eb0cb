import type { Topology } from '@idempotent-consumers/inbox/internal';

/**
 * What one message costs, from named inputs and the requests the library makes for each outcome
 * (packages/inbox/src/process.ts, transaction.ts, purge.ts, relay.ts). The request-unit rules are Microsoft's
 * rules of thumb (https://learn.microsoft.com/azure/cosmos-db/request-units: a point read of a 1 KB
 * item is 1 RU; a write of a 1 KB item about 5 RU with the default indexing policy), the same rules
 * the local Cosmos DB server charges by (packages/local-azure/src/cosmos/requestCharge.ts), so a test can check the
 * model against the charges the server reports. Neither is Azure's bill: real charges depend on
 * the indexing policy, the item's shape and the consistency level.
 */
export const RU_RULES = {
  /** RU per started KB of a point read. */
  readPerKb: 1,
  /** RU per started KB of a create, replace, patch or delete. */
  writePerKb: 5,
  /** A request that fails a condition (404, 409, 412) before touching data. */
  failedRequest: 1,
  /** A query page's fixed part, and the KB of items it reads through the index per RU. */
  queryBase: 2,
  queryScannedKbPerRu: 10,
} as const;

/**
 * Bytes Cosmos DB adds to every stored item (`_rid`, `_self`, `_etag`, `_attachments`, `_ts`): what
 * an item created on the local server carries beyond its JSON body, measured once (205 bytes; the
 * five properties have the same shape in Azure). Sizes count in started KB, so a few bytes either
 * way rarely change a charge.
 */
export const SYSTEM_PROPERTY_BYTES = 205;

const KB = 1024;
const startedKb = (bytes: number): number => Math.max(1, Math.ceil(bytes / KB));
export const readRu = (bytes: number): number => RU_RULES.readPerKb * startedKb(bytes);
export const writeRu = (bytes: number): number => RU_RULES.writePerKb * startedKb(bytes);

/** The inputs of the Cosmos DB part: sizes as stored (body JSON plus SYSTEM_PROPERTY_BYTES). */
export interface CosmosInputs {
  /** An inbox marker's stored bytes. */
  markerBytes: number;
  /** Point reads the handler makes per run (`tx.read`). */
  handlerReads: number;
  /** Business documents the handler writes per message (create, replace, patch, upsert). */
  businessWrites: number;
  /** A business document's stored bytes (what it reads and writes). */
  businessDocumentBytes: number;
  /** Messages the handler publishes per message (`tx.publish`). */
  publishes: number;
  /** An outbox document's stored bytes. */
  outboxDocumentBytes: number;
  /** Markers the purge fetches per query page (PurgeOptions.pageSize, default 100). */
  purgePageSize: number;
  /** The bytes of one row of the purge's query (id, partitionKey, expiresAtEpochSeconds, _etag). */
  purgeRowBytes: number;
}

/** RU of each outcome, and the requests it makes. */
export interface OutcomeCost {
  outcome: string;
  requestUnits: number;
  requests: number;
  /** Which requests, in words. */
  made: string;
}

/** Request units per outcome, as the library makes the requests. */
export function cosmosCosts(inputs: CosmosInputs): OutcomeCost[] {
  const { handlerReads, businessWrites, publishes } = inputs;
  const reads = handlerReads * readRu(inputs.businessDocumentBytes);
  const batch =
    writeRu(inputs.markerBytes) +
    businessWrites * writeRu(inputs.businessDocumentBytes) +
    publishes * writeRu(inputs.outboxDocumentBytes);
  const markerRead = readRu(inputs.markerBytes);
  const pageShare =
    RU_RULES.queryBase / inputs.purgePageSize +
    inputs.markerBytes / (RU_RULES.queryScannedKbPerRu * KB) +
    inputs.purgeRowBytes / KB;
  const round = (value: number): number => Math.round(value * 100) / 100;
  return [
    {
      outcome: 'new',
      requestUnits: reads + batch,
      requests: handlerReads + 1,
      made: `${handlerReads} read(s), 1 batch: marker + ${businessWrites} write(s) + ${publishes} outbox document(s)`,
    },
    {
      outcome: 'new, redelivered',
      requestUnits: RU_RULES.failedRequest + reads + batch,
      requests: handlerReads + 2,
      made: 'a marker read that finds none (404), then as new',
    },
    {
      outcome: 'duplicate, redelivered',
      requestUnits: markerRead,
      requests: 1,
      made: 'one marker read; the handler does not run',
    },
    {
      outcome: 'duplicate, first delivery',
      requestUnits: reads + RU_RULES.failedRequest + markerRead,
      requests: handlerReads + 2,
      made: `${handlerReads} read(s), a batch refused on the marker (409), one marker read`,
    },
    {
      outcome: 'poison',
      requestUnits: 0,
      requests: 0,
      made: 'none: refused before any request (each delivery until dead-lettered)',
    },
    {
      outcome: 'purge (per marker)',
      requestUnits: round(writeRu(inputs.markerBytes) + pageShare),
      requests: round(1 + 1 / inputs.purgePageSize),
      made: `its delete (one batch per partition of a page: at most 1 request), its share of a query page of ${inputs.purgePageSize}`,
    },
    {
      outcome: 'outbox publish (per message)',
      requestUnits: writeRu(inputs.outboxDocumentBytes),
      requests: 0,
      made: "its outbox document's create, inside the batch of new",
    },
    {
      outcome: 'relay (per message)',
      requestUnits: writeRu(inputs.outboxDocumentBytes),
      requests: 1,
      made: "the dispatch mark (a conditional patch); the trigger's change-feed and lease requests are not counted",
    },
  ];
}

/** Service Bus operations for one event of a subject sent to a topic. */
export interface EventOperations {
  topic: string;
  subject: string;
  sends: number;
  /** One per subscription of the topic: each evaluates its filter on the message. */
  filterEvaluations: number;
  /** The subscriptions whose filter takes the subject: each receives and settles its copy. */
  takenBy: string[];
  receives: number;
  settles: number;
  /** Throttling credits (Standard): sends, filter evaluations and receives, one each. */
  credits: number;
  /** Billed operations (every API call): sends, receives and settles. */
  billedOperations: number;
}

/** Every subject the topology routes or declares, with its operations per event. */
export function serviceBusOperations(topology: Topology): EventOperations[] {
  const events: EventOperations[] = [];
  for (const topic of topology.topics) {
    const subjects = new Set([
      ...topic.subscriptions.flatMap((subscription) => subscription.subjects),
      ...(topic.unsubscribedSubjects ?? []),
    ]);
    for (const subject of subjects) {
      const takenBy = topic.subscriptions
        .filter((subscription) => subscription.subjects.includes(subject))
        .map((subscription) => subscription.name);
      const filterEvaluations = topic.subscriptions.length;
      events.push({
        topic: topic.name,
        subject,
        sends: 1,
        filterEvaluations,
        takenBy,
        receives: takenBy.length,
        settles: takenBy.length,
        credits: 1 + filterEvaluations + takenBy.length,
        billedOperations: 1 + 2 * takenBy.length,
      });
    }
  }
  return events;
}

/**
 * A poison message's Service Bus cost in one subscription: the host abandons each delivery and
 * Service Bus redelivers it until maxDeliveryCount, then dead-letters it (docs/poison-on-first-delivery.md).
 */
export function poisonOperations(maxDeliveryCount: number): {
  deliveries: number;
  credits: number;
  billedOperations: number;
} {
  return { deliveries: maxDeliveryCount, credits: maxDeliveryCount, billedOperations: 2 * maxDeliveryCount };
}

/** Throttling credits a Standard namespace grants per second (see SERVICE_BUS_THROTTLING_SOURCE). */
export const STANDARD_CREDITS_PER_SECOND = 1000;
export const SERVICE_BUS_THROTTLING_SOURCE =
  'https://learn.microsoft.com/azure/service-bus-messaging/service-bus-throttling';

/** Events per second a Standard namespace sustains when every event costs `credits`. */
export function sustainableEventsPerSecond(credits: number): number {
  return Math.floor(STANDARD_CREDITS_PER_SECOND / credits);
}

/**
 * RU/s a provisioned container needs for `eventsPerSecond` events costing `requestUnits` each, rounded up
 * to Cosmos DB's steps of 100 RU/s, at least its minimum of 400.
 */
export function provisionedRequestUnitsPerSecond(eventsPerSecond: number, requestUnits: number): number {
  return Math.max(400, Math.ceil((eventsPerSecond * requestUnits) / 100) * 100);
}
