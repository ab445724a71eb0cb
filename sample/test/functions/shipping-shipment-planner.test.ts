import { PoisonMessageError } from '@idempotent-consumers/inbox';
import {
  bindingOf,
  type OutboxDocument,
  outboxEntryOf,
  outboxRoutesOf,
  publishersOf,
  topicsPublishedBy,
} from '@idempotent-consumers/inbox/internal';
import { loggedField, loggedOutcome, useLocalStack } from '@idempotent-consumers/local-azure';

import { topology } from '../../../src/topology';
import { deliver, type LogLine } from '../../../test/support/deliveries';
import {
  BackorderCreated,
  OrderCreated,
  orderPartition,
  type Shipment,
  shipmentId,
  SHIPPING_EVENTS,
  StockReserved,
} from '../../src';

const stack = useLocalStack();

const reserved = (orderId: string, quantity = 2): StockReserved => ({
  orderId,
  productId: 'SKU-1',
  quantity,
});
const backordered = (
  orderId: string,
  reason: BackorderCreated['reason'] = 'insufficient-stock',
): BackorderCreated => ({
  orderId,
  productId: 'SKU-1',
  quantity: 5,
  reason,
});

/** Every business document of the order's partition: not its markers, not its outbox. */
const orderDocuments = async (orderId: string): Promise<Shipment[]> =>
  (
    await stack.container.items
      .query<Shipment>('SELECT * FROM c WHERE c.type != "inbox-marker" AND c.type != "outbox"', {
        partitionKey: orderPartition(orderId),
      })
      .fetchAll()
  ).resources;

/** What the planner published from the order's partition (subject, topic, body), through its outbox. */
const publishedFrom = async (orderId: string): Promise<[string, string, unknown][]> =>
  (
    await stack.container.items
      .query<OutboxDocument>('SELECT * FROM c WHERE c.type = "outbox"', {
        partitionKey: orderPartition(orderId),
      })
      .fetchAll()
  ).resources.map((document) => {
    const read = outboxEntryOf(document);
    return [document.subject, document.topic, read.ok ? read.entry.message.body : read.detail];
  });

const markersOf = async (orderId: string): Promise<number> => {
  const { resources } = await stack.container.items
    .query<number>('SELECT VALUE COUNT(1) FROM c WHERE c.type = "inbox-marker"', {
      partitionKey: orderPartition(orderId),
    })
    .fetchAll();
  return resources[0] ?? 0;
};

