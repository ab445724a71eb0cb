import type { Container, PatchOperation } from '@azure/cosmos';

import { bounded } from './errors';
import {
  isOutboxDocument,
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutboxEntry,
  outboxEntryOf,
  type OutboxMessage,
} from './outbox';
import type { Settings } from './settings';

/**
 * The outbox relay and sweeper: what sends the messages handlers published (PartitionTransaction
 * `publish`) once their batch committed, and marks them dispatched.
 *
 * The relay runs on the Cosmos DB change feed of the app's container (a Cosmos DB trigger): a page
 * of changes holds every kind of document, and the pending outbox documents among them are sent,
 * then marked. Sending comes first, so a crash between the two resends rather than loses: the
 * MessageId is deterministic, and the broker's duplicate detection drops a resend within its window
 * (the downstream inbox absorbs a later one). The sweeper, a timer, resends what is still pending
 * after OUTBOX_SWEEP_AGE: the change feed delivers at least once, but a checkpoint can move past a
 * batch whose retries ran out.
 */

/** Sends outbox messages to Service Bus; throws when a message may not have been taken. */
export interface OutboxPublisher {
  /**
   * Sends the messages to the topic, in order, in as few batches as they fit. Returns the
   * MessageIds of those that can never be sent (larger than Service Bus takes), which it skipped.
   */
  send(topic: string, messages: readonly OutboxMessage[]): Promise<readonly string[]>;
  close(): Promise<void>;
}

/** What the relay and the sweeper use: the app's container, a publisher, the clock, the settings. */
export interface RelayDependencies {
  container: Container;
  publisher: OutboxPublisher;
  now: () => Date;
  settings: Pick<Settings, 'outbox'>;
}

export interface DispatchReport {
  /** Messages sent to Service Bus. */
  sent: number;
  /** Documents marked dispatched by this run. */
  marked: number;
  /** Documents someone else marked (or that expired) between the send and the mark. */
  alreadyMarked: number;
  /**
   * Outbox documents that hold no message the relay can send (written by something other than
   * `tx.publish`, or larger than Service Bus takes): marked `unsendable` (kept, no ttl) so that no
   * run tries them again, and logged.
   */
  unsendable: number;
  /** The first ten of their ids, bounded. */
  unsendableIds: string[];
  requestCharge: number;
}

/**
 * The relay's work on one page of changes: sends the pending outbox documents, grouped by topic in
 * the page's order, then marks each dispatched. Anything that fails throws, and the trigger's retry
 * policy runs the page again. A retry (`retrying`) first reads each document again and leaves out
 * those marked since, so one failed mark does not resend the whole page; what it does resend carries
 * the same MessageIds, which the broker drops.
 */
export async function relayOutbox(
  documents: readonly unknown[],
  deps: RelayDependencies,
  retrying = false,
): Promise<DispatchReport> {
  const pending = documents.filter(
    (document): document is OutboxDocument => isOutboxDocument(document) && document.status === 'pending',
  );
  if (!retrying) return dispatch(pending, deps);
  let requestCharge = 0;
  const current = await Promise.all(
    pending.map(async (document) => {
      const partitionKey = outboxEntryOf(document)?.partitionKey;
      if (partitionKey === undefined) return document; // set aside by dispatch, unread
      const response = await deps.container.item(document.id, partitionKey).read<OutboxDocument>();
      requestCharge += response.requestCharge;
      return response.resource;
    }),
  );
  // In the page's order (Promise.all keeps it).
  const still = current.filter((document): document is OutboxDocument => document?.status === 'pending');
  const report = await dispatch(still, deps);
  return {
    ...report,
    alreadyMarked: report.alreadyMarked + pending.length - still.length,
    requestCharge: report.requestCharge + requestCharge,
  };
}

export interface SweepReport extends DispatchReport {
  /** Pending outbox documents when the run started. */
  pending: number;
  /** Seconds since the oldest of them was created, when the run started; 0 when none was pending. */
  oldestPendingAgeSeconds: number;
  /** More were old enough than OUTBOX_SWEEP_MAX_ITEMS: the next run goes on. */
  capped: boolean;
  /**
   * Why the resend failed (Service Bus down, a mark refused): the measurements above still stand,
   * so that the pending metrics (and the alert on them) keep reporting while nothing can be sent.
   */
  failure?: Error;
}

