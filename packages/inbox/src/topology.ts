import { type DelayedRetryPolicy, delayedRetryProblems, RETRY_SUBJECT } from './delayedRetry';

/**
 * The schema of an app's topology: the topics, their subscriptions and publishers, which the app
 * declares once in its src/topology.json (loaded by the app's src/topology.ts, read at run time by
 * the dev kit, and by the Bicep with loadJsonContent), and the checks a declaration must pass.
 *
 * One consumer, one name: `area.consumer-name` (for example `billing.payment-applier`) is the
 * consumer's id (its marker namespace and telemetry dimension) and the name of the Service Bus
 * subscription it reads. Azure Functions names cannot hold a dot, so its function is
 * `functionNameOf(name)` (`billing-payment-applier`), registered by `functions/<function name>.ts`.
 */
export interface SubscriptionDeclaration {
  /** The consumer's name, which is also the Service Bus subscription's name. */
  name: string;
  /** Subjects (the message Label) the subscription's correlation filter lets through. */
  subjects: string[];
  /**
   * Opt-in: after `afterDeliveries` failed deliveries, schedule a copy of the message on the topic
   * for later instead of burning the rest of its deliveries (packages/inbox/src/delayedRetry.ts). The Bicep
   * then lets the subscription's filter take its own copies, and grants the app Data Sender on
   * the topic to schedule them.
   */
  delayedRetry?: DelayedRetryPolicy;
}

export interface TopicDeclaration {
  name: string;
  /**
   * The consumers that publish on the topic through their outbox (`tx.publish`), each a consumer
   * declared here; a consumer not listed may not publish on it.
   */
  publishers?: string[];
  /**
   * Subjects published on the topic that no subscription declared here takes, on purpose (another
   * app subscribes to them, or no one needs them yet). Service Bus discards a message no
   * subscription takes, so `tx.publish` refuses any other subject that no subscription takes: a
   * typo would otherwise lose every such event without a word.
   */
  unsubscribedSubjects?: string[];
  subscriptions: SubscriptionDeclaration[];
}

export interface Topology {
  topics: TopicDeclaration[];
}

export interface ConsumerBinding {
  topic: string;
  subscription: string;
  subjects: readonly string[];
  delayedRetry?: DelayedRetryPolicy;
}

/**
 * A consumer's name: lowercase words joined by '-', at least two of them dotted (`area.consumer`),
 * at most 50 characters (the Service Bus limit of a subscription name). It is also part of every
 * inbox marker's id, and these characters are all valid in a Cosmos DB id.
 */
export const CONSUMER_NAME =
  /^(?=.{3,50}$)[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:\.[a-z][a-z0-9]*(?:-[a-z0-9]+)*)+$/;

/**
 * Topic and subscription names as Service Bus (and its emulator) accept them: letters, digits, '.',
 * '-' and '_', starting and ending with a letter or a digit, at most 50 characters (a topic may be
 * longer in Azure; the template keeps both to the subscription limit).
 */
export const ENTITY_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,48}[A-Za-z0-9])?$/;

/** A Subject (Label) the filters match: a letter, then letters, digits, '.', '-' or '_'; at most 100. */
export const SUBJECT_NAME = /^[A-Za-z][A-Za-z0-9._-]{0,99}$/;

/**
 * The Azure Functions function name of a consumer (`billing.payment-applier` →
 * `billing-payment-applier`): function names allow letters, digits, '_' and '-' only.
 */
export function functionNameOf(consumer: string): string {
  return consumer.replaceAll('.', '-');
}

/** Where a consumer reads from; throws when topology.json does not declare it. */
export function bindingOf(consumer: string, source: Topology): ConsumerBinding {
  for (const topic of source.topics) {
    const subscription = topic.subscriptions.find((s) => s.name === consumer);
    if (subscription)
      return {
        topic: topic.name,
        subscription: subscription.name,
        subjects: subscription.subjects,
        ...(subscription.delayedRetry === undefined ? {} : { delayedRetry: subscription.delayedRetry }),
      };
  }
  throw new Error(
    `Consumer '${consumer}' is not declared in src/topology.json; add a subscription named '${consumer}' there (npm run new:consumer does).`,
  );
}

/** The consumers declared to publish on `topic`; none for a topic that is not declared. */
export function publishersOf(topic: string, source: Topology): readonly string[] {
  return source.topics.find((t) => t.name === topic)?.publishers ?? [];
}

/** The topics `consumer` is declared to publish on, in declaration order. */
export function topicsPublishedBy(consumer: string, source: Topology): string[] {
  return source.topics.filter((t) => t.publishers?.includes(consumer) === true).map((t) => t.name);
}

