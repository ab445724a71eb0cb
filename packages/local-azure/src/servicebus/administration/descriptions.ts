import { formatIsoDuration, isoDurationSeconds } from '../../durations';
import type { Subscription, Topic } from '../broker';
import { escapeXml, type XmlElement } from './xml';

/**
 * The entity descriptions of Service Bus's ATOM management protocol (QueueDescription,
 * TopicDescription, SubscriptionDescription), read from a client's PUT and written from the model.
 *
 * The properties the model honours per entity take effect on it: LockDuration and MaxDeliveryCount
 * (its locks and its dead-lettering), DefaultMessageTimeToLive, DeadLetteringOnMessageExpiration,
 * RequiresDuplicateDetection and DuplicateDetectionHistoryTimeWindow (a topic's or queue's). The
 * others (RequiresSession, EnablePartitioning, EnableBatchedOperations, Status, UserMetadata, ...)
 * are kept as sent and returned; the model does nothing with them. Elements are written in the
 * order Service Bus writes them (the .NET SDK's *PropertiesExtensions read them in that order).
 */
export type EntityKind = 'queue' | 'topic' | 'subscription';

export const DESCRIPTION_OF: Readonly<Record<EntityKind, string>> = {
  queue: 'QueueDescription',
  topic: 'TopicDescription',
  subscription: 'SubscriptionDescription',
};

export const SERVICEBUS_NAMESPACE = 'http://schemas.microsoft.com/netservices/2010/10/servicebus/connect';
const COUNT_DETAILS_NAMESPACE = 'http://schemas.microsoft.com/netservices/2011/06/servicebus';
const INSTANCE_NAMESPACE = 'http://www.w3.org/2001/XMLSchema-instance';

/** TimeSpan.MaxValue, what Service Bus writes for "never" (AutoDeleteOnIdle, a TTL not set). */
const NEVER = 'P10675199DT2H48M5.4775807S';
const NEVER_MS = 10_675_199 * 86_400_000;

/** A duration of the model as Service Bus writes it: ISO 8601, or TimeSpan.MaxValue for never. */
export const entityDuration = (ms: number): string => (ms >= NEVER_MS ? NEVER : formatIsoDuration(ms / 1000));

/** What a client may set, per kind, with Service Bus's default when it does not. */
const SETTABLE: Readonly<Record<EntityKind, Readonly<Record<string, string>>>> = {
  queue: {
    LockDuration: 'PT1M',
    MaxSizeInMegabytes: '1024',
    RequiresDuplicateDetection: 'false',
    RequiresSession: 'false',
    DefaultMessageTimeToLive: NEVER,
    DeadLetteringOnMessageExpiration: 'false',
    DuplicateDetectionHistoryTimeWindow: 'PT10M',
    MaxDeliveryCount: '10',
    EnableBatchedOperations: 'true',
    Status: 'Active',
    ForwardTo: '',
    UserMetadata: '',
    AutoDeleteOnIdle: NEVER,
    EnablePartitioning: 'false',
    ForwardDeadLetteredMessagesTo: '',
    EntityAvailabilityStatus: 'Available',
    EnableExpress: 'false',
    MaxMessageSizeInKilobytes: '256',
  },
  topic: {
    DefaultMessageTimeToLive: NEVER,
    MaxSizeInMegabytes: '1024',
    RequiresDuplicateDetection: 'false',
    DuplicateDetectionHistoryTimeWindow: 'PT10M',
    EnableBatchedOperations: 'true',
    Status: 'Active',
    UserMetadata: '',
    SupportOrdering: 'true',
    AutoDeleteOnIdle: NEVER,
    EnablePartitioning: 'false',
    EntityAvailabilityStatus: 'Available',
    EnableExpress: 'false',
    MaxMessageSizeInKilobytes: '256',
  },
  subscription: {
    LockDuration: 'PT1M',
    RequiresSession: 'false',
    DefaultMessageTimeToLive: NEVER,
    DeadLetteringOnMessageExpiration: 'false',
    DeadLetteringOnFilterEvaluationExceptions: 'true',
    MaxDeliveryCount: '10',
    EnableBatchedOperations: 'true',
    Status: 'Active',
    ForwardTo: '',
    UserMetadata: '',
    ForwardDeadLetteredMessagesTo: '',
    AutoDeleteOnIdle: NEVER,
    EntityAvailabilityStatus: 'Available',
  },
};

