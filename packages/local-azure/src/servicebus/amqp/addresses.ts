import type { Broker, Entity, Subscription } from '../broker';
import { CONDITIONS, PeerError } from './errors';

/**
 * The nodes a Service Bus client attaches links to, as @azure/service-bus names them:
 *   <topic>                                         send
 *   <queue>                                         send and receive
 *   <queue>/$DeadLetterQueue                        receive from the queue's dead-letter sub-queue
 *   <topic>/Subscriptions/<sub>                     receive (peek-lock)
 *   <topic>/Subscriptions/<sub>/$DeadLetterQueue    receive from the dead-letter sub-queue
 *   <any of the above>/$management                  request/response: peek, renew-lock, ...
 *   $cbs                                            request/response: put-token
 * Service Bus entity names are case-insensitive, and so is this parsing.
 */
export type NodeAddress =
  | { kind: 'cbs' }
  /** A bare name: a topic, or a queue (which one is the broker's to say: findQueue). */
  | { kind: 'topic'; topic: string }
  /** An entity messages are received from: a subscription, or with `subscription` '' a queue. */
  | { kind: 'queue'; topic: string; subscription: string; deadLetter: boolean }
  | { kind: 'management'; of: Exclude<NodeAddress, { kind: 'cbs' } | { kind: 'management' }> };

export function parseAddress(raw: unknown): NodeAddress {
  if (typeof raw !== 'string' || raw.trim() === '')
    throw new PeerError(CONDITIONS.invalidField, 'The link has no node address.');
  // Some clients send the full URL (amqp://host/path); the path is what names the node.
  const path = raw.replace(/^[a-z]+:\/\/[^/]+/i, '').replace(/^\/+/, '');
  const parts = path.split('/');
  if (parts.length === 1 && parts[0]?.toLowerCase() === '$cbs') return { kind: 'cbs' };
  if (parts.at(-1)?.toLowerCase() === '$management') {
    const of = parseAddress(parts.slice(0, -1).join('/'));
    if (of.kind === 'cbs' || of.kind === 'management') throw notFound(raw);
    return { kind: 'management', of };
  }
  const [topic, subscriptions, subscription, subQueue, ...rest] = parts;
  if (!topic || rest.length > 0) throw notFound(raw);
  if (subscriptions === undefined) return { kind: 'topic', topic };
  if (subscriptions.toLowerCase() === '$deadletterqueue' && subscription === undefined)
    return { kind: 'queue', topic, subscription: '', deadLetter: true };
  if (subscriptions.toLowerCase() !== 'subscriptions' || !subscription) throw notFound(raw);
  if (subQueue === undefined) return { kind: 'queue', topic, subscription, deadLetter: false };
  if (subQueue.toLowerCase() === '$deadletterqueue')
    return { kind: 'queue', topic, subscription, deadLetter: true };
  throw notFound(raw);
}

/** The queue of that name (case-insensitive), if the peer serves one. */
export function findQueue(broker: Broker, name: string): ReturnType<Broker['topic']> | undefined {
  for (const [declared, queue] of broker.queues) {
    if (declared.toLowerCase() === name.toLowerCase()) return queue;
  }
  return undefined;
}

/** What a send goes to: a topic, or a queue (a topic whose one subscription takes everything). */
export function findTopic(broker: Broker, name: string): ReturnType<Broker['topic']> {
  for (const [declared, topic] of broker.topics) {
    if (declared.toLowerCase() === name.toLowerCase()) return topic;
  }
  const queue = findQueue(broker, name);
  if (queue) return queue;
  throw new PeerError(
    CONDITIONS.notFound,
    `The messaging entity '${name}' could not be found (the local peer serves the topics in src/topology.json).`,
  );
}

/** The queue-like entity a receive or $management link works on. */
export function findEntity(broker: Broker, address: Extract<NodeAddress, { kind: 'queue' }>): Entity {
  const subscription = findSubscription(broker, address);
  return address.deadLetter ? subscription.deadLetterQueue : subscription.entity;
}

/** The subscription (or a queue's one subscription) an address names, dead-letter queue or not. */
export function findSubscription(
  broker: Broker,
  address: Extract<NodeAddress, { kind: 'queue' }>,
): Subscription {
  if (address.subscription === '') {
    const queue = findQueue(broker, address.topic)?.subscriptions[0];
    if (!queue)
      throw new PeerError(CONDITIONS.notFound, `The messaging entity '${address.topic}' could not be found.`);
    return queue;
  }
  const topic = findTopic(broker, address.topic);
  const subscription = topic.subscriptions.find(
    (candidate) => candidate.name.toLowerCase() === address.subscription.toLowerCase(),
  );
  if (!subscription)
    throw new PeerError(
      CONDITIONS.notFound,
      `The messaging entity '${address.topic}/Subscriptions/${address.subscription}' could not be found.`,
    );
  return subscription;
}

function notFound(raw: string): PeerError {
  return new PeerError(CONDITIONS.notFound, `The local peer has no node '${raw}'.`);
}
