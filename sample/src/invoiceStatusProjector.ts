import { defineVersionedConsumer } from '@idempotent-consumers/inbox';

import { invoicePartition, type InvoiceStatus, invoiceStatusId } from './documents';
import { InvoiceStatusChanged } from './messages';

/**
 * InvoiceStatusChanged → the invoice's status projection. The event carries the whole state and a
 * version, so it is written only over an older version: repeats and late arrivals are no-ops, and
 * no inbox marker is needed.
 */
export const invoiceStatusProjector = defineVersionedConsumer({
  name: 'billing.invoice-status-projector',
  schema: InvoiceStatusChanged,
  examples: [{ invoiceId: 'INV-1', status: 'Paid', version: 2 }],
  project: (event): InvoiceStatus => ({
    id: invoiceStatusId(event.invoiceId),
    partitionKey: invoicePartition(event.invoiceId),
    type: 'invoice-status',
    invoiceId: event.invoiceId,
    status: event.status,
    version: event.version,
  }),
});
