import { integer, pick, seededRandom } from '@idempotent-consumers/local-azure';

import {
  CURRENCIES,
  type Invoice,
  INVOICE_STATUSES,
  invoicePartition,
  type Product,
  productPartition,
  SAMPLE_EVENTS,
  type SampleEventKind,
} from '../src';

/**
 * A realistic stream of business events for the sample consumers, with what a producer does wrong:
 * resends (some inside the broker's duplicate window, some after it) and a few poison messages.
 * Everything is derived from the seed, so a failing run can be replayed exactly.
 */
export interface WorkloadOptions {
  /** Distinct business events (before resends). */
  messages: number;
  seed: number;
  /** Share of events sent a second time at once (inside the duplicate detection window). */
  resendInsideWindow?: number;
  /** Share of events sent again after the window has passed (the inbox must absorb them). */
  resendOutsideWindow?: number;
  /** Share of poison messages (not JSON, or failing the schema). */
  poison?: number;
  /**
   * Share of payment events the producer sends a second time at once under a fresh MessageId (it
   * mints one per send attempt): past the broker's window and the marker, only the payment
   * applier's event key can absorb them. Default 0.
   */
  remintIds?: number;
}

export type EventKind = SampleEventKind | 'poison';

export interface WorkloadEvent {
  kind: EventKind;
  messageId: string;
  subject: string;
  /** What the producer sends: JSON text, or garbage for some poison. */
  body: string;
  /** The parsed business fields, for the expected state; undefined for poison. */
  payment?: { invoiceId: string; paymentId: string; amountMinor: number; currency: string };
  order?: { orderId: string; productId: string; quantity: number };
  status?: { invoiceId: string; status: string; version: number };
}

export interface Send {
  event: WorkloadEvent;
  /** `now`: in publishing order; `late`: after the duplicate detection window of its first send. */
  when: 'now' | 'late';
  /** The MessageId a copy the producer re-minted carries; the event's own when undefined. */
  remintedId?: string;
}

export interface Workload {
  seed: number;
  invoices: Invoice[];
  products: Product[];
  events: WorkloadEvent[];
  sends: Send[];
  /** The MessageIds the producer re-minted, each with the MessageId of its event. */
  reminted: Map<string, string>;
}

export function generateWorkload(options: WorkloadOptions): Workload {
  const random = seededRandom(options.seed);
  const invoiceCount = Math.max(3, Math.round(options.messages / 25));
  const productCount = Math.max(2, Math.round(options.messages / 60));

  const invoices: Invoice[] = Array.from({ length: invoiceCount }, (_, i) => ({
    id: `INV-${i}`,
    partitionKey: invoicePartition(`INV-${i}`),
    type: 'invoice',
    currency: pick(random, CURRENCIES),
    totalMinor: integer(random, 5, 150) * 1000,
    paidMinor: 0,
    status: 'Open',
  }));
  // Scarce stock, so that some orders are backordered and racing orders meet the stock rule.
  const products: Product[] = Array.from({ length: productCount }, (_, i) => ({
    id: `SKU-${i}`,
    partitionKey: productPartition(`SKU-${i}`),
    type: 'product',
    stock: integer(random, 5, 60),
    reserved: 0,
  }));

  const versions = new Map<string, number>();
  const events: WorkloadEvent[] = [];
  for (let n = 0; n < options.messages; n++) {
    const roll = random();
    if (roll < (options.poison ?? 0.01)) {
      events.push(poisonEvent(random, n));
    } else if (roll < 0.62) {
      // Mostly known invoices; a few unknown ones and a few in another currency become unapplied payments.
      const invoice = pick(random, invoices);
      const unknown = random() < 0.02;
      const currency = random() < 0.02 ? pick(random, CURRENCIES) : invoice.currency;
      const payment = {
        paymentId: `PAY-${n}`,
        invoiceId: unknown ? `INV-unknown-${n % 7}` : invoice.id,
        amountMinor: integer(random, 100, 250_000),
        currency,
      };
      const body = { ...payment, amountMinor: undefined, amount: payment.amountMinor / 100 };
      events.push({ ...sampleEvent('payment', body), payment });
    } else if (roll < 0.9) {
      const order = {
        orderId: `ORD-${n}`,
        productId: pick(random, products).id,
        quantity: integer(random, 1, 6),
      };
      events.push({ ...sampleEvent('order', order), order });
    } else {
      const invoiceId = pick(random, invoices).id;
      const version = (versions.get(invoiceId) ?? 0) + 1;
      versions.set(invoiceId, version);
      const status = { invoiceId, status: pick(random, INVOICE_STATUSES), version };
      events.push({ ...sampleEvent('status', status), status });
    }
  }
  // Status events of one invoice arrive out of order now and then: swap some neighbours.
  for (let i = 1; i < events.length; i++) {
    if (events[i]?.kind === 'status' && random() < 0.3)
      [events[i - 1], events[i]] = [events[i] as WorkloadEvent, events[i - 1] as WorkloadEvent];
  }

  const sends: Send[] = [];
  // Its own sequence, so that the rest of a seed's workload is the same with re-mints or without.
  const remint = seededRandom(options.seed ^ 0x2545f491);
  const reminted = new Map<string, string>();
  for (const event of events) {
    sends.push({ event, when: 'now' });
    if (event.kind === 'poison') continue;
    if (random() < (options.resendInsideWindow ?? 0.05)) sends.push({ event, when: 'now' });
    if (random() < (options.resendOutsideWindow ?? 0.03)) sends.push({ event, when: 'late' });
    if (event.kind === 'payment' && remint() < (options.remintIds ?? 0)) {
      const remintedId = `${event.messageId}.reminted`;
      reminted.set(remintedId, event.messageId);
      sends.push({ event, when: 'now', remintedId });
    }
  }
  return { seed: options.seed, invoices, products, events, sends, reminted };
}

/** A valid event of the sample catalogue: its Subject, its MessageId, its body as JSON text. */
function sampleEvent<K extends SampleEventKind>(
  kind: K,
  body: Parameters<(typeof SAMPLE_EVENTS)[K]['messageId']>[0],
): Pick<WorkloadEvent, 'kind' | 'messageId' | 'subject' | 'body'> {
  const { subject, messageId } = SAMPLE_EVENTS[kind] as unknown as {
    subject: string;
    messageId: (event: typeof body) => string;
  };
  return { kind, messageId: messageId(body), subject, body: JSON.stringify(body) };
}

function poisonEvent(random: () => number, n: number): WorkloadEvent {
  const messageId = `poison-${n}`;
  switch (integer(random, 0, 2)) {
    case 0:
      return {
        kind: 'poison',
        messageId,
        subject: SAMPLE_EVENTS.payment.subject,
        body: `{"paymentId": "PAY-${n}", "amount": 1`,
      };
    case 1:
      return {
        kind: 'poison',
        messageId,
        subject: SAMPLE_EVENTS.payment.subject,
        body: JSON.stringify({ paymentId: `PAY-${n}`, invoiceId: 'INV-0', amount: -5, currency: 'EUR' }),
      };
    default:
      return {
        kind: 'poison',
        messageId,
        subject: SAMPLE_EVENTS.order.subject,
        body: JSON.stringify({ orderId: `ORD-${n}`, quantity: 'three' }),
      };
  }
}
