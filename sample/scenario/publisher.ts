import {
  type OutboxMessage,
  type OutboxPublisher,
  type RetryScheduler,
  traceProperties,
} from '@idempotent-consumers/inbox/internal';
import type { Broker, OutgoingMessage } from '@idempotent-consumers/local-azure';

/**
 * The outbox relay's publisher on the broker model: what `@azure/service-bus` does for the app in
 * Azure (packages/inbox/src/relay.ts serviceBusPublisher), a batch of messages sent to a topic, with the
 * faults a real send has. A failed send throws, as the SDK does, after having sent part of the
 * batch or none of it: Service Bus may have taken a message whose send the caller saw fail.
 */
export interface PublisherFaults {
  /** Chance that a send fails outright: nothing was taken (ServiceBusError, ServiceCommunicationProblem). */
  sendFailure?: number;
  /** Chance that a send takes the messages but its acknowledgement is lost: it throws after sending. */
  sendAckLost?: number;
}

export interface PublishRecord {
  topic: string;
  messageId: string;
  subject: string;
  /** False when the broker's duplicate detection dropped it. */
  accepted: boolean;
  /** The subscriptions it reached: 0 for a message no subscription takes (Service Bus discards it). */
  reached: number;
  /** Model time (epoch ms) of the send. */
  at: number;
  /** The trace context it was sent with (`traceparent` and `Diagnostic-Id`), if any. */
  traceparent?: string;
}

export class BrokerPublisher implements OutboxPublisher {
  /** Every message the broker was handed, in order, with whether duplicate detection dropped it. */
  readonly sends: PublishRecord[] = [];
  /** Sends that threw. */
  failures = 0;
  /** When set, every send fails (a Service Bus outage) until it is cleared. */
  outage = false;
  /**
   * Topics that refuse every send until they are taken out (a topic deleted, the app's Data Sender
   * role on it missing): the SDK's ServiceBusError UnauthorizedAccess, which it does not retry.
   */
  readonly refusing = new Set<string>();
  /** Sends a refusing topic refused. */
  refusals = 0;

  constructor(
    private readonly broker: Broker,
    private readonly faults: PublisherFaults = {},
    private readonly random: () => number = Math.random,
    private readonly now: () => number = Date.now,
  ) {}

  send(topic: string, messages: readonly OutboxMessage[]): Promise<readonly string[]> {
    if (this.refusing.has(topic)) {
      this.refusals++;
      return Promise.reject(
        Object.assign(
          new Error(
            `Unauthorized access. 'Send' claim(s) are required to perform this operation on '${topic}'.`,
          ),
          {
            name: 'ServiceBusError',
            code: 'UnauthorizedAccess',
            retryable: false,
          },
        ),
      );
    }
    if (this.outage || this.roll(this.faults.sendFailure)) {
      this.failures++;
      return Promise.reject(
        new Error('ServiceBusError (ServiceCommunicationProblem): the send did not reach Service Bus.'),
      );
    }
    const target = this.broker.topic(topic);
    for (const message of messages) {
      const result = target.send(brokerMessageOf(message));
      this.sends.push({
        topic,
        messageId: message.messageId,
        subject: message.subject,
        accepted: result.accepted,
        reached: result.deliveredTo.length,
        at: this.now(),
        ...(message.trace === undefined ? {} : { traceparent: message.trace.traceparent }),
      });
    }
    if (this.roll(this.faults.sendAckLost)) {
      this.failures++;
      return Promise.reject(
        new Error('ServiceBusError (ServiceTimeout): the send timed out; Service Bus may have taken it.'),
      );
    }
    return Promise.resolve([]);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private roll(rate: number | undefined): boolean {
    return (rate ?? 0) > 0 && this.random() < (rate ?? 0);
  }
}

/**
 * An outbox message as the broker takes it, as serviceBusPublisher (src/serviceBusPublisher.ts, with
 * the library's serviceBusMessageOf) sends it: the body as JSON text, the trace context stamped as properties
 * (the extension continues Diagnostic-Id).
 */
export function brokerMessageOf(message: OutboxMessage): OutgoingMessage {
  const applicationProperties = { ...message.applicationProperties, ...traceProperties(message.trace) };
  return {
    messageId: message.messageId,
    subject: message.subject,
    body: JSON.stringify(message.body),
    contentType: message.contentType,
    ...(message.correlationId === undefined ? {} : { correlationId: message.correlationId }),
    ...(Object.keys(applicationProperties).length === 0 ? {} : { applicationProperties }),
  };
}

/** A delayed copy scheduled on the broker model (BrokerRetryScheduler). */
export interface ScheduleRecord {
  topic: string;
  messageId: string;
  /** False when the topic's duplicate detection dropped it (the same copy scheduled again). */
  accepted: boolean;
  /** Model time (epoch ms) of the send, and when the copy is enqueued. */
  at: number;
  enqueueAt: number;
}

/**
 * The app's retry scheduler (packages/inbox/src/delayedRetry.ts RetryScheduler) on the broker model: what
 * serviceBusPublisher's `schedule` does in Azure, a send with ScheduledEnqueueTimeUtc, the message
 * converted as the outbox's are (brokerMessageOf). Without faults: a schedule that fails is given
 * back by the handler as any failed delivery (test/functions/delayedRetry.test.ts covers it).
 */
export class BrokerRetryScheduler implements RetryScheduler {
  /** Every copy the broker was handed, in order. */
  readonly scheduled: ScheduleRecord[] = [];

  constructor(
    private readonly broker: Broker,
    private readonly now: () => number = Date.now,
  ) {}

  schedule(topic: string, message: OutboxMessage, enqueueAt: Date): Promise<void> {
    const result = this.broker
      .topic(topic)
      .send({ ...brokerMessageOf(message), scheduledEnqueueTime: enqueueAt.getTime() });
    this.scheduled.push({
      topic,
      messageId: message.messageId,
      accepted: result.accepted,
      at: this.now(),
      enqueueAt: enqueueAt.getTime(),
    });
    return Promise.resolve();
  }
}
