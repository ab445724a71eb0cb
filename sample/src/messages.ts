import { z } from 'zod';

/**
 * The sample business events. All but one travel on the topic business-events; the Subject (Service
 * Bus Label) says which event a message is, and each subscription filters on the subjects its
 * consumer reads. The first three come from outside the app; StockReserved and BackorderCreated are
 * published by the stock reserver itself, through its outbox. ShipmentPlanned is published by the
 * shipment planner on shipping-events, for the carriers' integration, an app of its own that this
 * one does not deploy: src/topology.json declares it unsubscribed here.
 */
export const SUBJECTS = {
  paymentReceived: 'PaymentReceived',
  orderCreated: 'OrderCreated',
  invoiceStatusChanged: 'InvoiceStatusChanged',
  stockReserved: 'StockReserved',
  backorderCreated: 'BackorderCreated',
  shipmentPlanned: 'ShipmentPlanned',
} as const;

/** Business ids become document ids and partition keys, so they keep to characters Cosmos DB allows. */
const businessId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/, 'must be 1-100 letters, digits, ".", "_", ":" or "-"');

export const CURRENCIES = ['EUR', 'USD', 'GBP'] as const;

export const PaymentReceived = z.object({
  paymentId: businessId,
  invoiceId: businessId,
  /**
   * In the currency's major unit, at most two decimals (12.34), and at least one minor unit (0.01):
   * every currency listed has two, and a smaller amount would be applied as 0 cents.
   */
  amount: z
    .number()
    .min(0.01, 'must be at least 0.01 (one minor unit of the currency)')
    .max(1_000_000_000)
    .refine(
      (amount) =>
        Number.isInteger(Math.round(amount * 100)) &&
        Math.abs(amount * 100 - Math.round(amount * 100)) < 1e-6,
      {
        message: 'must have at most two decimals',
      },
    ),
  currency: z.enum(CURRENCIES),
});
export type PaymentReceived = z.infer<typeof PaymentReceived>;

/** An order's quantity; the stock reserver's events repeat the order's. */
const quantity = z.number().int().positive().max(1_000_000);

export const OrderCreated = z.object({
  orderId: businessId,
  productId: businessId,
  quantity,
});
export type OrderCreated = z.infer<typeof OrderCreated>;

/** The stock reserver took the order's quantity from the product's stock. */
export const StockReserved = z.object({
  orderId: businessId,
  productId: businessId,
  quantity,
});
export type StockReserved = z.infer<typeof StockReserved>;

export const BACKORDER_REASONS = ['insufficient-stock', 'unknown-product'] as const;

/** The stock reserver could not reserve the order's quantity and recorded a backorder instead. */
export const BackorderCreated = z.object({
  orderId: businessId,
  productId: businessId,
  quantity,
  reason: z.enum(BACKORDER_REASONS),
});
export type BackorderCreated = z.infer<typeof BackorderCreated>;

/** The shipment planner planned an order's shipment: ready to ship, or waiting for stock. */
export const ShipmentPlanned = z.object({
  orderId: businessId,
  productId: businessId,
  quantity,
  status: z.enum(['ready', 'awaiting-stock']),
});
export type ShipmentPlanned = z.infer<typeof ShipmentPlanned>;

export const INVOICE_STATUSES = ['Draft', 'Issued', 'Paid', 'Void'] as const;

export const InvoiceStatusChanged = z.object({
  invoiceId: businessId,
  status: z.enum(INVOICE_STATUSES),
  /** Increases with every change of the invoice at its source. */
  version: z.number().int().nonnegative(),
});
export type InvoiceStatusChanged = z.infer<typeof InvoiceStatusChanged>;
