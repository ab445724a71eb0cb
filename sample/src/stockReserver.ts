import { defineInboxConsumer } from '@idempotent-consumers/inbox';

import { type Backorder, backorderId, productPartition } from './documents';
import { type BackorderCreated, OrderCreated, type StockReserved, SUBJECTS } from './messages';

/**
 * OrderCreated → the product's stock drops by the quantity (and its reserved quantity rises by it)
 * only if enough stock is left; otherwise a backorder is recorded. Either way exactly once: the
 * marker commits with whichever effect happened.
 *
 * The stock rule is a patch condition, checked by Cosmos DB at commit time, so two orders racing
 * for the last units cannot both win. When it fails, the handler runs again and records the
 * backorder instead.
 *
 * Each branch also publishes what happened (StockReserved or BackorderCreated) through the outbox:
 * the event is staged in the same batch as the effect, so it is sent exactly when that effect
 * commits, and never for the branch that lost. Its MessageId is derived from the order's message
 * and the event's name, so a redelivered order stages the same id and duplicate detection drops a
 * second send.
 */
export const stockReserver = defineInboxConsumer({
  name: 'inventory.stock-reserver',
  schema: OrderCreated,
  examples: [{ orderId: 'ORD-1', productId: 'SKU-1', quantity: 2 }],
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
      const created: BackorderCreated = {
        orderId: order.orderId,
        productId: order.productId,
        quantity: order.quantity,
        reason: backorder.reason,
      };
      tx.publish({
        topic: 'business-events',
        subject: SUBJECTS.backorderCreated,
        name: 'backorder-created',
        body: created,
      });
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
    const reserved: StockReserved = {
      orderId: order.orderId,
      productId: order.productId,
      quantity: order.quantity,
    };
    tx.publish({
      topic: 'business-events',
      subject: SUBJECTS.stockReserved,
      name: 'stock-reserved',
      body: reserved,
    });
  },
});