const PENDING_FILTER = `c.type = '${OUTBOX_TYPE}' AND c.pendingSinceEpochSeconds <= @cutoff`;

/**
 * One run of the sweeper: resends outbox documents pending for longer than OUTBOX_SWEEP_AGE, at
 * most OUTBOX_SWEEP_MAX_ITEMS of them, and measures what is pending (for the metrics and the alert).
 * The queries filter on `type` and `pendingSinceEpochSeconds`, the container's composite index.
 */
export async function sweepOutbox(deps: RelayDependencies): Promise<SweepReport> {
  const { container, settings } = deps;
  const nowSeconds = Math.floor(deps.now().getTime() / 1000);
  const counted = await queryAll<number>(
    container,
    `SELECT VALUE COUNT(1) FROM c WHERE ${PENDING_FILTER}`,
    nowSeconds,
  );
  const earliest = await queryAll<number>(
    container,
    `SELECT VALUE MIN(c.pendingSinceEpochSeconds) FROM c WHERE ${PENDING_FILTER}`,
    nowSeconds,
  );
  const count = counted.items.reduce((sum, value) => sum + value, 0);
  const minima = earliest.items.filter((value) => typeof value === 'number');
  const oldest = minima.length > 0 ? Math.min(...minima) : null;
  const measured = counted.requestCharge + earliest.requestCharge;
  const cutoff = nowSeconds - settings.outbox.sweepAgeSeconds;
  const limit = settings.outbox.sweepMaxItems;
  // Oldest first, a page at a time: a document that keeps failing never hides the others for good,
  // and a run holds one page of documents in memory, not OUTBOX_SWEEP_MAX_ITEMS of them.
  const due = container.items.query<OutboxDocument>(
    {
      query: `SELECT * FROM c WHERE ${PENDING_FILTER} ORDER BY c.pendingSinceEpochSeconds`,
      parameters: [{ name: '@cutoff', value: cutoff }],
    },
    { maxItemCount: SWEEP_PAGE },
  );
  const report: DispatchReport = emptyReport();
  let requestCharge = measured;
  let taken = 0;
  let leftOver = false;
  let failure: { failure: Error } | undefined;
  try {
    while (taken < limit && due.hasMoreResults()) {
      const page = await due.fetchNext();
      requestCharge += page.requestCharge;
      const found = page.resources.filter(isOutboxDocument);
      const documents = found.slice(0, limit - taken);
      leftOver = found.length > documents.length;
      taken += documents.length;
      add(report, await dispatch(documents, deps));
    }
  } catch (error) {
    failure = { failure: error instanceof Error ? error : new Error(String(error)) };
  }
  return {
    ...report,
    ...failure,
    requestCharge: report.requestCharge + requestCharge,
    pending: count,
    oldestPendingAgeSeconds: oldest === null ? 0 : Math.max(0, nowSeconds - oldest),
    capped: failure === undefined && taken === limit && (leftOver || due.hasMoreResults()),
  };
}

/** Documents the sweeper reads and sends at a time. */
const SWEEP_PAGE = 100;

const emptyReport = (): DispatchReport => ({
  sent: 0,
  marked: 0,
  alreadyMarked: 0,
  unsendable: 0,
  unsendableIds: [],
  requestCharge: 0,
});

function add(total: DispatchReport, part: DispatchReport): void {
  total.sent += part.sent;
  total.marked += part.marked;
  total.alreadyMarked += part.alreadyMarked;
  total.unsendable += part.unsendable;
  total.unsendableIds.push(...part.unsendableIds.slice(0, 10 - total.unsendableIds.length));
  total.requestCharge += part.requestCharge;
}

async function queryAll<T>(
  container: Container,
  query: string,
  cutoff: number,
): Promise<{ items: T[]; requestCharge: number }> {
  const iterator = container.items.query<T>({ query, parameters: [{ name: '@cutoff', value: cutoff }] });
  const items: T[] = [];
  let requestCharge = 0;
  while (iterator.hasMoreResults()) {
    const page = await iterator.fetchNext();
    items.push(...page.resources);
    requestCharge += page.requestCharge;
  }
  return { items, requestCharge };
}

