import { PoisonMessageError, TransientStoreError } from '@idempotent-consumers/inbox';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { deliver, type LogLine } from '../../../test/support/deliveries';
import { type Invoice, invoicePartition } from '../../src';

/** How the payment applier behaves when Cosmos DB or the message goes wrong, seen as the host sees it. */
const stack = useLocalStack();

let invoices = 0;
async function openInvoice(): Promise<string> {
  const id = `INV-F${++invoices}`;
  await stack.container.items.create<Invoice>({
    id,
    partitionKey: invoicePartition(id),
    type: 'invoice',
    currency: 'EUR',
    totalMinor: 1_000_000,
    paidMinor: 0,
    status: 'Open',
  });
  return id;
}

const paid = async (id: string): Promise<number | undefined> =>
  (await stack.container.item(id, invoicePartition(id)).read<Invoice>()).resource?.paidMinor;

const documentCount = async (id: string): Promise<number> =>
  (await stack.container.items.query('SELECT c.id FROM c', { partitionKey: invoicePartition(id) }).fetchAll())
    .resources.length;

describe('transient failures: abandon, then the redelivery applies the effect once', () => {
  it('the batch commits but its response is lost: the delivery is abandoned, the redelivery is a duplicate', async () => {
    const id = await openInvoice();
    const message = { paymentId: 'P-drop', invoiceId: id, amount: 10, currency: 'EUR' };
    stack.server.faults.inject({ kind: 'dropResponseAfterCommit', on: 'batch', times: 1 });
    const logs: LogLine[] = [];

    const first = await deliver('billing-payment-applier', message, { messageId: 'drop-1' });
    const second = await deliver(
      'billing-payment-applier',
      message,
      { messageId: 'drop-1', deliveryCount: 2 },
      logs,
    );

    expect(first.settled).toBe('abandoned');
    expect(first.error).toBeInstanceOf(TransientStoreError);
    expect(second.settled).toBe('completed');
    expect(logs.map((l) => l.text).join('\n')).toContain('"outcome":"duplicate"');
    expect(await paid(id)).toBe(1000);
  });

  it.each([
    [
      '429 after the SDK gives up',
      { kind: 'throttle', on: 'batch', times: 10, retryAfterMs: 1 } as const,
      429,
    ],
    ['503', { kind: 'unavailable', on: 'batch', times: 1 } as const, 503],
  ])('%s: abandoned with nothing written, then applied once on redelivery', async (_name, fault, status) => {
    const id = await openInvoice();
    const message = { paymentId: `P-${status}`, invoiceId: id, amount: 2.5, currency: 'EUR' };
    stack.server.faults.inject(fault);
    const logs: LogLine[] = [];

    const first = await deliver('billing-payment-applier', message, { messageId: `t-${status}` }, logs);
    const paidAfterFirst = await paid(id);
    const second = await deliver('billing-payment-applier', message, {
      messageId: `t-${status}`,
      deliveryCount: 2,
    });

    expect(first.settled).toBe('abandoned');
    expect((first.error as TransientStoreError).statusCode).toBe(status);
    expect(logs.some((l) => l.level === 'warning' && l.text.includes('"outcome":"retried"'))).toBe(true);
    expect(paidAfterFirst).toBe(0);
    expect(second.settled).toBe('completed');
    expect(await paid(id)).toBe(250);
  });
});

describe('a different body reusing a MessageId is reported, however its first delivery ended', () => {
  it.each([
    ['a 503', { kind: 'unavailable', on: 'batch', times: 1 } as const],
    ['a 429 after the SDK gives up', { kind: 'throttle', on: 'batch', times: 10, retryAfterMs: 1 } as const],
    [
      'a lost response (a timeout, a crash, a lost lock)',
      { kind: 'dropResponseAfterCommit', on: 'batch', times: 1 } as const,
    ],
  ])(
    'first delivery failed with %s: the redelivery is a payload mismatch, with a warning',
    async (_name, fault) => {
      const id = await openInvoice();
      const messageId = `reused-${fault.kind}`;
      const original = { paymentId: 'P-orig', invoiceId: id, amount: 10, currency: 'EUR' };
      const reuse = { paymentId: 'P-reuse', invoiceId: id, amount: 99, currency: 'EUR' };
      await deliver('billing-payment-applier', original, { messageId });
      stack.server.faults.inject(fault);
      const logs: LogLine[] = [];

      const first = await deliver('billing-payment-applier', reuse, { messageId });
      const redelivery = await deliver(
        'billing-payment-applier',
        reuse,
        { messageId, deliveryCount: 2 },
        logs,
      );

      expect([first.settled, redelivery.settled]).toEqual(['abandoned', 'completed']);
      const line = logs.find((l) => l.text.includes('"outcome"'));
      expect(line?.level).toBe('warning');
      expect(line?.text).toContain('"outcome":"payload_mismatch"');
      expect(await paid(id)).toBe(1000);
    },
  );
});

