import type { Container } from '@azure/cosmos';
import {
  functionNameOf,
  MARKER_TYPE,
  OUTBOX_TYPE,
  type Topology,
} from '@idempotent-consumers/inbox/internal';

import { bounded } from '../../cli/errors';
import type { Inbox } from '../inboxState';
import { bodyForPage, PAGE_BODY_BYTES } from './body';
import { ConsoleError, explainRefusal } from './errors';
import { type Feed, KEPT_BODIES } from './feed';
import type { ToolCalls } from './toolThread';
import type {
  BodyView,
  ConsumerView,
  DocumentView,
  FeedPage,
  Overview,
  PartitionView,
  SubscriptionView,
} from './types';

/** The console's page of documents in a partition, and how much of one document it shows. */
const DOCUMENTS_PER_PAGE = 50;
const DOCUMENT_JSON_LIMIT = 64 * 1024;
const RECENT_PARTITIONS = 20;

export type SubscriptionCounts = NonNullable<SubscriptionView['counts']>;

/** The subscriptions' counts, by `<topic>/<subscription>`, and how they were counted when it matters. */
export interface CountsRead {
  counts: ReadonlyMap<string, SubscriptionCounts>;
  note?: string;
}

/** Where the console reads and acts: npm start's local stack, or a deployment. */
export interface BackendParts {
  /** What the page says it looks at. */
  target: string;
  /** Whether the page may resubmit, discard and send; and what to say when it may not. */
  actions: boolean;
  readOnlyReason: string;
  /** Where the inbox and the business documents are (connectInbox), or why it is not connected. */
  inbox: Inbox | string;
  /** The dead-letter queues and the send form: the tools' code, on a thread of its own (toolSide.ts). */
  tools: () => ToolCalls;
  /** The topics and subscriptions the broker serves now. */
  topology: () => Topology;
  /** The message counts of every subscription (an error names what is missing). */
  counts: () => Promise<CountsRead>;
  /** The function names the app registers (a consumer's is functionNameOf(consumer)). */
  functions: () => readonly string[];
  /** The app's other functions: its timers with their next runs, its change-feed relay. */
  others: () => Overview['others'];
  /** When the inbox purge timer runs next, when known. */
  nextPurge: () => Date | undefined;
  /** The live feed: npm start's; a deployment's events are in Application Insights. */
  feed: Feed | undefined;
}

/**
 * What the console serves, over the parts of its target: the pipeline, the feed, the consumers and
 * their documents here; the dead-letter queues and the send form through the tool side.
 */
export class ConsoleBackend {
  readonly actions: boolean;
  readonly readOnlyReason: string;
  constructor(private readonly parts: BackendParts) {
    this.actions = parts.actions;
    this.readOnlyReason = parts.readOnlyReason;
  }

  /** The tool side now (npm start's watch mode starts a new one with each new build). */
  get tools(): ToolCalls {
    return this.parts.tools();
  }

  /** The topics and subscriptions as the broker serves them now. */
  topology(): Topology {
    return this.parts.topology();
  }

  async overview(): Promise<Overview> {
    const problems: string[] = [];
    let counts: CountsRead['counts'] | undefined;
    try {
      const read = await this.parts.counts();
      counts = read.counts;
      if (read.note !== undefined) problems.push(read.note);
    } catch (error) {
      problems.push(this.problem(error, 'the message counts'));
    }
    const registered = new Set(this.parts.functions());
    return {
      target: this.parts.target,
      actions: this.parts.actions,
      feed: this.parts.feed !== undefined,
      topics: this.parts.topology().topics.map((topic) => ({
        name: topic.name,
        publishers: [...(topic.publishers ?? [])],
        unsubscribedSubjects: [...(topic.unsubscribedSubjects ?? [])],
        subscriptions: topic.subscriptions.map((subscription) => {
          const name = functionNameOf(subscription.name);
          return {
            name: subscription.name,
            topic: topic.name,
            subjects: [...subscription.subjects],
            function: registered.has(name) ? name : undefined,
            delayedRetry: subscription.delayedRetry,
            counts: counts?.get(`${topic.name}/${subscription.name}`),
          };
        }),
      })),
      others: this.parts.others(),
      problems,
    };
  }

  feed(after: number, waitMs: number, signal: AbortSignal): Promise<FeedPage> {
    if (this.parts.feed === undefined) return Promise.resolve({ events: [], last: after });
    return this.parts.feed.page(after, 200, waitMs, signal);
  }

  /** A feed event's body, while the feed keeps it. */
  feedBody(seq: number): Promise<BodyView> {
    const body = this.parts.feed?.body(seq);
    if (body === undefined) {
      throw new ConsoleError(
        404,
        `The console no longer keeps this body (it keeps the last ${KEPT_BODIES}, up to ${PAGE_BODY_BYTES / 1024} KB each).`,
      );
    }
    return Promise.resolve(bodyForPage(body));
  }

