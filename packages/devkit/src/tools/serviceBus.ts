import { DefaultAzureCredential } from '@azure/identity';
import { ServiceBusClient, type ServiceBusMessage } from '@azure/service-bus';
import { EMULATOR_FLAG, type Topology } from '@idempotent-consumers/inbox/internal';

import { bounded, EnvironmentError, UsageError } from '../cli/errors';
import { appTopology } from '../cli/project';
import type { OutgoingEvent } from './events';

/**
 * How the tools reach Service Bus. A real namespace only through identity: SERVICEBUS_NAMESPACE and
 * DefaultAzureCredential (azd auth login, az login, a managed identity, AZURE_CLIENT_ID...). The Bicep disables
 * local (SAS) auth, so a real namespace has no key to put in a connection string, and a key that
 * exists anyway should not sit in a shell history. A connection string is accepted only for the
 * Service Bus emulator or the local AMQP peer, recognised by UseDevelopmentEmulator=true.
 */
export const ENVIRONMENT = {
  namespace: 'SERVICEBUS_NAMESPACE',
  connectionString: 'SERVICEBUS_CONNECTION_STRING',
} as const;

export interface ServiceBusTarget {
  client: ServiceBusClient;
  /** For the operator: where the messages go, and how the tool signs in. */
  description: string;
}

export function connectServiceBus(env: Readonly<Record<string, string | undefined>>): ServiceBusTarget {
  const namespace = env[ENVIRONMENT.namespace]?.trim();
  const connectionString = env[ENVIRONMENT.connectionString]?.trim();
  if (namespace && connectionString) {
    throw new EnvironmentError(
      `Set ${ENVIRONMENT.namespace} (a namespace, with identity) or ${ENVIRONMENT.connectionString} (the emulator or local peer), not both.`,
    );
  }
  if (connectionString) {
    if (!EMULATOR_FLAG.test(connectionString)) {
      throw new EnvironmentError(
        `${ENVIRONMENT.connectionString} is only for the Service Bus emulator or the local peer, and must contain ` +
          `UseDevelopmentEmulator=true. For a namespace in Azure set ${ENVIRONMENT.namespace}=<name>.servicebus.windows.net ` +
          'and sign in (azd auth login or az login, or a managed identity): the namespace has local (SAS key) auth disabled, and keys do not belong in a shell.',
      );
    }
    const endpoint = /Endpoint\s*=\s*([^;]+)/i.exec(connectionString)?.[1] ?? 'the emulator';
    return {
      client: new ServiceBusClient(connectionString),
      description: `${endpoint} (development emulator)`,
    };
  }
  if (namespace) {
    const host = fullyQualified(namespace);
    return {
      client: new ServiceBusClient(host, new DefaultAzureCredential()),
      description: `${host} (signed in with DefaultAzureCredential)`,
    };
  }
  throw new EnvironmentError(
    `Set ${ENVIRONMENT.namespace}=<name>.servicebus.windows.net (and sign in: azd auth login or az login), or, for the emulator or the local peer, ` +
      `${ENVIRONMENT.connectionString}="Endpoint=sb://localhost;...;UseDevelopmentEmulator=true;"; or run npm start ` +
      'in another terminal: the tools find its local Service Bus without either.',
  );
}

/** `contoso`, `contoso.servicebus.windows.net` and `sb://contoso.servicebus.windows.net/` all name one namespace. */
export function fullyQualified(namespace: string): string {
  const host = namespace.replace(/^[a-z]+:\/\//i, '').replace(/\/+$/, '');
  return host.includes('.') ? host : `${host}.servicebus.windows.net`;
}

/**
 * The topic that carries a subject in `declared` (src/topology.json, or the running npm start's),
 * unless the operator names one.
 */
export function topicFor(subject: string, override?: string, declared: Topology = appTopology()): string {
  if (override) return override;
  const topic = declared.topics.find((t) => t.subscriptions.some((s) => s.subjects.includes(subject)));
  if (!topic) {
    throw new UsageError(
      `No subscription in src/topology.json filters on the subject '${subject}'; pass --topic to send it anyway.`,
    );
  }
  return topic.name;
}

/** The topic a subscription belongs to (src/topology.json), unless the operator names one. */
export function topicOfSubscription(subscription: string, override?: string): string {
  if (override) return override;
  const topology = appTopology();
  const topic = topology.topics.find((t) => t.subscriptions.some((s) => s.name === subscription));
  if (!topic) {
    const known = topology.topics.flatMap((t) => t.subscriptions.map((s) => s.name));
    throw new UsageError(
      `'${bounded(subscription)}' is not a subscription in src/topology.json (${known.join(', ')}); pass --topic for another one.`,
    );
  }
  return topic.name;
}

/**
 * The Subjects that some subscription of the topic takes (src/topology.json, which the Bicep deploys
 * as the subscriptions' correlation filters). A message with any other Subject is accepted by the
 * topic, copied to no subscription, and gone.
 */
export function routedSubjects(topic: string, source: Topology = appTopology()): ReadonlySet<string> {
  const declared = source.topics.find((t) => t.name === topic);
  return new Set(declared?.subscriptions.flatMap((s) => s.subjects) ?? []);
}

/**
 * Whether the subscription's filter takes its own delayed-retry copies (Subject inbox.retry with
 * inboxRetryFor its name): it declares `delayedRetry` in src/topology.json, whose filter the Bicep
 * deploys (packages/inbox/src/delayedRetry.ts).
 */
export function takesRetryCopies(
  topic: string,
  subscription: string,
  source: Topology = appTopology(),
): boolean {
  const declared = source.topics.find((t) => t.name === topic);
  return (
    declared?.subscriptions.some((s) => s.name === subscription && s.delayedRetry !== undefined) ?? false
  );
}

/**
 * An event as a Service Bus message: JSON body (a raw body's bytes as they are: the SDK sends a Buffer
 * unchanged), Subject for the filters, a stable MessageId.
 */
export function toServiceBusMessage(
  event: Pick<OutgoingEvent, 'subject' | 'body' | 'messageId'>,
): ServiceBusMessage {
  return {
    body: event.body,
    messageId: event.messageId,
    subject: event.subject,
    contentType: 'application/json',
  };
}