const BOOLEANS = new Set([
  'RequiresDuplicateDetection',
  'RequiresSession',
  'DeadLetteringOnMessageExpiration',
  'DeadLetteringOnFilterEvaluationExceptions',
  'EnableBatchedOperations',
  'SupportOrdering',
  'EnablePartitioning',
  'EnableExpress',
]);
const DURATIONS = new Set([
  'LockDuration',
  'DefaultMessageTimeToLive',
  'DuplicateDetectionHistoryTimeWindow',
  'AutoDeleteOnIdle',
]);
const INTEGERS = new Set(['MaxSizeInMegabytes', 'MaxDeliveryCount', 'MaxMessageSizeInKilobytes']);
const MAX_USER_METADATA = 1024;

/** A description a client sent that Service Bus would refuse (answered 400). */
export class DescriptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DescriptionError';
  }
}

/** What the endpoint keeps of an entity beside the model: its times and the properties as sent. */
export interface EntityRecord {
  createdAt: Date;
  updatedAt: Date;
  /** Settable properties, by element name, as the client last sent them (validated). */
  readonly sent: Map<string, string>;
}

/**
 * The settable properties of a description, validated: unknown elements are ignored, as Service
 * Bus ignores what it does not know; a value of the wrong type is a DescriptionError.
 */
export function readDescription(kind: EntityKind, description: XmlElement): Map<string, string> {
  const settable = SETTABLE[kind];
  const sent = new Map<string, string>();
  for (const element of description.children) {
    if (!(element.name in settable) || element.children.length > 0) continue;
    const value = element.text.trim();
    if (value === '') continue;
    checkValue(element.name, value);
    sent.set(element.name, value);
  }
  return sent;
}

function checkValue(name: string, value: string): void {
  const refuse = (why: string): never => {
    throw new DescriptionError(`The value of ${name} ${why}.`);
  };
  if (BOOLEANS.has(name) && value !== 'true' && value !== 'false') refuse('is not true or false');
  if (INTEGERS.has(name) && !/^\d{1,9}$/.test(value)) refuse('is not a whole number');
  if (name === 'MaxDeliveryCount' && Number(value) < 1) refuse('must be at least 1');
  if (DURATIONS.has(name)) {
    const ms = durationMs(value, name);
    if (ms <= 0) refuse('must be a positive duration');
    if (name === 'LockDuration' && ms > 300_000) refuse('must be at most 5 minutes (PT5M)');
    if (name === 'DuplicateDetectionHistoryTimeWindow' && (ms < 20_000 || ms > 7 * 86_400_000))
      refuse('must be between 20 seconds and 7 days');
  }
  if (name === 'UserMetadata' && value.length > MAX_USER_METADATA)
    refuse(`is longer than ${MAX_USER_METADATA} characters`);
  if (name !== 'UserMetadata' && value.length > 260) refuse('is too long');
}

function durationMs(value: string, name: string): number {
  const seconds = isoDurationSeconds(value);
  if (seconds === undefined)
    throw new DescriptionError(`The value of ${name} is not an ISO-8601 duration (for example PT1M).`);
  return Math.min(seconds * 1000, NEVER_MS);
}

/**
 * Makes the model do what the sent properties say, for a queue (its topic and its one
 * subscription), a topic, or a subscription; a property not sent takes Service Bus's default.
 */
