import { defineInboxConsumer } from '../inbox';
import { type Backorder, backorderId, productPartition } from './documents';
import { OrderCreated } from './messages';

/**
 * OrderCreated → the product's stock drops by the quantity (and its reserved quantity rises by it)
 * only if enough stock is left; otherwise a backorder is recorded. Either way exactly once: the
 * marker commits with whichever effect happened.
 *
 * The stock rule is a patch condition, checked by Cosmos DB at commit time, so two orders racing
 * for the last units cannot both win. When it fails, the handler runs again and records the
 * backorder instead.
 */
export const stockReserver = defineInboxConsumer({
  name: 'inventory.stock-reserver',
  schema: OrderCreated,
  partitionKey: (order) => productPartition(order.productId),

  handle(order, tx) {
    const insufficient = tx.failed('reserve', 412);
    if (insufficient || tx.failed('reserve', 404)) {
      const backorder: Backorder = {
        id: backorderId(order.orderId),
        partitionKey: tx.partitionKey,
        type: 'backorder',
        orderId: order.orderId,
        productId: order.productId,
        quantity: order.quantity,
        reason: insufficient ? 'insufficient-stock' : 'unknown-product',
      };
      tx.create(backorder, { name: 'backorder' });
      tx.recordAlternative('backorder');
      return;
    }
    tx.patch(
      order.productId,
      [
        { op: 'incr', path: '/stock', value: -order.quantity },
        { op: 'incr', path: '/reserved', value: order.quantity },
      ],
      { name: 'reserve', condition: `from c where c.stock >= ${order.quantity}` },
    );
  },
});
