import { DefaultAzureCredential } from '@azure/identity';
import { ServiceBusClient, type ServiceBusSender } from '@azure/service-bus';
import {
  type OutboxPublisher,
  type RetryScheduler,
  serviceBusMessageOf,
  type Settings,
  SettingsError,
} from '@idempotent-consumers/inbox/internal';

/**
 * The outbox relay's publisher on `@azure/service-bus`: one client per process and one sender per
 * topic. The SDK (AMQP) is the second heaviest dependency after the OpenTelemetry SDK, so like
 * ./azureMonitor.ts this module is a file of its own in the deployment package, loaded by
 * src/app.ts at the first send, off the app's start-up path. In Azure
 * it signs in as the app's user-assigned identity (AZURE_CLIENT_ID), which holds Azure Service Bus
 * Data Sender on the topics the relay publishes to and those a delayedRetry subscription schedules
 * its copies on (packages/inbox/src/delayedRetry.ts), nothing broader. Locally, a connection string
 * to the emulator or the local peer (UseDevelopmentEmulator=true), never a key to a namespace.
 */
export function serviceBusPublisher(
  settings: Pick<Settings, 'serviceBus' | 'cosmos'>,
): OutboxPublisher & RetryScheduler {
  let client: ServiceBusClient | undefined;
  const senders = new Map<string, ServiceBusSender>();
  const connect = (): ServiceBusClient => {
    if (client) return client;
    const { fullyQualifiedNamespace, connectionString } = settings.serviceBus;
    if (connectionString !== undefined) client = new ServiceBusClient(connectionString);
    else if (fullyQualifiedNamespace !== undefined) {
      const { clientId } = settings.cosmos;
      client = new ServiceBusClient(
        fullyQualifiedNamespace,
        new DefaultAzureCredential(clientId === undefined ? {} : { managedIdentityClientId: clientId }),
      );
    } else {
      throw new SettingsError([
        'ServiceBusConnection__fullyQualifiedNamespace is not set: the outbox relay sends with it (<namespace>.servicebus.windows.net).',
      ]);
    }
    return client;
  };
  const senderOf = (topic: string): ServiceBusSender => {
    let sender = senders.get(topic);
    if (!sender) {
      sender = connect().createSender(topic);
      senders.set(topic, sender);
    }
    return sender;
  };
  return {
    async send(topic, messages) {
      const sender = senderOf(topic);
      const tooLarge: string[] = [];
      let batch = await sender.createMessageBatch();
      for (const message of messages) {
        const outgoing = serviceBusMessageOf(message);
        if (batch.tryAddMessage(outgoing)) continue;
        if (batch.count > 0) {
          await sender.sendMessages(batch);
          batch = await sender.createMessageBatch();
          if (batch.tryAddMessage(outgoing)) continue;
        }
        // Alone in an empty batch and still too large: it never fits, and retrying cannot change that.
        tooLarge.push(message.messageId);
      }
      if (batch.count > 0) await sender.sendMessages(batch);
      return tooLarge;
    },
    /**
     * A delayed retry's copy: sent now with its ScheduledEnqueueTimeUtc, so the topic's duplicate
     * detection sees its MessageId now and the subscriptions receive it at `enqueueAt`.
     */
    async schedule(topic, message, enqueueAt) {
      await senderOf(topic).sendMessages({
        ...serviceBusMessageOf(message),
        scheduledEnqueueTimeUtc: enqueueAt,
      });
    },
    async close() {
      await Promise.all([...senders.values()].map((sender) => sender.close()));
      senders.clear();
      await client?.close();
      client = undefined;
    },
  };
}
