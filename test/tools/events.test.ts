import { UsageError } from '../../tools/errors';
import { messageIdFor, parseEvent, parseEventLines } from '../../tools/events';

describe('MessageIds of business events', () => {
  it('are the same for the same event and differ between events', () => {
    const payment = { paymentId: 'PAY-1', invoiceId: 'INV-1', amount: 1, currency: 'EUR' as const };

    expect(messageIdFor({ subject: 'PaymentReceived', body: payment })).toBe('payment-PAY-1');
    expect(messageIdFor({ subject: 'PaymentReceived', body: { ...payment, amount: 2 } })).toBe(
      'payment-PAY-1',
    );
    expect(
      messageIdFor({ subject: 'OrderCreated', body: { orderId: 'O-1', productId: 'S', quantity: 1 } }),
    ).toBe('order-O-1');
    expect(
      [3, 4].map((version) =>
        messageIdFor({
          subject: 'InvoiceStatusChanged',
          body: { invoiceId: 'INV-1', status: 'Paid', version },
        }),
      ),
    ).toEqual(['invoice-status-INV-1-v3', 'invoice-status-INV-1-v4']);
  });
});

describe('parsing events', () => {
  it('validates the body with the consumer schema of its subject', () => {
    expect(() => parseEvent({ subject: 'OrderCreated', body: { orderId: 'O-1' } }, 'here')).toThrow(
      /here: invalid event:\n {2}- productId/,
    );
    expect(() => parseEvent({ subject: 'Refund', body: {} }, 'here')).toThrow(/subject must be one of/);
  });

  it('refuses a MessageId Service Bus would refuse', () => {
    const body = { orderId: 'O-1', productId: 'S', quantity: 1 };

    expect(() => parseEvent({ subject: 'OrderCreated', body, messageId: 'x'.repeat(129) }, 'here')).toThrow(
      UsageError,
    );
    expect(
      parseEvent({ subject: 'OrderCreated', body, messageId: 'x'.repeat(128) }, 'here').messageId,
    ).toHaveLength(128);
  });

  it('names the line of a JSON Lines file that is not JSON or has unknown fields', () => {
    expect(() => parseEventLines('{"subject": "OrderCreated",\n', 'e.jsonl')).toThrow(/e\.jsonl:1: not JSON/);
    expect(() =>
      parseEventLines(
        '{"subject":"OrderCreated","body":{"orderId":"O","productId":"S","quantity":1},"label":"x"}',
        'e.jsonl',
      ),
    ).toThrow(/e\.jsonl:1: unexpected field\(s\) label/);
    expect(() => parseEventLines('\n\n', 'e.jsonl')).toThrow(/has no events/);
  });
});
