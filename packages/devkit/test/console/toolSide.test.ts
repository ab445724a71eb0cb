import type { ServiceBusReceivedMessage } from '@azure/service-bus';
import { PAYMENTS, peekAll, PEER_TOPOLOGY, receive, TOPIC, usePeer } from '@idempotent-consumers/local-azure';

import { ConsoleError } from '../../src/tools/console/errors';
import { ToolSide } from '../../src/tools/console/toolSide';
import { sequenceOf } from '../../src/tools/deadLetterQueue';

/**
 * The console's dead-letter actions (packages/devkit/src/tools/console/toolSide.ts) on the local peer with the real
 * SDK: what the user picked by sequence number, and only what the confirmed plan said. No inbox is
 * connected, so every dead letter's state is unchecked and a discard needs force.
 */
const peer = usePeer();
const HOUR_MS = 3_600_000;

function side(): ToolSide {
  return new ToolSide({
    serviceBus: peer.client,
    inbox: 'COSMOS_ENDPOINT is not set',
    rules: new Map(),
    duplicateWindowSeconds: 3600,
    clockSkewSeconds: 0,
    now: () => Date.now(),
  });
}

/** Sends each (one MessageId may come twice, past the duplicate window) and dead-letters them all. */
async function deadLetter(
  ...messages: { messageId: string; body?: string | Buffer }[]
): Promise<ServiceBusReceivedMessage[]> {
  const sender = peer.client.createSender(TOPIC);
  for (const { messageId, body } of messages) {
    await sender.sendMessages({
      messageId,
      subject: 'PaymentReceived',
      body: body ?? `{"id":"${messageId}"}`,
    });
    peer.clock.advance(HOUR_MS + 1000);
  }
  await sender.close();
  const receiver = peer.receiver(PAYMENTS);
  for (const message of await receive(receiver, messages.length)) {
    await receiver.deadLetterMessage(message, {
      deadLetterReason: 'Test',
      deadLetterErrorDescription: 'dead',
    });
  }
  return peekAll(peer.receiver(PAYMENTS, true));
}

const discard = { action: 'discard' as const, force: true, includePoison: false };

describe('the console acts on what the user picked, and only as the plan said', () => {
  it('picks by sequence number: of two dead letters that share a MessageId, only the one chosen goes', async () => {
    const [first, second] = await deadLetter({ messageId: 'same' }, { messageId: 'same' });
    const chosen = { ...discard, sequences: [sequenceOf(first!)] };

    const plan = await side().plan(PEER_TOPOLOGY, PAYMENTS, chosen);
    expect(plan.lines.map((line) => [line.verdict, line.sequence])).toEqual([
      ['discard', sequenceOf(first!)],
    ]);
    expect(plan.acting).toBe(1);
    const done = await side().act(PEER_TOPOLOGY, PAYMENTS, { ...chosen, fingerprint: plan.fingerprint });

    expect(done.ok).toBe(true);
    expect(done.summary).toMatch(/^Discarded 1, refused 0, not found 0, failed 0, not received 0; /);
    expect((await peekAll(peer.receiver(PAYMENTS, true))).map(sequenceOf)).toEqual([sequenceOf(second!)]);
  });

  it('does nothing when the queue changed since the plan: 409, and the rest stays', async () => {
    const [gone, kept] = await deadLetter({ messageId: 'a' }, { messageId: 'b' });
    const chosen = { ...discard, sequences: [sequenceOf(gone!), sequenceOf(kept!)] };
    const plan = await side().plan(PEER_TOPOLOGY, PAYMENTS, chosen);
    expect(plan.acting).toBe(2);
    // Someone else removes one meanwhile.
    const other = peer.receiver(PAYMENTS, true);
    const [taken] = await receive(other, 1);
    expect(sequenceOf(taken!)).toBe(sequenceOf(gone!));
    await other.completeMessage(taken!);

    const refused = side().act(PEER_TOPOLOGY, PAYMENTS, { ...chosen, fingerprint: plan.fingerprint });
    await expect(refused).rejects.toThrow(ConsoleError);
    await expect(refused).rejects.toMatchObject({ status: 409 });
    expect((await peekAll(peer.receiver(PAYMENTS, true))).map(sequenceOf)).toEqual([sequenceOf(kept!)]);
    // The new plan says what changed.
    const again = await side().plan(PEER_TOPOLOGY, PAYMENTS, chosen);
    expect(again.lines.map((line) => line.verdict).sort()).toEqual(['discard', 'not-found']);
  });

  it('refuses an action without the plan it carries out', async () => {
    const [only] = await deadLetter({ messageId: 'c' });
    await expect(
      side().act(PEER_TOPOLOGY, PAYMENTS, { ...discard, sequences: [sequenceOf(only!)] }),
    ).rejects.toMatchObject({ status: 409 });
    expect(await peekAll(peer.receiver(PAYMENTS, true))).toHaveLength(1);
  });

  it("shows a dead letter's body up to 64 KB, with its full size", async () => {
    const [big] = await deadLetter({ messageId: 'big', body: Buffer.alloc(100 * 1024, 'x') });
    const body = await side().deadLetterBody(PEER_TOPOLOGY, PAYMENTS, sequenceOf(big!));
    expect(body).toMatchObject({ encoding: 'utf-8', bytes: 100 * 1024, truncated: true });
    expect(body.text).toHaveLength(64 * 1024);
    await expect(side().deadLetterBody(PEER_TOPOLOGY, PAYMENTS, '999')).rejects.toMatchObject({
      status: 404,
    });
  });
});
