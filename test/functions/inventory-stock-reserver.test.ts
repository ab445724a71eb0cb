import { type Backorder, type Product, productPartition } from '../../src/sample';
import { deliver } from '../support/deliveries';
import { useLocalStack } from '../support/localStack';

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
});
