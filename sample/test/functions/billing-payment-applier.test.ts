import { loggedOutcome, useLocalStack } from '@idempotent-consumers/local-azure';

import { deliver, type LogLine } from '../../../test/support/deliveries';
import { type Invoice, invoicePartition, type UnappliedPayment } from '../../src';

const stack = useLocalStack();

let invoices = 0;
async function openInvoice(totalMinor: number, currency = 'EUR'): Promise<string> {
  const id = `INV-${++invoices}`;
  await stack.container.items.create<Invoice>({
    id,
    partitionKey: invoicePartition(id),
    type: 'invoice',
    currency: currency as Invoice['currency'],
    totalMinor,
    paidMinor: 0,
    status: 'Open',
  });
  return id;
}

const invoice = async (id: string): Promise<Invoice | undefined> =>
  (await stack.container.item(id, invoicePartition(id)).read<Invoice>()).resource;

const payment = (invoiceId: string, paymentId: string, amount: number, currency = 'EUR'): object => ({
  paymentId,
  invoiceId,
  amount,
  currency,
});

const markersIn = async (invoiceId: string): Promise<number> => {
  const { resources } = await stack.container.items
    .query<number>('SELECT VALUE COUNT(1) FROM c WHERE c.type = "inbox-marker"', {
      partitionKey: invoicePartition(invoiceId),
    })
    .fetchAll();
  return resources[0] ?? 0;
};

