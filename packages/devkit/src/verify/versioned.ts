import type { Delivery, VersionedConsumer } from '@idempotent-consumers/inbox';

import type { VerifyMessage } from './run';

/**
 * What verify needs of a versioned consumer (defineVersionedConsumer): its messages carry absolute
 * state and a version, written only over an older one, so their final effect does not depend on
 * the order they commit in: the oracle applies them in the order of their versions. That holds
 * when a version names one state; two messages that project the same document at the same version
 * with different bodies would leave whichever committed first, so verify's messages never do.
 */

/** The document and version a message projects, or undefined when its schema refuses it or `project` throws. */
export function projectionOf(
  consumer: VersionedConsumer<unknown>,
  message: VerifyMessage,
): { key: string; version: number } | undefined {
  const parsed = consumer.schema.safeParse(message.body);
  if (!parsed.success) return undefined;
  const delivery: Delivery = {
    body: message.body,
    messageId: undefined,
    messageIdIsLossy: false,
    deliveryCount: 1,
    enqueuedTimeUtc: undefined,
    subject: message.subject,
    correlationId: undefined,
    applicationProperties: {},
  };
  try {
    const document = consumer.project(parsed.data, delivery);
    return { key: JSON.stringify([document.partitionKey, document.id]), version: document.version };
  } catch {
    return undefined;
  }
}

/** The messages with one state per document and version: a later message with the same pair as an earlier one takes its body. */
export function oneStatePerVersion(
  consumer: VersionedConsumer<unknown>,
  messages: readonly VerifyMessage[],
): VerifyMessage[] {
  const first = new Map<string, VerifyMessage>();
  return messages.map((message) => {
    const projection = projectionOf(consumer, message);
    if (projection === undefined) return message;
    const pair = `${projection.key}@${projection.version}`;
    const earlier = first.get(pair);
    if (earlier !== undefined) return earlier;
    first.set(pair, message);
    return message;
  });
}

/** The messages in the order of their versions (stable), those it cannot project last. */
export function inVersionOrder<T>(
  consumer: VersionedConsumer<unknown>,
  messages: readonly (readonly [T, VerifyMessage])[],
): (readonly [T, VerifyMessage])[] {
  const version = (message: VerifyMessage): number =>
    projectionOf(consumer, message)?.version ?? Number.POSITIVE_INFINITY;
  return messages
    .map((entry, index) => ({ entry, index, version: version(entry[1]) }))
    .sort((a, b) => a.version - b.version || a.index - b.index)
    .map(({ entry }) => entry);
}