  async consumer(name: string): Promise<ConsumerView> {
    const consumer = this.knownConsumer(name);
    const container = this.container();
    const problems: string[] = [];
    const read = async <T>(what: string, query: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await query();
      } catch (error) {
        problems.push(this.problem(error, what));
        return undefined;
      }
    };
    const values = async <T>(query: string, parameters: { name: string; value: string | number }[]) =>
      (await container.items.query<T>({ query, parameters }).fetchAll()).resources;
    const byConsumer = [
      { name: '@consumer', value: consumer },
      { name: '@marker', value: MARKER_TYPE },
      { name: '@outbox', value: OUTBOX_TYPE },
    ];
    const marker = byConsumer.slice(0, 2);
    // Two scans side by side: the inbox's and the outbox's numbers in one (GROUP BY), the newest
    // markers in the other.
    const [totals, recent] = await Promise.all([
      read('its inbox and outbox', () =>
        values<{ type: string; documents: number; oldestMarker?: number; oldestPending?: number }>(
          'SELECT c.type, COUNT(1) AS documents, MIN(c.processedAtEpochSeconds) AS oldestMarker, ' +
            'MIN(c.pendingSinceEpochSeconds) AS oldestPending FROM c WHERE c.consumer = @consumer AND ' +
            '(c.type = @marker OR (c.type = @outbox AND IS_DEFINED(c.pendingSinceEpochSeconds))) GROUP BY c.type',
          byConsumer,
        ),
      ),
      read('the partitions it wrote', () =>
        values<{ partitionKey: unknown; messageId: unknown; processedAt: unknown }>(
          `SELECT TOP ${RECENT_PARTITIONS} c.partitionKey, c.messageId, c.processedAt FROM c ` +
            'WHERE c.type = @marker AND c.consumer = @consumer ORDER BY c.processedAtEpochSeconds DESC',
          marker,
        ),
      ).then((found) => found ?? []),
    ]);
    const markers = totals?.find((row) => row.type === MARKER_TYPE);
    const pending = totals?.find((row) => row.type === OUTBOX_TYPE);
    const inbox =
      totals === undefined
        ? undefined
        : { markers: markers?.documents ?? 0, oldestProcessedAt: epochText(markers?.oldestMarker) };
    const outbox =
      totals === undefined
        ? undefined
        : { pending: pending?.documents ?? 0, oldestPendingSince: epochText(pending?.oldestPending) };
    return {
      consumer,
      inbox,
      nextPurge: this.parts.nextPurge()?.toISOString(),
      outbox,
      recentPartitions: recent.map((marker) => ({
        partitionKey: String(marker.partitionKey),
        messageId: bounded(String(marker.messageId), 128),
        processedAt: String(marker.processedAt),
      })),
      problems,
    };
  }

  /** A page of the documents in one logical partition: business state, inbox markers and outbox. */
  async partition(partitionKey: string, continuation: string | undefined): Promise<PartitionView> {
    checkPartitionKey(partitionKey);
    if (continuation !== undefined && continuation.length > 4096)
      throw new ConsoleError(400, 'continuation is too long.');
    try {
      const page = await this.container()
        .items.query<{ id: string; type?: unknown; _ts?: number }>(
          { query: 'SELECT c.id, c.type, c._ts FROM c' },
          {
            partitionKey,
            maxItemCount: DOCUMENTS_PER_PAGE,
            ...(continuation === undefined ? {} : { continuationToken: continuation }),
          },
        )
        .fetchNext();
      return {
        partitionKey,
        documents: page.resources.map((document) => ({
          id: document.id,
          type: typeof document.type === 'string' ? bounded(document.type, 60) : undefined,
          ts: document._ts,
        })),
        continuation: page.continuationToken ?? undefined,
      };
    } catch (error) {
      throw new ConsoleError(502, this.problem(error, 'the partition'));
    }
  }

  async document(partitionKey: string, id: string): Promise<DocumentView> {
    checkPartitionKey(partitionKey);
    if (id.length === 0 || id.length > 255)
      throw new ConsoleError(400, 'A document id has 1 to 255 characters.');
    let resource: unknown;
    try {
      ({ resource } = await this.container().item(id, partitionKey).read());
    } catch (error) {
      throw new ConsoleError(502, this.problem(error, 'the document'));
    }
    if (resource === undefined)
      throw new ConsoleError(404, 'No such document (it may have been deleted or purged).');
    const json = JSON.stringify(resource, null, 2);
    return {
      partitionKey,
      id,
      json: json.length > DOCUMENT_JSON_LIMIT ? json.slice(0, DOCUMENT_JSON_LIMIT) : json,
      truncated: json.length > DOCUMENT_JSON_LIMIT,
    };
  }

  private container(): Container {
    if (typeof this.parts.inbox === 'string')
      throw new ConsoleError(503, `Cosmos DB is not connected: ${this.parts.inbox}.`);
    return this.parts.inbox.container;
  }

  close(): void {
    this.parts.feed?.close();
  }

  /** A consumer the topology declares, by name: nothing else is queried. */
  private knownConsumer(name: string): string {
    const known = this.parts.topology().topics.flatMap((topic) => topic.subscriptions.map((s) => s.name));
    if (!known.includes(name)) throw new ConsoleError(404, `No consumer is named '${bounded(name, 60)}'.`);
    return name;
  }

  private problem(error: unknown, what: string): string {
    return (
      explainRefusal(error, what) ??
      `Could not read ${what}: ${bounded(error instanceof Error ? error.message : String(error), 200)}`
    );
  }
}

function checkPartitionKey(partitionKey: string): void {
  if (partitionKey.length === 0 || Buffer.byteLength(partitionKey) > 2048)
    throw new ConsoleError(400, 'A partition key has 1 to 2048 bytes.');
}

function epochText(seconds: number | undefined): string | undefined {
  return typeof seconds === 'number' ? new Date(seconds * 1000).toISOString() : undefined;
}
