import { defineInboxConsumer, PoisonMessageError } from '@idempotent-consumers/inbox';
import { z } from 'zod';

import { orderPartition, type Shipment, shipmentId } from './documents';
import { BackorderCreated, type ShipmentPlanned, StockReserved, SUBJECTS } from './messages';

/** Where the planner publishes ShipmentPlanned (src/topology.json lists it among the topic's publishers). */
export const SHIPPING_EVENTS = 'shipping-events';

/**
 * Either outcome of the stock reserver. BackorderCreated comes first: StockReserved would also
 * accept a backorder's body (zod drops the `reason` it does not know).
 */
const StockOutcome = z.union([BackorderCreated, StockReserved]);

/**
 * StockReserved → the order's shipment, `ready`; BackorderCreated → the order's shipment,
 * `awaiting-stock`. Both events are published by the stock reserver through its outbox, so this is
 * the sample's consumer of the app's own events: a resend by the outbox relay or sweeper arrives
 * with the same MessageId and finds the marker, and the shipment is planned exactly once.
 *
 * The Subject says which event a message is; a body that says otherwise (a reason on a
 * StockReserved's, none on a BackorderCreated's) is poison. An order whose shipment is already
 * planned (the same order reserved again under another MessageId) keeps its shipment: the message
 * is recorded as the alternative `already-planned`.
 *
 * A planned shipment is published as ShipmentPlanned on shipping-events, in the same batch as the
 * shipment (the outbox): a second topic, so that one topic refusing its messages can be seen not
 * to hold back the other's.
 */
export const shipmentPlanner = defineInboxConsumer({
  name: 'shipping.shipment-planner',
  schema: StockOutcome,
  examples: [
    { orderId: 'ORD-1', productId: 'SKU-1', quantity: 2 },
    { orderId: 'ORD-2', productId: 'SKU-1', quantity: 5, reason: 'insufficient-stock' },
  ],
  partitionKey: (outcome) => orderPartition(outcome.orderId),

  handle(outcome, tx, delivery) {
    const backordered = 'reason' in outcome;
    if (delivery.subject !== (backordered ? SUBJECTS.backorderCreated : SUBJECTS.stockReserved)) {
      throw new PoisonMessageError(
        'rejected-by-handler',
        backordered
          ? 'a body with a backorder reason must have the Subject BackorderCreated'
          : 'a body without a backorder reason must have the Subject StockReserved',
      );
    }
    if (tx.failed('plan', 409)) {
      tx.recordAlternative('already-planned');
      return;
    }
    const shipment: Shipment = {
      id: shipmentId(outcome.orderId),
      partitionKey: tx.partitionKey,
      type: 'shipment',
      orderId: outcome.orderId,
      productId: outcome.productId,
      quantity: outcome.quantity,
      ...(backordered ? { status: 'awaiting-stock', backorderReason: outcome.reason } : { status: 'ready' }),
    };
    tx.create(shipment, { name: 'plan' });
    const planned: ShipmentPlanned = {
      orderId: shipment.orderId,
      productId: shipment.productId,
      quantity: shipment.quantity,
      status: shipment.status,
    };
    tx.publish({
      topic: SHIPPING_EVENTS,
      subject: SUBJECTS.shipmentPlanned,
      name: 'shipment-planned',
      body: planned,
    });
  },
});