/**
 * Where `consumer` may publish through its outbox: each topic it is a publisher of, with the
 * subjects that reach someone there (a subscription takes them, or they are declared unsubscribed).
 */
export function outboxRoutesOf(consumer: string, source: Topology): ReadonlyMap<string, ReadonlySet<string>> {
  return new Map(
    source.topics
      .filter((t) => t.publishers?.includes(consumer) === true)
      .map((t) => [
        t.name,
        new Set([...t.subscriptions.flatMap((s) => s.subjects), ...(t.unsubscribedSubjects ?? [])]),
      ]),
  );
}

/**
 * Checks a declaration: names Service Bus accepts, each consumer (and so each function) once,
 * subjects to filter on, publishers that are declared consumers, each listed once per topic, and
 * unsubscribed subjects that no subscription of their topic takes.
 */
export function validateTopology(value: unknown): Topology {
  const problems: string[] = [];
  const topics = (value as Partial<Topology> | undefined)?.topics;
  if (!Array.isArray(topics)) throw new Error('src/topology.json must have a "topics" array.');
  const functions = new Map<string, string>();
  for (const topic of topics) {
    if (!ENTITY_NAME.test(topic.name))
      problems.push(`topic name '${topic.name}' is not a valid Service Bus name`);
    for (const subscription of topic.subscriptions ?? []) {
      if (!ENTITY_NAME.test(subscription.name))
        problems.push(`subscription '${subscription.name}' is not a valid Service Bus name`);
      const functionName = functionNameOf(subscription.name);
      const first = functions.get(functionName);
      if (first !== undefined)
        problems.push(
          first === subscription.name
            ? `consumer '${subscription.name}' is declared twice`
            : `consumers '${first}' and '${subscription.name}' would both be the function '${functionName}'`,
        );
      functions.set(functionName, subscription.name);
      if (!Array.isArray(subscription.subjects) || subscription.subjects.length === 0) {
        problems.push(`subscription '${subscription.name}' needs at least one subject to filter on`);
      } else if (subscription.subjects.includes(RETRY_SUBJECT)) {
        problems.push(
          `subscription '${subscription.name}': the subject '${RETRY_SUBJECT}' is the delayed retries' own (packages/inbox/src/delayedRetry.ts)`,
        );
      }
      if (subscription.delayedRetry !== undefined)
        problems.push(...delayedRetryProblems(subscription.name, subscription.delayedRetry));
    }
  }
  // A publisher may read any topic (or none of them): checked once every consumer is known.
  const consumers = new Set(topics.flatMap((topic) => (topic.subscriptions ?? []).map((s) => s.name)));
  for (const topic of topics) {
    if (topic.publishers === undefined) continue;
    if (!Array.isArray(topic.publishers)) {
      problems.push(`topic '${topic.name}': "publishers" must be an array of consumer names`);
      continue;
    }
    const seen = new Set<string>();
    for (const publisher of topic.publishers as unknown[]) {
      const shown = String(JSON.stringify(publisher)).slice(0, 62);
      if (typeof publisher !== 'string' || !consumers.has(publisher))
        problems.push(`topic '${topic.name}': publisher ${shown} is not a consumer declared here`);
      else if (seen.has(publisher))
        problems.push(`topic '${topic.name}': publisher '${publisher}' is listed twice`);
      else seen.add(publisher);
    }
  }
  for (const topic of topics) problems.push(...unsubscribedSubjectProblems(topic));
  if (problems.length > 0) throw new Error(`src/topology.json is invalid:\n  - ${problems.join('\n  - ')}`);
  return value as Topology;
}

function unsubscribedSubjectProblems(topic: TopicDeclaration): string[] {
  const declared = topic.unsubscribedSubjects as unknown;
  if (declared === undefined) return [];
  if (!Array.isArray(declared))
    return [`topic '${topic.name}': "unsubscribedSubjects" must be an array of subjects`];
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const subject of declared as unknown[]) {
    const shown = String(JSON.stringify(subject)).slice(0, 102);
    const taker = (topic.subscriptions ?? []).find((s) => s.subjects?.includes(subject as string));
    if (typeof subject !== 'string' || !SUBJECT_NAME.test(subject) || subject === RETRY_SUBJECT)
      problems.push(`topic '${topic.name}': unsubscribed subject ${shown} is not a subject name`);
    else if (seen.has(subject))
      problems.push(`topic '${topic.name}': unsubscribed subject '${subject}' is listed twice`);
    else if (taker)
      problems.push(
        `topic '${topic.name}': subject '${subject}' is declared unsubscribed, but the subscription '${taker.name}' takes it`,
      );
    seen.add(String(subject));
  }
  return problems;
}
