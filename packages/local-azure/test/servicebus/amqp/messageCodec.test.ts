import { PeerError } from '../../../src/servicebus/amqp/errors';
import { toOutgoingMessage } from '../../../src/servicebus/amqp/messageCodec';

/**
 * What the peer refuses in a message's system properties, as Service Bus refuses it. (@azure/service-bus
 * checks the same before sending, so these are reached by other clients: the fields as they arrive.)
 */
const refusal = (fields: Record<string, unknown>): string => {
  try {
    toOutgoingMessage({ body: { typecode: 0x75, content: Buffer.from('x') }, ...fields });
  } catch (error) {
    expect(error).toBeInstanceOf(PeerError);
    expect((error as PeerError).condition).toBe('amqp:invalid-field');
    return (error as Error).message;
  }
  throw new Error('the message was accepted');
};

describe('toOutgoingMessage: system properties', () => {
  it('carries them as they came', () => {
    expect(
      toOutgoingMessage({
        body: { typecode: 0x75, content: Buffer.from('x') },
        to: 'billing',
        reply_to: 'replies',
        reply_to_group_id: 'reply-session',
        group_id: 'session-7',
        message_annotations: { 'x-opt-partition-key': 'session-7' },
      }),
    ).toMatchObject({
      to: 'billing',
      replyTo: 'replies',
      replyToSessionId: 'reply-session',
      sessionId: 'session-7',
      partitionKey: 'session-7',
    });
  });

  it('refuses a PartitionKey that is not the SessionId of the same message', () => {
    expect(refusal({ group_id: 'a', message_annotations: { 'x-opt-partition-key': 'b' } })).toBe(
      'The PartitionKey of a message with a SessionId must be the SessionId, as Service Bus requires.',
    );
  });

  it('refuses a SessionId, ReplyToSessionId or PartitionKey over 128 characters, and takes 128', () => {
    const long = 's'.repeat(129);
    expect(refusal({ group_id: long })).toBe(
      'The group-id (SessionId) is 129 characters long; Service Bus allows 128.',
    );
    expect(refusal({ reply_to_group_id: long })).toMatch(/ReplyToSessionId\) is 129 characters/);
    expect(refusal({ message_annotations: { 'x-opt-partition-key': long } })).toMatch(
      /PartitionKey is 129 characters/,
    );
    expect(
      toOutgoingMessage({ body: { typecode: 0x75, content: Buffer.from('x') }, group_id: 's'.repeat(128) })
        .sessionId,
    ).toHaveLength(128);
  });

  it('refuses a system property that is not a string', () => {
    expect(refusal({ to: 42 })).toBe('The to must be a string.');
  });
});
