import type { BACKORDER_REASONS, CURRENCIES, INVOICE_STATUSES } from './messages';

/**
 * The sample's documents. Everything about one invoice lives in the logical partition
 * `invoice:<id>`, everything about one product in `product:<id>`, everything about one order's
 * shipment in `order:<id>`, so that a message's effect and its inbox marker always share a
 * partition and commit in one transactional batch.
 */
export const invoicePartition = (invoiceId: string): string => `invoice:${invoiceId}`;
export const productPartition = (productId: string): string => `product:${productId}`;
export const orderPartition = (orderId: string): string => `order:${orderId}`;

/** Money is stored in minor units (cents), so that sums are exact. */
export const toMinorUnits = (amount: number): number => Math.round(amount * 100);

export interface Invoice {
  id: string;
  partitionKey: string;
  type: 'invoice';
  currency: (typeof CURRENCIES)[number];
  totalMinor: number;
  paidMinor: number;
  status: 'Open' | 'Paid';
  [property: string]: unknown;
}

/** A payment that could not be applied to its invoice (unknown invoice, other currency), kept for follow-up. */
export interface UnappliedPayment {
  id: string;
  partitionKey: string;
  type: 'unapplied-payment';
  paymentId: string;
  invoiceId: string;
  amountMinor: number;
  currency: string;
  reason: 'unknown-invoice' | 'currency-mismatch';
  [property: string]: unknown;
}

export interface Product {
  id: string;
  partitionKey: string;
  type: 'product';
  /** Available to reserve; never below zero. */
  stock: number;
  /** Reserved by orders; stock + reserved only changes when stock is replenished. */
  reserved: number;
  [property: string]: unknown;
}

export interface Backorder {
  id: string;
  partitionKey: string;
  type: 'backorder';
  orderId: string;
  productId: string;
  quantity: number;
  reason: (typeof BACKORDER_REASONS)[number];
  [property: string]: unknown;
}

/**
 * The shipment of an order, planned from the stock reserver's outcome: `ready` once its stock is
 * reserved, `awaiting-stock` while it is backordered.
 */
export interface Shipment {
  id: string;
  partitionKey: string;
  type: 'shipment';
  orderId: string;
  productId: string;
  quantity: number;
  status: 'ready' | 'awaiting-stock';
  /** Why the stock is awaited; only while `awaiting-stock`. */
  backorderReason?: (typeof BACKORDER_REASONS)[number];
  [property: string]: unknown;
}

/** The latest known status of an invoice, as its source system versions it. */
export interface InvoiceStatus {
  id: string;
  partitionKey: string;
  type: 'invoice-status';
  invoiceId: string;
  status: (typeof INVOICE_STATUSES)[number];
  version: number;
  [property: string]: unknown;
}

export const invoiceStatusId = (invoiceId: string): string => `${invoiceId}:status`;
export const backorderId = (orderId: string): string => `backorder:${orderId}`;
export const shipmentId = (orderId: string): string => `shipment-${orderId}`;
export const unappliedPaymentId = (paymentId: string): string => `unapplied:${paymentId}`;
