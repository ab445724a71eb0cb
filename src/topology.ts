import declaration from './topology.json';

/**
 * The topics and subscriptions, declared once in topology.json and read by the function
 * registrations, the tests, the offline Service Bus model and the Bicep (loadJsonContent).
 */
export interface SubscriptionDeclaration {
  /** Service Bus subscription name. */
  name: string;
  /** The consumer that reads it; also its marker namespace. */
  consumer: string;
  /** Subjects (the message Label) the subscription's correlation filter lets through. */
  subjects: string[];
}

export interface TopicDeclaration {
  name: string;
  subscriptions: SubscriptionDeclaration[];
}

export interface Topology {
  topics: TopicDeclaration[];
}

export interface ConsumerBinding {
  topic: string;
  subscription: string;
  subjects: readonly string[];
}

export const topology: Topology = validateTopology(declaration);

/** Where a consumer reads from; throws when topology.json does not declare it. */
export function bindingOf(consumer: string, source: Topology = topology): ConsumerBinding {
  for (const topic of source.topics) {
    const subscription = topic.subscriptions.find((s) => s.consumer === consumer);
    if (subscription)
      return { topic: topic.name, subscription: subscription.name, subjects: subscription.subjects };
  }
  throw new Error(
    `Consumer '${consumer}' is not declared in src/topology.json; add a subscription for it there.`,
  );
}

export function validateTopology(value: unknown): Topology {
  const problems: string[] = [];
  const topics = (value as Partial<Topology> | undefined)?.topics;
  if (!Array.isArray(topics) || topics.length === 0)
    throw new Error('src/topology.json must declare at least one topic.');
  const consumers = new Set<string>();
  const entityName = /^[A-Za-z0-9][A-Za-z0-9._-]{0,49}$/;
  for (const topic of topics) {
    if (!entityName.test(topic.name))
      problems.push(`topic name '${topic.name}' is not a valid Service Bus name`);
    const names = new Set<string>();
    for (const subscription of topic.subscriptions ?? []) {
      if (!entityName.test(subscription.name))
        problems.push(`subscription '${subscription.name}' is not a valid Service Bus name`);
      if (names.has(subscription.name))
        problems.push(`subscription '${subscription.name}' is declared twice on '${topic.name}'`);
      if (consumers.has(subscription.consumer))
        problems.push(`consumer '${subscription.consumer}' is declared twice`);
      if (!Array.isArray(subscription.subjects) || subscription.subjects.length === 0) {
        problems.push(`subscription '${subscription.name}' needs at least one subject to filter on`);
      }
      names.add(subscription.name);
      consumers.add(subscription.consumer);
    }
  }
  if (problems.length > 0) throw new Error(`src/topology.json is invalid:\n  - ${problems.join('\n  - ')}`);
  return value as Topology;
}
