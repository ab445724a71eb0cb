import {
  OUTBOX_SENT_BY_PROPERTY,
  type OutboxMessage,
  type OutboxPublisher,
  serviceBusMessageOf,
} from '@idempotent-consumers/inbox/internal';
import type { Broker } from '@idempotent-consumers/local-azure';

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
  /** Who sent it: the relay or the sweeper (the property the relay stamps, OUTBOX_SENT_BY_PROPERTY). */
  sentBy: string | undefined;
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
      const result = target.send(serviceBusMessageOf(message));
      this.sends.push({
        topic,
        messageId: message.messageId,
        subject: message.subject,
        accepted: result.accepted,
        reached: result.deliveredTo.length,
        at: this.now(),
        sentBy: stringOr(message.applicationProperties?.[OUTBOX_SENT_BY_PROPERTY]),
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

const stringOr = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
