import { type Delivery, type EventContext, message as amqpMessage, type Receiver } from 'rhea';

import type { Topic } from '../broker';
import { asPeerError, CONDITIONS, PeerError } from './errors';
import { decodeTransfer, toReceivedMessage } from './messageCodec';

/**
 * Service Bus Standard's limit on one transfer (a message, or a batch); the peer announces it as the
 * link's max-message-size, by which the SDK sizes its batches.
 */
export const MAX_MESSAGE_SIZE_BYTES = 256 * 1024;

/**
 * A sender's link to a topic, seen from the peer (an AMQP receiver). Every transfer is one message
 * or a batch; each message goes through the topic, so duplicate detection and Subject filters are
 * the broker model's. A message dropped as a duplicate is still accepted, as Service Bus does; a
 * transfer over the limit is refused with amqp:link:message-size-exceeded, as Service Bus does.
 */
export function servePublishLink(receiver: Receiver, topic: Topic): void {
  receiver.on('message', (context: EventContext) => {
    const delivery = context.delivery as Delivery;
    try {
      const { format } = context as { format?: number };
      const single = format === undefined || format === 0;
      // rhea hands a single message over decoded: its size is that of its encoding again.
      const size = single
        ? amqpMessage.encode(context.message!).length
        : (context.message as unknown as Buffer).length;
      if (size > MAX_MESSAGE_SIZE_BYTES)
        throw new PeerError(
          CONDITIONS.messageSizeExceeded,
          `The message is ${size} bytes; the limit is ${MAX_MESSAGE_SIZE_BYTES} (Service Bus Standard).`,
        );
      const messages = single
        ? [toReceivedMessage(context.message as unknown as Record<string, unknown>)]
        : decodeTransfer(context.message as unknown as Buffer, format);
      for (const message of messages) topic.send(message);
      delivery.accept();
    } catch (error) {
      delivery.reject(asPeerError(error).toAmqp());
    }
  });
}