/** How many dispatch marks run at once. */
const MARK_CONCURRENCY = 16;

async function dispatch(
  documents: readonly OutboxDocument[],
  deps: RelayDependencies,
): Promise<DispatchReport> {
  const report = emptyReport();
  if (documents.length === 0) return report;
  const sendable: { document: OutboxDocument; entry: OutboxEntry }[] = [];
  const unsendable: { document: OutboxDocument; partitionKey: unknown }[] = [];
  for (const document of documents) {
    const entry = outboxEntryOf(document);
    if (entry) sendable.push({ document, entry });
    else unsendable.push({ document, partitionKey: document.partitionKey });
  }
  // Topic by topic: a topic that refuses the send (a missing role, an outage of one entity) does not
  // hold back the others, whose documents are marked before the failure is thrown.
  const byTopic = new Map<string, { document: OutboxDocument; entry: OutboxEntry }[]>();
  for (const item of sendable) {
    const group = byTopic.get(item.entry.message.topic) ?? [];
    group.push(item);
    byTopic.set(item.entry.message.topic, group);
  }
  const sent: { document: OutboxDocument; entry: OutboxEntry }[] = [];
  let failure: { error: unknown } | undefined;
  for (const [topic, group] of byTopic) {
    try {
      const tooLarge = new Set(
        await deps.publisher.send(
          topic,
          group.map(({ entry }) => entry.message),
        ),
      );
      for (const item of group) {
        if (tooLarge.has(item.entry.message.messageId)) {
          unsendable.push({ document: item.document, partitionKey: item.entry.partitionKey });
        } else sent.push(item);
      }
      report.sent += group.length - tooLarge.size;
    } catch (error) {
      failure ??= { error };
    }
  }
  const nowSeconds = Math.floor(deps.now().getTime() / 1000);
  const mark: PatchOperation[] = [
    { op: 'set', path: '/status', value: 'dispatched' },
    { op: 'set', path: '/dispatchedAtEpochSeconds', value: nowSeconds },
    { op: 'set', path: '/ttl', value: deps.settings.outbox.dispatchedRetentionSeconds },
    { op: 'remove', path: '/pendingSinceEpochSeconds' },
  ];
  const setAside = (document: OutboxDocument): PatchOperation[] => [
    { op: 'set', path: '/status', value: 'unsendable' },
    // A patch's remove needs the property: a foreign document may not have it.
    ...(document.pendingSinceEpochSeconds === undefined
      ? []
      : [{ op: 'remove', path: '/pendingSinceEpochSeconds' } as const]),
  ];
  const marks = [
    ...sent.map(({ document, entry }) => ({ document, partitionKey: entry.partitionKey, operations: mark })),
    ...unsendable
      .filter(
        (item): item is { document: OutboxDocument; partitionKey: string } =>
          typeof item.partitionKey === 'string',
      )
      .map(({ document, partitionKey }) => ({ document, partitionKey, operations: setAside(document) })),
  ];
  let next = 0;
  // Every mark is tried, and the first failure thrown once all have ended: a write must not be left
  // running after the invocation that started it has returned.
  const worker = async (): Promise<void> => {
    for (let index = next++; index < marks.length; index = next++) {
      const { document, partitionKey, operations } = marks[index] as (typeof marks)[number];
      try {
        const response = await deps.container
          .item(document.id, partitionKey)
          .patch({ operations, condition: "from c where c.status = 'pending'" });
        report.requestCharge += response.requestCharge;
        if (operations === mark) report.marked++;
        else if (++report.unsendable <= 10) report.unsendableIds.push(bounded(String(document.id)));
      } catch (error) {
        // 412: the relay and the sweeper both sent it, and the other marked it first; 404: it was
        // marked and has expired since. Either way it is dispatched.
        const code = (error as { code?: unknown }).code;
        if (code === 412 || code === 404) report.alreadyMarked++;
        else failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(MARK_CONCURRENCY, marks.length) }, worker));
  if (failure) throw failure.error;
  return report;
}
