import { type OutboxDocument, outboxEntryOf, type OutboxMessage } from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { deliver } from '../../../test/support/deliveries';
import { type Backorder, type Product, productPartition } from '../../src';

const stack = useLocalStack();

let products = 0;
async function stockProduct(stock: number): Promise<string> {
  const id = `SKU-${++products}`;
  await stack.container.items.create<Product>({
    id,
    partitionKey: productPartition(id),
    type: 'product',
    stock,
    reserved: 0,
  });
  return id;
}

const product = async (id: string): Promise<Product | undefined> =>
  (await stack.container.item(id, productPartition(id)).read<Product>()).resource;

/**
 * The outbox documents of the product's partition (the events the reserver staged with its effects),
 * each with its message as the relay reads it (the document keeps it as JSON text).
 */
const outbox = async (
  productId: string,
): Promise<(Omit<OutboxDocument, 'message'> & { message: OutboxMessage | undefined })[]> =>
  (
    await stack.container.items
      .query<OutboxDocument>('SELECT * FROM c WHERE c.type = "outbox"', {
        partitionKey: productPartition(productId),
      })
      .fetchAll()
  ).resources.map((document) => ({ ...document, message: messageOf(document) }));

function messageOf(document: OutboxDocument): OutboxMessage | undefined {
  const read = outboxEntryOf(document);
  return read.ok ? read.entry.message : undefined;
}

const backorders = async (productId: string): Promise<Backorder[]> =>
  (
    await stack.container.items
      .query<Backorder>('SELECT * FROM c WHERE c.type = "backorder"', {
        partitionKey: productPartition(productId),
      })
      .fetchAll()
  ).resources;

describe('inventory.stock-reserver', () => {
  it('reserves stock: stock drops and reserved rises by the quantity', async () => {
    const id = await stockProduct(10);

    const result = await deliver(
      'inventory-stock-reserver',
      { orderId: 'ORD-1', productId: id, quantity: 4 },
      { messageId: 'order-1' },
    );

    expect(result.settled).toBe('completed');
    expect(await product(id)).toMatchObject({ stock: 6, reserved: 4 });
  });

  it('records a backorder, once, when the stock is short, and leaves the stock alone', async () => {
    const id = await stockProduct(2);
    const order = { orderId: 'ORD-2', productId: id, quantity: 5 };

    await deliver('inventory-stock-reserver', order, { messageId: 'order-2' });
    await deliver('inventory-stock-reserver', order, { messageId: 'order-2', deliveryCount: 2 });

    expect(await product(id)).toMatchObject({ stock: 2, reserved: 0 });
    expect(await backorders(id)).toEqual([
      expect.objectContaining({ orderId: 'ORD-2', quantity: 5, reason: 'insufficient-stock' }),
    ]);
  });

  it('never lets concurrent orders take stock below zero; each short order is backordered once', async () => {
    const id = await stockProduct(10);
    const orders = Array.from({ length: 8 }, (_, i) => ({
      orderId: `ORD-C${i}`,
      productId: id,
      quantity: 3,
    }));

    // Every order twice, all at once: redeliveries race their own first delivery.
    await Promise.all(
      [...orders, ...orders].map((order, i) =>
        deliver('inventory-stock-reserver', order, {
          messageId: `msg-${order.orderId}`,
          deliveryCount: i < 8 ? 1 : 2,
        }),
      ),
    );
    const stocked = await product(id);
    const short = await backorders(id);

    expect(stocked).toMatchObject({ stock: 1, reserved: 9 });
    expect(stocked!.stock + stocked!.reserved).toBe(10);
    expect(short).toHaveLength(5);
    expect(new Set(short.map((b) => b.orderId)).size).toBe(5);
  });

  it('backorders an order for a product that does not exist', async () => {
    await deliver(
      'inventory-stock-reserver',
      { orderId: 'ORD-3', productId: 'SKU-unknown', quantity: 1 },
      { messageId: 'order-3' },
    );

    expect(await backorders('SKU-unknown')).toEqual([
      expect.objectContaining({ orderId: 'ORD-3', reason: 'unknown-product' }),
    ]);
  });

  describe('publishes what happened, through the outbox, exactly when it commits', () => {
    it('StockReserved with the reservation, once however often the order is delivered', async () => {
      const id = await stockProduct(10);
      const order = { orderId: 'ORD-P1', productId: id, quantity: 4 };

      await deliver('inventory-stock-reserver', order, { messageId: 'order-p1' });
      await deliver('inventory-stock-reserver', order, { messageId: 'order-p1', deliveryCount: 2 });
      const [staged, ...more] = await outbox(id);

      expect(more).toEqual([]);
      expect(staged).toMatchObject({
        status: 'pending',
        consumer: 'inventory.stock-reserver',
        message: {
          topic: 'business-events',
          subject: 'StockReserved',
          body: { orderId: 'ORD-P1', productId: id, quantity: 4 },
          contentType: 'application/json',
        },
      });
      expect(staged!.message!.messageId).toMatch(/^[0-9a-f]{32}$/);
      expect(staged!.id).toBe(`outbox-${staged!.message!.messageId}`);
    });

    it('BackorderCreated instead, with its reason, and nothing of the reservation that failed', async () => {
      const id = await stockProduct(1);

      await deliver(
        'inventory-stock-reserver',
        { orderId: 'ORD-P2', productId: id, quantity: 3 },
        { messageId: 'order-p2' },
      );

      expect((await outbox(id)).map((d) => d.message)).toEqual([
        expect.objectContaining({
          subject: 'BackorderCreated',
          body: { orderId: 'ORD-P2', productId: id, quantity: 3, reason: 'insufficient-stock' },
        }),
      ]);
    });

    it('one event per order when orders race for the last units, matching the effects', async () => {
      const id = await stockProduct(6);
      const orders = Array.from({ length: 5 }, (_, i) => ({
        orderId: `ORD-PC${i}`,
        productId: id,
        quantity: 2,
      }));

      await Promise.all(
        orders.map((order) =>
          deliver('inventory-stock-reserver', order, { messageId: `msg-${order.orderId}` }),
        ),
      );
      const events = (await outbox(id)).map((d) => d.message!);

      expect(events.filter((m) => m.subject === 'StockReserved')).toHaveLength(3);
      expect(events.filter((m) => m.subject === 'BackorderCreated')).toHaveLength(2);
      expect(new Set(events.map((m) => (m.body as { orderId: string }).orderId)).size).toBe(5);
      expect(
        events
          .filter((m) => m.subject === 'BackorderCreated')
          .map((m) => (m.body as { orderId: string }).orderId)
          .sort(),
      ).toEqual((await backorders(id)).map((b) => b.orderId).sort());
    });
  });
});