describe('shipping.shipment-planner', () => {
  it('reads the events the stock reserver publishes, on the topic it publishes them on, and publishes its own on shipping-events (src/topology.json)', () => {
    expect(topicsPublishedBy('inventory.stock-reserver', topology)).toEqual(['business-events']);
    expect(publishersOf('business-events', topology)).toContain('inventory.stock-reserver');
    expect(topicsPublishedBy('shipping.shipment-planner', topology)).toEqual([SHIPPING_EVENTS]);
    // No subscription here reads ShipmentPlanned: it is declared so, or tx.publish would refuse it.
    // (A consumer of the user's own on shipping-events adds the subjects it reads to the routes.)
    const routes = outboxRoutesOf('shipping.shipment-planner', topology);
    expect([...routes.keys()]).toEqual([SHIPPING_EVENTS]);
    expect(routes.get(SHIPPING_EVENTS)?.has('ShipmentPlanned')).toBe(true);
    expect(bindingOf('shipping.shipment-planner', topology)).toEqual({
      topic: 'business-events',
      subscription: 'shipping.shipment-planner',
      subjects: ['StockReserved', 'BackorderCreated'],
    });
  });

  it('plans a ready shipment for StockReserved, in the order partition, with its marker', async () => {
    const result = await deliver('shipping-shipment-planner', reserved('ORD-S1', 3), {
      messageId: 'out-1',
      subject: 'StockReserved',
    });

    expect(result.settled).toBe('completed');
    expect(await orderDocuments('ORD-S1')).toEqual([
      expect.objectContaining({
        id: shipmentId('ORD-S1'),
        partitionKey: 'order:ORD-S1',
        type: 'shipment',
        orderId: 'ORD-S1',
        productId: 'SKU-1',
        quantity: 3,
        status: 'ready',
      }),
    ]);
    expect((await orderDocuments('ORD-S1'))[0]).not.toHaveProperty('backorderReason');
    expect(await markersOf('ORD-S1')).toBe(1);
    expect(await publishedFrom('ORD-S1')).toEqual([
      [
        'ShipmentPlanned',
        SHIPPING_EVENTS,
        { orderId: 'ORD-S1', productId: 'SKU-1', quantity: 3, status: 'ready' },
      ],
    ]);
  });

  it.each([['insufficient-stock'], ['unknown-product']] as const)(
    'plans a shipment awaiting stock for BackorderCreated (%s)',
    async (reason) => {
      const orderId = `ORD-B-${reason}`;
      const result = await deliver('shipping-shipment-planner', backordered(orderId, reason), {
        messageId: `out-b-${reason}`,
        subject: 'BackorderCreated',
      });

      expect(result.settled).toBe('completed');
      expect(await orderDocuments(orderId)).toEqual([
        expect.objectContaining({
          id: shipmentId(orderId),
          status: 'awaiting-stock',
          backorderReason: reason,
          quantity: 5,
        }),
      ]);
    },
  );

  it('plans once when the same event arrives again (a relay resend, a redelivery), even concurrently', async () => {
    const logs: LogLine[] = [];
    const event = reserved('ORD-S2');

    const copies = await Promise.all(
      [1, 2, 3].map((deliveryCount) =>
        deliver('shipping-shipment-planner', event, {
          messageId: 'out-2',
          subject: 'StockReserved',
          deliveryCount,
        }),
      ),
    );
    await deliver('shipping-shipment-planner', event, { messageId: 'out-2', subject: 'StockReserved' }, logs);

    expect(copies.map((c) => c.settled)).toEqual(['completed', 'completed', 'completed']);
    expect(loggedOutcome(logs)).toBe('duplicate');
    expect(await orderDocuments('ORD-S2')).toHaveLength(1);
    expect(await markersOf('ORD-S2')).toBe(1);
    expect(await publishedFrom('ORD-S2')).toHaveLength(1);
  });

  it('keeps the planned shipment when another message plans the same order: the alternative already-planned', async () => {
    const logs: LogLine[] = [];
    await deliver('shipping-shipment-planner', backordered('ORD-S3'), {
      messageId: 'out-3a',
      subject: 'BackorderCreated',
    });

    const second = await deliver(
      'shipping-shipment-planner',
      reserved('ORD-S3'),
      { messageId: 'out-3b', subject: 'StockReserved' },
      logs,
    );

    expect(second.settled).toBe('completed');
    expect([loggedOutcome(logs), loggedField(logs, 'alternative')]).toEqual([
      'alternative',
      'already-planned',
    ]);
    expect(await orderDocuments('ORD-S3')).toEqual([expect.objectContaining({ status: 'awaiting-stock' })]);
    expect(await markersOf('ORD-S3')).toBe(2);
    // The alternative publishes nothing: the first plan's ShipmentPlanned is the only one.
    expect((await publishedFrom('ORD-S3')).map(([, , body]) => body)).toEqual([
      expect.objectContaining({ status: 'awaiting-stock' }),
    ]);
  });

  it.each([
    ['a StockReserved body under BackorderCreated', reserved('ORD-S4'), 'BackorderCreated'],
    ['a BackorderCreated body under StockReserved', backordered('ORD-S4'), 'StockReserved'],
    [
      'a body with an unknown reason under BackorderCreated',
      { ...backordered('ORD-S4'), reason: 'lost' },
      'BackorderCreated',
    ],
    ['no Subject', reserved('ORD-S4'), undefined],
  ])('refuses %s as poison, writing nothing', async (_name, body, subject) => {
    const result = await deliver('shipping-shipment-planner', body, { messageId: 'out-4', subject });

    expect(result.settled).toBe('abandoned');
    expect(result.error).toBeInstanceOf(PoisonMessageError);
    expect((result.error as PoisonMessageError).reason).toBe('rejected-by-handler');
    expect(await orderDocuments('ORD-S4')).toEqual([]);
    expect(await markersOf('ORD-S4')).toBe(0);
    expect(await publishedFrom('ORD-S4')).toEqual([]);
  });

  it('refuses a body that is neither event (schema-violation)', async () => {
    const result = await deliver(
      'shipping-shipment-planner',
      { orderId: 'ORD-S5', productId: 'SKU-1', quantity: 0 },
      { messageId: 'out-5', subject: 'StockReserved' },
    );

    expect((result.error as PoisonMessageError).reason).toBe('schema-violation');
    expect(await orderDocuments('ORD-S5')).toEqual([]);
  });
});

describe("the stock reserver's events", () => {
  const order = { orderId: 'ORD-1', productId: 'SKU-1', quantity: 2 };

  it('take what OrderCreated takes, and BackorderCreated a reason', () => {
    expect(OrderCreated.safeParse(order).success).toBe(true);
    expect(StockReserved.parse(order)).toEqual(order);
    for (const reason of ['insufficient-stock', 'unknown-product']) {
      expect(BackorderCreated.parse({ ...order, reason })).toEqual({ ...order, reason });
    }
  });

  it.each([
    ['an order id Cosmos DB cannot hold', { orderId: 'ORD/1' }],
    ['an empty product id', { productId: '' }],
    ['a product id over 100 characters', { productId: 'S'.repeat(101) }],
    ['a zero quantity', { quantity: 0 }],
    ['a fractional quantity', { quantity: 1.5 }],
    ['a quantity over 1,000,000', { quantity: 1_000_001 }],
    ['a quantity as text', { quantity: '2' }],
  ])('refuse %s', (_name, change) => {
    expect(StockReserved.safeParse({ ...order, ...change }).success).toBe(false);
    expect(BackorderCreated.safeParse({ ...order, reason: 'unknown-product', ...change }).success).toBe(
      false,
    );
  });

  it('refuse a backorder without a reason, or with another one', () => {
    expect(BackorderCreated.safeParse(order).success).toBe(false);
    expect(BackorderCreated.safeParse({ ...order, reason: 'lost' }).success).toBe(false);
  });
});
