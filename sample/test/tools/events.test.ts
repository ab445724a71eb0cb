import { UsageError } from '@idempotent-consumers/devkit';
import {
  loadSubjectRules,
  parseEvent,
  parseEventLines,
  type SubjectRules,
} from '@idempotent-consumers/devkit/internal/tools/events';
import { bindingOf } from '@idempotent-consumers/inbox/internal';
import { z } from 'zod';

import { topology } from '../../../src/topology';
import { SAMPLE_EVENTS, shipmentPlanner } from '../../src';

let rules: Map<string, SubjectRules>;
beforeAll(async () => {
  rules = await loadSubjectRules();
});

const messageIdOf = (subject: string, body: unknown): string =>
  parseEvent({ subject, body }, 'here', rules).messageId;

describe('the subjects the send tool knows', () => {
  it('are those the consumers of the app read, each with its consumers’ schemas', () => {
    // The catalogue's events come from outside the app; the shipment planner's are published by
    // the stock reserver, and have no catalogue entry. Consumers of the user's own (new:consumer)
    // add their subjects, and their schemas to a subject they read too (fan-out).
    const sample = [
      ...Object.values(SAMPLE_EVENTS).map((event) => ({ subject: event.subject, consumer: event.consumer })),
      ...bindingOf(shipmentPlanner.name, topology).subjects.map((subject) => ({
        subject,
        consumer: shipmentPlanner.name,
      })),
    ];
    expect(sample.length).toBeGreaterThan(0);
    expect(
      sample.filter(({ subject, consumer }) => rules.get(subject)?.schemas.has(consumer) !== true),
    ).toEqual([]);
  });
});

describe('MessageIds of business events', () => {
  it('follow the sample catalogue: the same for the same event, different between events', () => {
    const payment = { paymentId: 'PAY-1', invoiceId: 'INV-1', amount: 1, currency: 'EUR' as const };

    expect(messageIdOf('PaymentReceived', payment)).toBe('payment-PAY-1');
    expect(messageIdOf('PaymentReceived', { ...payment, amount: 2 })).toBe('payment-PAY-1');
    expect(messageIdOf('OrderCreated', { orderId: 'O-1', productId: 'S', quantity: 1 })).toBe('order-O-1');
    expect(
      [3, 4].map((version) =>
        messageIdOf('InvoiceStatusChanged', { invoiceId: 'INV-1', status: 'Paid', version }),
      ),
    ).toEqual(['invoice-status-INV-1-v3', 'invoice-status-INV-1-v4']);
  });

  it('of an event the app publishes itself, sent by hand, derive from its body (the outbox derives its own)', () => {
    const reserved = { orderId: 'O-1', productId: 'S', quantity: 1 };

    expect(messageIdOf('StockReserved', reserved)).toMatch(/^StockReserved-[0-9a-f]{40}$/);
    expect(messageIdOf('StockReserved', reserved)).not.toBe(
      messageIdOf('StockReserved', { ...reserved, quantity: 2 }),
    );
    expect(messageIdOf('BackorderCreated', { ...reserved, reason: 'unknown-product' })).toMatch(
      /^BackorderCreated-[0-9a-f]{40}$/,
    );
  });

  it('of a subject without a rule, derive from the validated body: same event, same MessageId', () => {
    const own = new Map<string, SubjectRules>([
      ['ParcelShipped', { schemas: new Map([['shipping.counter', z.object({ id: z.string() })]]) }],
    ]);
    const id = (body: unknown): string =>
      parseEvent({ subject: 'ParcelShipped', body }, 'here', own).messageId;

    expect(id({ id: 'A' })).toBe(id({ id: 'A', ignored: true }));
    expect(id({ id: 'A' })).not.toBe(id({ id: 'B' }));
    expect(id({ id: 'A' })).toMatch(/^ParcelShipped-[0-9a-f]{40}$/);
  });
});

describe('parsing events', () => {
  it('validates the body with the schema of every consumer of its subject, naming the one that refuses it', () => {
    const two = new Map<string, SubjectRules>([
      [
        'S',
        {
          schemas: new Map([
            ['a.lenient', z.object({ id: z.string() })],
            ['b.strict', z.object({ id: z.string(), n: z.number() })],
          ]),
        },
      ],
    ]);

    expect(() => parseEvent({ subject: 'OrderCreated', body: { orderId: 'O-1' } }, 'here', rules)).toThrow(
      /here: invalid event:\n {2}- productId/,
    );
    expect(() => parseEvent({ subject: 'S', body: { id: 'x' } }, 'here', two)).toThrow(
      /here: invalid event for b\.strict:\n {2}- n:/,
    );
    expect(() => parseEvent({ subject: 'Refund', body: {} }, 'here', rules)).toThrow(
      /subject must be one a consumer reads \(.*PaymentReceived.*\); got "Refund"/,
    );
  });

  it('refuses a MessageId Service Bus would refuse', () => {
    const body = { orderId: 'O-1', productId: 'S', quantity: 1 };

    expect(() =>
      parseEvent({ subject: 'OrderCreated', body, messageId: 'x'.repeat(129) }, 'here', rules),
    ).toThrow(UsageError);
    expect(
      parseEvent({ subject: 'OrderCreated', body, messageId: 'x'.repeat(128) }, 'here', rules).messageId,
    ).toHaveLength(128);
  });

  it('names the line of a JSON Lines file that is not JSON or has unknown fields', () => {
    expect(() => parseEventLines('{"subject": "OrderCreated",\n', 'e.jsonl', rules)).toThrow(
      /e\.jsonl:1: not JSON/,
    );
    expect(() =>
      parseEventLines(
        '{"subject":"OrderCreated","body":{"orderId":"O","productId":"S","quantity":1},"label":"x"}',
        'e.jsonl',
        rules,
      ),
    ).toThrow(/e\.jsonl:1: unexpected field\(s\) label/);
    expect(() => parseEventLines('\n\n', 'e.jsonl', rules)).toThrow(/has no events/);
  });
});
