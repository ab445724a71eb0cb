import { defineInboxConsumer, type PartitionTransaction } from '@idempotent-consumers/inbox';

import {
  type Invoice,
  invoicePartition,
  toMinorUnits,
  type UnappliedPayment,
  unappliedPaymentId,
} from './documents';
import { PaymentReceived } from './messages';

/**
 * PaymentReceived → the invoice's paid amount rises by the amount; the invoice becomes Paid once
 * paid ≥ total. A payment id names one payment, so the consumer also keys the event on it
 * (`eventKey`): a producer that sends a payment again under a fresh MessageId is absorbed, not paid
 * twice (packages/inbox/README.md#producers-that-re-mint-messageids).
 *
 * Most payments leave the invoice open, so the first attempt is a single `incr` with no read and no
 * ETag (concurrent payments never conflict), guarded by a condition that fails when this payment
 * would complete the invoice or is in another currency. Only then does the handler run again, read
 * the invoice, and take the slower path. Paid amounts only grow, so exactly the payment that
 * crosses the total sets the status.
 */
export const paymentApplier = defineInboxConsumer({
  name: 'billing.payment-applier',
  schema: PaymentReceived,
  examples: [{ paymentId: 'PAY-1', invoiceId: 'INV-1', amount: 12.5, currency: 'EUR' }],
  partitionKey: (payment) => invoicePartition(payment.invoiceId),
  eventKey: { of: (payment) => payment.paymentId, onConflict: 'absorb' },

  async handle(payment, tx) {
    const amountMinor = toMinorUnits(payment.amount);
    if (tx.previousFailure === undefined) {
      applyLeavingOpen(tx, payment, amountMinor);
      return;
    }

    const invoice = (await tx.read<Invoice>(payment.invoiceId))?.document;
    if (!invoice || invoice.currency !== payment.currency) {
      const unapplied: UnappliedPayment = {
        id: unappliedPaymentId(payment.paymentId),
        partitionKey: tx.partitionKey,
        type: 'unapplied-payment',
        paymentId: payment.paymentId,
        invoiceId: payment.invoiceId,
        amountMinor,
        currency: payment.currency,
        reason: invoice ? 'currency-mismatch' : 'unknown-invoice',
      };
      tx.create(unapplied, { name: 'unapplied' });
      tx.recordAlternative('unapplied-payment');
      return;
    }
    if (invoice.paidMinor + amountMinor < invoice.totalMinor) {
      applyLeavingOpen(tx, payment, amountMinor); // another payment moved the total since the first attempt
      return;
    }
    tx.patch(
      payment.invoiceId,
      [
        { op: 'incr', path: '/paidMinor', value: amountMinor },
        { op: 'set', path: '/status', value: 'Paid' },
      ],
      { name: 'complete', condition: `from c where c.paidMinor + ${amountMinor} >= c.totalMinor` },
    );
  },
});

/** The fast path: an `incr` that applies only while the invoice stays open and the currency matches. */
function applyLeavingOpen(tx: PartitionTransaction, payment: PaymentReceived, amountMinor: number): void {
  tx.patch(payment.invoiceId, [{ op: 'incr', path: '/paidMinor', value: amountMinor }], {
    name: 'apply',
    condition: `from c where c.currency = "${payment.currency}" AND c.paidMinor + ${amountMinor} < c.totalMinor`,
  });
}
