import type { Container } from '@azure/cosmos';
import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import {
  bounded,
  type Consumer,
  createCosmosClient,
  FAILURE_NOTE_TYPE,
  type FailureNote,
  failureNoteId,
  loadSettings,
  type Marker,
  markerLocation,
  PoisonMessageError,
  SettingsError,
} from '@idempotent-consumers/inbox/internal';

import { EnvironmentError } from '../cli/errors';
import { loadConsumers } from './consumers';
import { deliveryOf, LONGEST_RETRY_DELAY_SECONDS } from './deadLetterIdentity';

/**
 * What the consumer of a subscription knows about a dead letter: whether its inbox holds the
 * message's marker. Only this template can tell, because the marker is the proof of the effect.
 *
 *   applied            a marker with the same payload hash: the effect happened (its settlement was lost)
 *   payload-mismatch   a marker with another hash: a different message used this MessageId first
 *   not-applied        no marker, and one written for this message would still be kept
 *   failed             not applied: its last delivery failed with an error its consumer noted
 *   unknown            no marker, but one may have been purged (older than INBOX_RETENTION), or the
 *                      consumer is not known to this checkout
 *   versioned          the consumer keeps no marker: it writes only over an older version
 *   poison             the consumer cannot read the message (the reason says why); it was never applied
 *   rejected           the consumer read it and rejected it as poison on its last delivery (the
 *                      reason its failure note records); it was never applied
 */
export const INBOX_STATES = [
  'applied',
  'payload-mismatch',
  'not-applied',
  'failed',
  'unknown',
  'versioned',
  'poison',
  'rejected',
] as const;
export type InboxStateName = (typeof INBOX_STATES)[number];

export interface InboxState {
  state: InboxStateName;
  /** Why, for the operator; never message content. */
  detail: string;
}

/** Where the tool reads markers, as the app does (packages/inbox/src/settings.ts). */
export interface Inbox {
  container: Container;
  retentionSeconds: number;
  /** For the operator: which account and container. */
  description: string;
  close(): void;
}

/**
 * The app's Cosmos DB settings: COSMOS_ENDPOINT, COSMOS_DATABASE, COSMOS_CONTAINER, COSMOS_KEY only
 * for the local server or an emulator (otherwise DefaultAzureCredential), INBOX_RETENTION. Without
 * COSMOS_ENDPOINT the inbox is not checked: the reason is returned instead.
 */
export function connectInbox(env: Readonly<Record<string, string | undefined>>): Inbox | string {
  if (!env.COSMOS_ENDPOINT?.trim()) {
    return 'COSMOS_ENDPOINT is not set (set it, and COSMOS_DATABASE/COSMOS_CONTAINER if not app/state, to see whether each message was applied)';
  }
  let settings;
  try {
    settings = loadSettings(env);
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    throw new EnvironmentError(`Cosmos DB settings: ${error.problems.join('; ')}`, { cause: error });
  }
  const client = createCosmosClient(settings.cosmos);
  const { endpoint, database, container, key } = settings.cosmos;
  return {
    container: client.database(database).container(container),
    retentionSeconds: settings.inbox.retentionSeconds,
    description: `${endpoint} ${database}/${container} (${key ? 'key: local server or emulator' : 'DefaultAzureCredential'})`,
    close: () => client.dispose(),
  };
}

/** The consumer that reads a subscription (a consumer's name is its subscription's), as the app registers it. */
export async function consumerOf(subscription: string): Promise<Consumer | undefined> {
  return (await loadConsumers({ definitionsOnly: true })).get(subscription);
}

/**
 * The state of one dead letter in the consumer's inbox. The marker is found with the library's own
 * code: the delivery the adapter would process (deliveryOf: toDelivery, then asOriginal) and where
 * processing would put its marker (markerLocation), so a lossy MessageId maps to the same key as in
 * the app, and a delayed-retry copy is looked up by its original MessageId and Subject: its marker
 * and its failure note are the original's (packages/inbox/src/delayedRetry.ts). A copy without valid family
 * properties, or scheduled for another subscription, is poison (invalid-retry-copy), as the
 * consumer says.
 *
 * Without a marker, the timeline decides whether one could have been purged:
 *
 *   enqueued ── processed (marker written, if ever) ── … ── processed + INBOX_RETENTION: purgeable
 *
 * processed is never before enqueued, so while now + clock skew is before enqueued + retention a
 * marker written for this message would still be there: its absence means not applied. A copy's
 * family may have been applied (by another send of the original) after the copy was scheduled,
 * which is up to the longest retry delay before the copy was enqueued: its timeline starts then.
 */
export async function inboxStateOf(
  message: ServiceBusReceivedMessage,
  consumer: Consumer | undefined,
  inbox: Inbox,
  at: { nowMs: number; clockSkewMs: number },
): Promise<InboxState> {
  if (!consumer) return { state: 'unknown', detail: 'no function in functions/ reads this subscription' };
  if (consumer.kind === 'versioned') {
    return { state: 'versioned', detail: 'no marker: it writes only over an older version' };
  }
  const delivery = deliveryOf(message);
  let location;
  try {
    location = markerLocation(consumer, delivery);
  } catch (error) {
    if (error instanceof PoisonMessageError) return { state: 'poison', detail: error.reason };
    throw error;
  }
  const { resource: marker } = await inbox.container.item(location.id, location.partitionKey).read<Marker>();
  if (marker) {
    return marker.payloadHash === location.payloadHash
      ? { state: 'applied', detail: `marker of ${marker.processedAt}` }
      : { state: 'payload-mismatch', detail: `marker of ${marker.processedAt} has another payload hash` };
  }
  // Why its last delivery failed, when the consumer could note it (packages/inbox/src/failureNote.ts).
  const { resource: note } = await inbox.container
    .item(failureNoteId(location.id), location.partitionKey)
    .read<FailureNote>();
  if (note?.type === FAILURE_NOTE_TYPE && note.payloadHash === location.payloadHash) {
    const when = `delivery ${note.deliveryCount}, ${note.failedAt}`;
    return note.reason === 'failed'
      ? { state: 'failed', detail: `${bounded(note.error, 120)}; ${when}` }
      : { state: 'rejected', detail: `${bounded(note.reason, 40)}; ${when}` };
  }
  const scheduledMs =
    message.enqueuedTimeUtc === undefined
      ? undefined
      : message.enqueuedTimeUtc.getTime() -
        (delivery.retry === undefined ? 0 : LONGEST_RETRY_DELAY_SECONDS * 1000);
  if (scheduledMs !== undefined && at.nowMs + at.clockSkewMs < scheduledMs + inbox.retentionSeconds * 1000) {
    return { state: 'not-applied', detail: 'no marker' };
  }
  return { state: 'unknown', detail: 'no marker, and it may have been purged (older than INBOX_RETENTION)' };
}
