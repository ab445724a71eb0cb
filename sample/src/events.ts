import type { z } from 'zod';

import { invoiceStatusProjector } from './invoiceStatusProjector';
import { InvoiceStatusChanged, OrderCreated, PaymentReceived, SUBJECTS } from './messages';
import { paymentApplier } from './paymentApplier';
import { stockReserver } from './stockReserver';

/**
 * The catalogue of the sample events: for each kind, its Subject, its schema, the consumer that
 * reads it, the MessageId rule and the send tool's flags. `npm run send` (its `payment`, `order` and
 * `status` shortcuts), the scenario workload (sample/scenario/workload.ts) and its verifier read it.
 *
 * The MessageId is derived from the business event, never random: the same event always gets the
 * same MessageId, which is what lets broker duplicate detection and the consumers' inbox drop a
 * second copy.
 */
export interface SampleEvent<M> {
  subject: string;
  schema: z.ZodType<M>;
  /** The consumer that reads it. */
  consumer: string;
  messageId: (body: M) => string;
  /** `npm run send -- <kind> --<flag> <value>...`: the body field each flag fills. */
  flags: Record<string, { field: keyof M & string; type: 'string' | 'number' }>;
}

const sampleEvent = <M>(event: SampleEvent<M>): SampleEvent<M> => event;

export const SAMPLE_EVENTS = {
  payment: sampleEvent<PaymentReceived>({
    subject: SUBJECTS.paymentReceived,
    schema: PaymentReceived,
    consumer: paymentApplier.name,
    messageId: (payment) => `payment-${payment.paymentId}`,
    flags: {
      invoice: { field: 'invoiceId', type: 'string' },
      payment: { field: 'paymentId', type: 'string' },
      amount: { field: 'amount', type: 'number' },
      currency: { field: 'currency', type: 'string' },
    },
  }),
  order: sampleEvent<OrderCreated>({
    subject: SUBJECTS.orderCreated,
    schema: OrderCreated,
    consumer: stockReserver.name,
    messageId: (order) => `order-${order.orderId}`,
    flags: {
      order: { field: 'orderId', type: 'string' },
      product: { field: 'productId', type: 'string' },
      quantity: { field: 'quantity', type: 'number' },
    },
  }),
  status: sampleEvent<InvoiceStatusChanged>({
    subject: SUBJECTS.invoiceStatusChanged,
    schema: InvoiceStatusChanged,
    consumer: invoiceStatusProjector.name,
    // A status change is an event per version: version 3 and version 4 are different messages.
    messageId: (status) => `invoice-status-${status.invoiceId}-v${status.version}`,
    flags: {
      invoice: { field: 'invoiceId', type: 'string' },
      status: { field: 'status', type: 'string' },
      version: { field: 'version', type: 'number' },
    },
  }),
};

export type SampleEventKind = keyof typeof SAMPLE_EVENTS;
