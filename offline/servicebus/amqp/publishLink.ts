import type { Delivery, EventContext, Receiver } from 'rhea';

import type { Topic } from '../broker';
import { asPeerError } from './errors';
import { decodeTransfer, toOutgoingMessage } from './messageCodec';

/**
 * A sender's link to a topic, seen from the peer (an AMQP receiver). Every transfer is one message
 * or a batch; each message goes through the topic, so duplicate detection and Subject filters are
 * the broker model's. A message dropped as a duplicate is still accepted, as Service Bus does.
 */
export function servePublishLink(receiver: Receiver, topic: Topic): void {
  receiver.on('message', (context: EventContext) => {
    const delivery = context.delivery as Delivery;
    try {
      const { format } = context as { format?: number };
      const messages =
        format === undefined || format === 0
          ? [toOutgoingMessage(context.message as unknown as Record<string, unknown>)]
          : decodeTransfer(context.message as unknown as Buffer, format);
      for (const message of messages) topic.send(message);
      delivery.accept();
    } catch (error) {
      delivery.reject(asPeerError(error).toAmqp());
    }
  });
}
