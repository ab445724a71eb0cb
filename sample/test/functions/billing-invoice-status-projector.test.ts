import { useLocalStack } from '@idempotent-consumers/local-azure';

import { deliver, type LogLine } from '../../../test/support/deliveries';
import { invoicePartition, type InvoiceStatus, invoiceStatusId } from '../../src';

const stack = useLocalStack();

const projection = async (invoiceId: string): Promise<InvoiceStatus | undefined> =>
  (await stack.container.item(invoiceStatusId(invoiceId), invoicePartition(invoiceId)).read<InvoiceStatus>())
    .resource;

const markers = async (invoiceId: string): Promise<number> =>
  (
    await stack.container.items
      .query<number>('SELECT VALUE COUNT(1) FROM c WHERE c.type = "inbox-marker"', {
        partitionKey: invoicePartition(invoiceId),
      })
      .fetchAll()
  ).resources[0] ?? 0;

describe('billing.invoice-status-projector (natural idempotency)', () => {
  it('keeps the newest version whatever the order and repetition of arrival, without markers', async () => {
    const events = [
      { status: 'Issued', version: 3 },
      { status: 'Draft', version: 1 },
      { status: 'Issued', version: 3 },
      { status: 'Draft', version: 2 },
      { status: 'Void', version: 5 },
      { status: 'Paid', version: 4 },
    ] as const;
    const outcomes: string[] = [];

    for (const [i, event] of events.entries()) {
      const logs: LogLine[] = [];
      await deliver(
        'billing-invoice-status-projector',
        { invoiceId: 'INV-S1', ...event },
        { messageId: `status-${i}` },
        logs,
      );
      outcomes.push(/"outcome":"(\w+)"/.exec(logs.map((l) => l.text).join('\n'))?.[1] ?? 'none');
    }

    expect(await projection('INV-S1')).toMatchObject({ status: 'Void', version: 5 });
    expect(outcomes).toEqual(['processed', 'duplicate', 'duplicate', 'duplicate', 'processed', 'duplicate']);
    expect(await markers('INV-S1')).toBe(0);
  });

  it('settles on the highest version when versions race', async () => {
    const versions = [7, 2, 12, 5, 9, 1, 11, 3, 8, 6, 10, 4];

    // Like the host: a delivery that throws (it lost too many races) is delivered again.
    const settle = async (version: number): Promise<number> => {
      for (let deliveryCount = 1; ; deliveryCount++) {
        const result = await deliver(
          'billing-invoice-status-projector',
          { invoiceId: 'INV-S2', status: 'Issued', version },
          { messageId: `race-${version}`, deliveryCount },
        );
        if (result.settled === 'completed') return deliveryCount;
      }
    };
    await Promise.all(versions.map(settle));

    expect((await projection('INV-S2'))?.version).toBe(12);
  });
});
