import { Feed } from '../../src/tools/console/feed';

/** A delivery as the trigger model reports it (packages/local-azure/src/host/serviceBusTriggers.ts). */
function delivery(n: number, overrides: Record<string, unknown> = {}) {
  return {
    function: 'billing-payment-applier',
    messageId: `m-${n}`,
    deliveryCount: 1,
    sequenceNumber: n,
    outcome: 'processed',
    settlement: 'completed' as const,
    handlerMs: 12.4,
    subject: 'PaymentReceived',
    body: Buffer.from(`{"n":${n}}`),
    ...overrides,
  };
}

const where = (name: string) =>
  name === 'billing-payment-applier'
    ? { topic: 'business-events', subscription: 'billing.payment-applier' }
    : undefined;

describe('the live feed', () => {
  it('gives the events after the one asked, each once, with its place, outcome and body digest', async () => {
    const feed = new Feed(where, () => new Date('2026-12-04T10:00:00Z'));
    feed.delivery(delivery(1));
    feed.delivery(delivery(2, { outcome: 'duplicate', cause: 'redelivery', deliveryCount: 2 }));

    const first = await feed.page(0, 10, 0);
    expect(first.last).toBe(2);
    expect(first.events.map((e) => [e.seq, e.messageId, e.outcome, e.detail])).toEqual([
      [1, 'm-1', 'processed', undefined],
      [2, 'm-2', 'duplicate', 'redelivery'],
    ]);
    expect(first.events[0]).toMatchObject({
      at: '2026-12-04T10:00:00.000Z',
      topic: 'business-events',
      subscription: 'billing.payment-applier',
      handlerMs: 12,
      bodyBytes: 7,
      bodySha256: expect.stringMatching(/^[0-9a-f]{12}$/) as string,
    });
    expect((await feed.page(2, 10, 0)).events).toEqual([]);
    expect((await feed.page(1, 10, 0)).events.map((e) => e.seq)).toEqual([2]);
  });

  it('holds a request with nothing new until an event comes, and ends it when the page goes away', async () => {
    const feed = new Feed(where);
    const waiting = feed.page(0, 10, 60_000);
    feed.deadLettered('business-events/Subscriptions/billing.payment-applier', {
      messageId: 'poison-1',
      subject: 'PaymentReceived',
      body: 'not JSON',
      sequenceNumber: 7,
      enqueuedAt: 0,
      expiresAt: 0,
      deliveryCount: 10,
      deadLetter: { reason: 'MaxDeliveryCountExceeded', description: 'ten deliveries', at: 0 },
    });
    const { events } = await waiting;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      kind: 'dead-lettered',
      subscription: 'billing.payment-applier',
      detail: 'MaxDeliveryCountExceeded: ten deliveries',
    });

    const gone = new AbortController();
    const abandoned = feed.page(1, 10, 60_000, gone.signal);
    gone.abort();
    expect(await abandoned).toEqual({ events: [], last: 1 });
  });

  it('bounds what it echoes, and keeps bodies only up to its limits, out of the events', async () => {
    const feed = new Feed(where);
    feed.delivery(
      delivery(1, { messageId: 'x'.repeat(1000), error: new Error('y'.repeat(1000)), outcome: undefined }),
    );
    feed.delivery(delivery(2, { body: Buffer.alloc(65 * 1024) }));
    const { events } = await feed.page(0, 10, 0);
    expect(events[0]!.messageId!.length).toBeLessThanOrEqual(128);
    expect(events[0]!.outcome).toBe('failed');
    expect(events[0]!.detail!.length).toBeLessThanOrEqual(300);
    expect(JSON.stringify(events)).not.toContain('{"n":1}');
    expect(feed.body(1)?.toString()).toBe('{"n":1}');
    // Over 64 KB: its size and hash are kept, the bytes are not.
    expect(events[1]!.bodyBytes).toBe(65 * 1024);
    expect(feed.body(2)).toBeUndefined();
    for (let n = 3; n <= 203; n++) feed.delivery(delivery(n));
    expect(feed.body(1)).toBeUndefined();
    expect(feed.body(203)?.toString()).toBe('{"n":203}');
  });
});