export function applyDescription(
  kind: EntityKind,
  sent: ReadonlyMap<string, string>,
  target: { topic?: Topic; subscription?: Subscription },
): void {
  const value = (name: string): string => sent.get(name) ?? SETTABLE[kind][name]!;
  const { topic, subscription } = target;
  if (topic) {
    topic.requiresDuplicateDetection = value('RequiresDuplicateDetection') === 'true';
    topic.duplicateWindowMs = durationMs(value('DuplicateDetectionHistoryTimeWindow'), 'window');
    topic.messageTimeToLiveMs = durationMs(value('DefaultMessageTimeToLive'), 'ttl');
  }
  if (subscription) {
    const lockDurationMs = durationMs(value('LockDuration'), 'lock');
    for (const entity of [subscription.entity, subscription.deadLetterQueue])
      entity.lockDurationMs = lockDurationMs;
    subscription.entity.maxDeliveryCount = Number(value('MaxDeliveryCount'));
    subscription.entity.deadLetteringOnMessageExpiration =
      value('DeadLetteringOnMessageExpiration') === 'true';
    if (kind === 'subscription')
      subscription.messageTimeToLiveMs = durationMs(value('DefaultMessageTimeToLive'), 'ttl');
  }
}

/** A queue's, topic's or subscription's description as Service Bus writes it, with its runtime counts. */
export function writeDescription(
  kind: EntityKind,
  target: { topic: Topic; subscription?: Subscription },
  record: EntityRecord,
): string {
  const { topic, subscription } = target;
  const honoured = modelValues(kind, topic, subscription);
  const property = (name: string): string => {
    const value = honoured.get(name) ?? record.sent.get(name) ?? SETTABLE[kind][name]!;
    return value === '' ? '' : element(name, value);
  };
  const times = [
    element('CreatedAt', record.createdAt.toISOString()),
    element('UpdatedAt', record.updatedAt.toISOString()),
    element('AccessedAt', record.updatedAt.toISOString()),
  ].join('');
  const counts = countsOf(topic, subscription);
  const countDetails =
    `<CountDetails xmlns:d2p1="${COUNT_DETAILS_NAMESPACE}">` +
    `<d2p1:ActiveMessageCount>${counts.active}</d2p1:ActiveMessageCount>` +
    `<d2p1:DeadLetterMessageCount>${counts.deadLetter}</d2p1:DeadLetterMessageCount>` +
    `<d2p1:ScheduledMessageCount>${counts.scheduled}</d2p1:ScheduledMessageCount>` +
    '<d2p1:TransferMessageCount>0</d2p1:TransferMessageCount>' +
    '<d2p1:TransferDeadLetterMessageCount>0</d2p1:TransferDeadLetterMessageCount>' +
    '</CountDetails>';
  const names = (list: string): string[] => list.split(' ');
  let body: string;
  switch (kind) {
    case 'queue':
      body =
        names(
          'LockDuration MaxSizeInMegabytes RequiresDuplicateDetection RequiresSession DefaultMessageTimeToLive ' +
            'DeadLetteringOnMessageExpiration DuplicateDetectionHistoryTimeWindow MaxDeliveryCount EnableBatchedOperations',
        )
          .map(property)
          .join('') +
        element('SizeInBytes', String(counts.sizeInBytes)) +
        element('MessageCount', String(counts.total)) +
        '<IsAnonymousAccessible>false</IsAnonymousAccessible><AuthorizationRules/>' +
        property('Status') +
        property('ForwardTo') +
        property('UserMetadata') +
        times +
        '<SupportOrdering>true</SupportOrdering>' +
        countDetails +
        names(
          'AutoDeleteOnIdle EnablePartitioning EntityAvailabilityStatus EnableExpress ForwardDeadLetteredMessagesTo MaxMessageSizeInKilobytes',
        )
          .map(property)
          .join('');
      break;
    case 'topic':
      body =
        names(
          'DefaultMessageTimeToLive MaxSizeInMegabytes RequiresDuplicateDetection DuplicateDetectionHistoryTimeWindow EnableBatchedOperations',
        )
          .map(property)
          .join('') +
        element('SizeInBytes', String(counts.sizeInBytes)) +
        '<FilteringMessagesBeforePublishing>false</FilteringMessagesBeforePublishing>' +
        '<IsAnonymousAccessible>false</IsAnonymousAccessible><AuthorizationRules/>' +
        property('Status') +
        property('UserMetadata') +
        times +
        property('SupportOrdering') +
        countDetails +
        element('SubscriptionCount', String(topic.subscriptions.length)) +
        names(
          'AutoDeleteOnIdle EnablePartitioning EntityAvailabilityStatus EnableExpress MaxMessageSizeInKilobytes',
        )
          .map(property)
          .join('');
      break;
    case 'subscription':
      body =
        names(
          'LockDuration RequiresSession DefaultMessageTimeToLive DeadLetteringOnMessageExpiration DeadLetteringOnFilterEvaluationExceptions',
        )
          .map(property)
          .join('') +
        element('MessageCount', String(counts.total)) +
        names('MaxDeliveryCount EnableBatchedOperations Status ForwardTo').map(property).join('') +
        times +
        countDetails +
        names('UserMetadata ForwardDeadLetteredMessagesTo AutoDeleteOnIdle EntityAvailabilityStatus')
          .map(property)
          .join('');
      break;
  }
  return (
    `<${DESCRIPTION_OF[kind]} xmlns="${SERVICEBUS_NAMESPACE}" xmlns:i="${INSTANCE_NAMESPACE}">` +
    body +
    `</${DESCRIPTION_OF[kind]}>`
  );
}