describe('poison messages: nothing written, the reason logged, dead-lettered after the last delivery', () => {
  it.each([
    ['a body that is not JSON', 'this is not { json', { messageId: 'poison-1' }, 'body-not-json'],
    [
      'a body that fails the schema',
      { paymentId: 'P', invoiceId: 'INV-F-poison', amount: -3, currency: 'EUR' },
      { messageId: 'poison-2' },
      'schema-violation',
    ],
    [
      'an amount below one cent (it would be applied as 0)',
      { paymentId: 'P', invoiceId: 'INV-F-poison', amount: 1e-9, currency: 'EUR' },
      { messageId: 'poison-cent' },
      'schema-violation',
    ],
    [
      'an unknown currency',
      { paymentId: 'P', invoiceId: 'INV-F-poison', amount: 3, currency: 'XXX' },
      { messageId: 'poison-3' },
      'schema-violation',
    ],
    [
      'a body nested 3,000 arrays deep in a field the schema does not list',
      `{"paymentId":"P","invoiceId":"INV-F-poison","amount":3,"currency":"EUR","extra":${'['.repeat(3000)}${']'.repeat(3000)}}`,
      { messageId: 'poison-deep' },
      'too-deep',
    ],
    [
      "a body with a messageId property, which the host puts in place of the broker's",
      { paymentId: 'P', invoiceId: 'INV-F-poison', amount: 3, currency: 'EUR', messageId: 'from-the-body' },
      {}, // whatever the broker's MessageId, the host hands over the body's: it is logged as null
      'metadata-shadowed-by-body',
    ],
    [
      'a body with a DELIVERYCOUNT property (names compared ignoring case)',
      { paymentId: 'P', invoiceId: 'INV-F-poison', amount: 3, currency: 'EUR', DELIVERYCOUNT: 2 },
      { messageId: 'poison-6' },
      'metadata-shadowed-by-body',
    ],
    [
      'no MessageId',
      { paymentId: 'P', invoiceId: 'INV-F-poison', amount: 3, currency: 'EUR' },
      {},
      'missing-message-id',
    ],
  ])('%s → abandoned with PoisonMessageError(%s)', async (_name, body, options, reason) => {
    const logs: LogLine[] = [];

    const result = await deliver('billing-payment-applier', body, options, logs);

    expect(result.settled).toBe('abandoned');
    expect(result.error).toBeInstanceOf(PoisonMessageError);
    expect((result.error as PoisonMessageError).reason).toBe(reason);
    const errorLine = logs.find((l) => l.level === 'error');
    expect(errorLine?.text).toContain(`"reason":"${reason}"`);
    expect(errorLine?.text).toContain(
      `"messageId":${JSON.stringify('messageId' in options ? options.messageId : null)}`,
    );
    expect(await documentCount('INV-F-poison')).toBe(0);
  });

  it.each([
    ['a body that is not JSON', 'card 4111 1111 1111 1111, mail jane.doe@example.com, {'],
    [
      'a body that fails the schema',
      { paymentId: '4111 1111 1111 1111', invoiceId: 'jane.doe@example.com', amount: 1, currency: 'EUR' },
    ],
  ])('%s: no card number or email in any log line or the exception', async (_name, body) => {
    const logs: LogLine[] = [];

    const result = await deliver(
      'billing-payment-applier',
      body,
      { messageId: 'pii-1', deliveryCount: 10 },
      logs,
    );

    const echoed = [...logs.map((l) => l.text), result.error?.message ?? '', String(result.error?.stack)];
    expect(result.error).toBeInstanceOf(PoisonMessageError);
    expect(logs.length).toBeGreaterThan(0);
    for (const text of echoed) {
      // The whole card number: a random invocation id may hold "4111".
      expect(text).not.toMatch(/4111 1111|jane|example\.com/);
    }
    if (typeof body === 'string')
      expect(result.error?.message).toMatch(/\d+ characters, SHA-256 [0-9a-f]{16}/);
  });

  it('says so on the last allowed delivery, and not before', async () => {
    const early: LogLine[] = [];
    const last: LogLine[] = [];

    await deliver(
      'billing-payment-applier',
      'not json',
      { messageId: 'poison-last', deliveryCount: 9 },
      early,
    );
    await deliver(
      'billing-payment-applier',
      'not json',
      { messageId: 'poison-last', deliveryCount: 10 },
      last,
    );

    expect(early.some((l) => l.text.includes('dead-letter queue'))).toBe(false);
    expect(
      last.some(
        (l) =>
          l.level === 'error' && l.text.includes('delivery 10 of 10') && l.text.includes('dead-letter queue'),
      ),
    ).toBe(true);
  });
});
