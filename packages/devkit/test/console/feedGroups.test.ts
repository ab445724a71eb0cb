import { feedGroups, shortId } from '../../src/tools/console/page/feedGroups';
import type { FeedEvent } from '../../src/tools/console/types';

/** The live feed's rows (issue 44): one per copy of a message, its deliveries behind it. */
let seq = 0;
const event = (fields: Partial<FeedEvent>): FeedEvent => ({
  seq: ++seq,
  at: '2026-12-07T19:00:00.000Z',
  kind: 'delivery',
  topic: 'business-events',
  subscription: 'billing.payment-applier',
  function: 'billing-payment-applier',
  messageId: 'm-1',
  subject: 'PaymentReceived',
  sequenceNumber: 1,
  deliveryCount: 1,
  outcome: 'processed',
  detail: undefined,
  settlement: 'completed',
  handlerMs: 3,
  traceId: undefined,
  wrote: undefined,
  bodyBytes: 10,
  bodySha256: 'abc',
  ...fields,
});

describe("the live feed's rows", () => {
  it("make one row of a copy's deliveries and its dead-lettering, and a new row of a copy sent again", () => {
    const poison = [1, 2, 3].map((deliveryCount) =>
      event({ messageId: 'p-1', deliveryCount, outcome: 'poison', settlement: 'abandoned' }),
    );
    const deadLettered = event({ kind: 'dead-lettered', messageId: 'p-1', outcome: 'dead-lettered' });
    const dropped = event({
      kind: 'dropped-as-duplicate',
      subscription: undefined,
      outcome: 'dropped-as-duplicate',
    });
    const resubmitted = event({ messageId: 'p-1', deliveryCount: 1, outcome: 'poison' });
    const other = event({ messageId: 'm-2', subscription: 'inventory.stock-reserver' });

    const groups = feedGroups([
      poison[0]!,
      other,
      poison[1]!,
      poison[2]!,
      deadLettered,
      dropped,
      resubmitted,
    ]);

    expect(groups.map((group) => group.events.map(({ seq: n }) => n))).toEqual([
      [poison[0]!.seq, poison[1]!.seq, poison[2]!.seq, deadLettered.seq],
      [other.seq],
      [dropped.seq],
      [resubmitted.seq],
    ]);
    expect(groups.map((group) => group.key)).toEqual([
      poison[0]!.seq,
      other.seq,
      dropped.seq,
      resubmitted.seq,
    ]);
    expect(groups[0]!.shown).toBe(deadLettered);
  });

  it('keep the last delivery with its copy when the host reports it after the dead-lettering', () => {
    const first = event({ messageId: 'p-2', deliveryCount: 1, outcome: 'poison' });
    const deadLettered = event({ kind: 'dead-lettered', messageId: 'p-2', outcome: 'dead-lettered' });
    const last = event({ messageId: 'p-2', deliveryCount: 2, outcome: 'poison' });

    const [group, ...others] = feedGroups([first, deadLettered, last]);

    expect([group!.events, group!.shown, others]).toEqual([[first, deadLettered, last], deadLettered, []]);
  });

  it('keep a MessageId short, whole up to the limit', () => {
    expect(shortId('payment-PAY-1')).toBe('payment-PAY-1');
    expect(shortId('0123456789abcdef')).toBe('0123456789abcdef');
    expect(shortId('PaymentReceived-0123456789abcdef0123')).toBe('PaymentRe…ef0123');
    expect(shortId(undefined)).toBe('(none)');
  });
});