/** The honoured properties as the model has them (a declared entity was never sent any). */
function modelValues(
  kind: EntityKind,
  topic: Topic,
  subscription: Subscription | undefined,
): Map<string, string> {
  const values = new Map<string, string>();
  const duration = entityDuration;
  if (kind !== 'subscription') {
    values.set('RequiresDuplicateDetection', String(topic.requiresDuplicateDetection));
    values.set('DuplicateDetectionHistoryTimeWindow', duration(topic.duplicateWindowMs));
    values.set('DefaultMessageTimeToLive', duration(topic.messageTimeToLiveMs));
  }
  if (subscription) {
    values.set('LockDuration', duration(subscription.entity.lockDurationMs));
    values.set('MaxDeliveryCount', String(subscription.entity.maxDeliveryCount));
    values.set(
      'DeadLetteringOnMessageExpiration',
      String(subscription.entity.deadLetteringOnMessageExpiration),
    );
    values.set('RequiresSession', String(subscription.entity.sessions !== undefined));
    if (kind === 'subscription')
      values.set('DefaultMessageTimeToLive', duration(subscription.messageTimeToLiveMs));
  }
  return values;
}

interface Counts {
  active: number;
  deadLetter: number;
  scheduled: number;
  total: number;
  sizeInBytes: number;
}

function countsOf(topic: Topic, subscription: Subscription | undefined): Counts {
  const subscriptions = subscription ? [subscription] : topic.subscriptions;
  const held = subscriptions.flatMap((s) => s.entity.peek());
  const deadLettered = subscriptions.flatMap((s) => s.deadLetterQueue.peek());
  // A subscription's scheduled messages wait in its topic in the model: a queue's count are its own.
  const scheduled = subscription && subscription.name !== '' ? 0 : topic.scheduledCount;
  const active = subscription ? subscription.entity.activeCount : 0;
  return {
    active,
    deadLetter: subscription ? deadLettered.length : 0,
    scheduled,
    total: subscription ? held.length + deadLettered.length + scheduled : 0,
    sizeInBytes: [...held, ...deadLettered].reduce(
      (sum, message) =>
        sum + (typeof message.body === 'string' ? Buffer.byteLength(message.body) : message.body.length),
      0,
    ),
  };
}

function element(name: string, value: string): string {
  return `<${name}>${escapeXml(value)}</${name}>`;
}