describe('billing.payment-applier', () => {
  it('applies a payment: paid rises by the amount, the marker is written, the message completes', async () => {
    const id = await openInvoice(10_000);

    const result = await deliver('billing-payment-applier', payment(id, 'PAY-1', 25.5), {
      messageId: 'msg-pay-1',
    });

    expect(result.settled).toBe('completed');
    expect(await invoice(id)).toMatchObject({ paidMinor: 2550, status: 'Open' });
    expect(await markersIn(id)).toBe(1);
  });

  it('absorbs a duplicate delivery: nothing changes the second time', async () => {
    const id = await openInvoice(10_000);
    const logs: LogLine[] = [];

    await deliver('billing-payment-applier', payment(id, 'PAY-2', 10), { messageId: 'msg-pay-2' });
    const second = await deliver(
      'billing-payment-applier',
      payment(id, 'PAY-2', 10),
      { messageId: 'msg-pay-2', deliveryCount: 2 },
      logs,
    );

    expect(second.settled).toBe('completed');
    expect((await invoice(id))?.paidMinor).toBe(1000);
    expect(await markersIn(id)).toBe(1);
    expect(
      logs.some((line) => line.level === 'information' && line.text.includes('"outcome":"duplicate"')),
    ).toBe(true);
  });

  it('marks the invoice Paid exactly when the payments reach the total', async () => {
    const id = await openInvoice(10_000);

    await deliver('billing-payment-applier', payment(id, 'PAY-3a', 60), { messageId: 'msg-3a' });
    const afterFirst = await invoice(id);
    await deliver('billing-payment-applier', payment(id, 'PAY-3b', 40), { messageId: 'msg-3b' });
    const afterSecond = await invoice(id);

    expect(afterFirst).toMatchObject({ paidMinor: 6000, status: 'Open' });
    expect(afterSecond).toMatchObject({ paidMinor: 10_000, status: 'Paid' });
  });

  it('applies 50 different payments arriving at once: paid is exactly their sum', async () => {
    const id = await openInvoice(1_000_000);
    const amounts = Array.from({ length: 50 }, (_, i) => 1 + i * 0.37);

    const results = await Promise.all(
      amounts.map((amount, i) =>
        deliver('billing-payment-applier', payment(id, `PAY-50-${i}`, Math.round(amount * 100) / 100), {
          messageId: `msg-50-${i}`,
        }),
      ),
    );

    const expected = amounts.reduce(
      (sum, amount) => sum + Math.round((Math.round(amount * 100) / 100) * 100),
      0,
    );
    expect(results.every((r) => r.settled === 'completed')).toBe(true);
    expect((await invoice(id))?.paidMinor).toBe(expected);
    expect(await markersIn(id)).toBe(50);
  });

  it('delivers one message 20 times at once (lock expiry, redeliveries): one commit', async () => {
    const id = await openInvoice(100_000);

    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        deliver('billing-payment-applier', payment(id, 'PAY-20', 7), {
          messageId: 'msg-20',
          deliveryCount: i + 1,
        }),
      ),
    );

    expect(results.every((r) => r.settled === 'completed')).toBe(true);
    expect((await invoice(id))?.paidMinor).toBe(700);
    expect(await markersIn(id)).toBe(1);
  });

  // The library JSON-parses text metadata, so each pair reaches the function as one value.
  it.each([
    ['1e3', '1000'],
    ['1.0', '1'],
    ['-0', '0'],
    [' 77', '77'],
    ['[1, 2]', '[1,2]'],
    ['true', ' true'],
    ['null', 'null '],
    ['{}', '{ }'],
    ['"1e3"', ' "1e3"'],
    ['9007199254740993', '9007199254740992'],
  ])(
    'keeps MessageIds %j and %j apart though both arrive as one value; a redelivery is still a duplicate',
    async (firstId, secondId) => {
      const id = await openInvoice(10_000);
      const logs: LogLine[] = [];

      const first = await deliver('billing-payment-applier', payment(id, 'PAY-A', 10), {
        messageId: firstId,
      });
      const second = await deliver(
        'billing-payment-applier',
        payment(id, 'PAY-B', 20),
        { messageId: secondId },
        logs,
      );
      const secondOutcome = loggedOutcome(logs);
      const again = await deliver(
        'billing-payment-applier',
        payment(id, 'PAY-A', 10),
        { messageId: firstId, deliveryCount: 2 },
        logs,
      );

      expect([first.settled, second.settled, again.settled]).toEqual(['completed', 'completed', 'completed']);
      expect([secondOutcome, loggedOutcome(logs)]).toEqual(['processed', 'duplicate']);
      expect(logs.some((l) => l.level === 'warning' && l.text.includes('JSON-parsed'))).toBe(true);
      expect((await invoice(id))?.paidMinor).toBe(3000);
      expect(await markersIn(id)).toBe(2);
    },
  );

  it("cannot tell MessageId '\"q7\"' from 'q7' (both arrive as the text q7): the second is reported as a payload mismatch", async () => {
    const id = await openInvoice(10_000);
    const logs: LogLine[] = [];

    await deliver('billing-payment-applier', payment(id, 'PAY-Q1', 10), { messageId: '"q7"' });
    const second = await deliver(
      'billing-payment-applier',
      payment(id, 'PAY-Q2', 20),
      { messageId: 'q7' },
      logs,
    );

    expect(second.settled).toBe('completed');
    expect(loggedOutcome(logs)).toBe('payload_mismatch');
    expect((await invoice(id))?.paidMinor).toBe(1000);
  });

  it('records an unapplied payment, once, when the invoice does not exist', async () => {
    const message = payment('INV-missing', 'PAY-4', 12);

    await deliver('billing-payment-applier', message, { messageId: 'msg-pay-4' });
    await deliver('billing-payment-applier', message, { messageId: 'msg-pay-4', deliveryCount: 2 });
    const { resources } = await stack.container.items
      .query<UnappliedPayment>('SELECT * FROM c WHERE c.type = "unapplied-payment"', {
        partitionKey: invoicePartition('INV-missing'),
      })
      .fetchAll();

    expect(resources).toHaveLength(1);
    expect(resources[0]).toMatchObject({ paymentId: 'PAY-4', amountMinor: 1200, reason: 'unknown-invoice' });
  });

  it('records an unapplied payment for a payment in another currency, and leaves the invoice alone', async () => {
    const id = await openInvoice(5_000, 'USD');

    await deliver('billing-payment-applier', payment(id, 'PAY-5', 12, 'EUR'), { messageId: 'msg-pay-5' });

    expect((await invoice(id))?.paidMinor).toBe(0);
    expect(
      (await stack.container.item('unapplied:PAY-5', invoicePartition(id)).read<UnappliedPayment>()).resource
        ?.reason,
    ).toBe('currency-mismatch');
  });
});
