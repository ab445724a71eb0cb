import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { runTool, type ToolContext } from '../../tools/cli';
import { main } from '../../tools/send';
import { ORDERS, PAYMENTS, peekAll, TOPIC, usePeer } from '../offline/servicebus/amqp/support';
import { captured } from './support';

const send = (argv: string[], context: ToolContext): Promise<number> => runTool('send', main, argv, context);

const fixture = usePeer();
let env: Record<string, string>;
beforeEach(() => {
  env = { SERVICEBUS_CONNECTION_STRING: fixture.peer.connectionString };
});

async function queued(
  subscription: string,
): Promise<{ messageId: unknown; subject: unknown; body: unknown }[]> {
  const receiver = fixture.client.createReceiver(TOPIC, subscription);
  try {
    return (await peekAll(receiver)).map((message) => ({
      messageId: message.messageId,
      subject: message.subject,
      body: message.body as unknown,
    }));
  } finally {
    await receiver.close();
  }
}

describe('send: events from flags', () => {
  it('publishes a PaymentReceived with its Subject and a MessageId derived from the payment', async () => {
    const run = captured(env);

    const code = await send(
      ['payment', '--invoice', 'INV-1', '--payment', 'PAY-1', '--amount', '12.50', '--currency', 'EUR'],
      run.context,
    );

    expect(code).toBe(0);
    expect(await queued(PAYMENTS)).toEqual([
      {
        messageId: 'payment-PAY-1',
        subject: 'PaymentReceived',
        body: { invoiceId: 'INV-1', paymentId: 'PAY-1', amount: 12.5, currency: 'EUR' },
      },
    ]);
    expect(await queued(ORDERS)).toEqual([]);
    expect(run.out.join('\n')).toContain('sent PaymentReceived messageId=payment-PAY-1 to business-events');
  });

  it('publishes OrderCreated and InvoiceStatusChanged to the subscriptions that filter on them', async () => {
    await send(['order', '--order', 'O-7', '--product', 'SKU-1', '--quantity', '3'], captured(env).context);
    await send(['status', '--invoice', 'INV-1', '--status', 'Paid', '--version', '4'], captured(env).context);

    const statuses = fixture.client.createReceiver(TOPIC, 'billing.invoice-status-projector');
    const [status] = await peekAll(statuses);
    await statuses.close();

    expect(await queued(ORDERS)).toEqual([
      {
        messageId: 'order-O-7',
        subject: 'OrderCreated',
        body: { orderId: 'O-7', productId: 'SKU-1', quantity: 3 },
      },
    ]);
    expect(status).toMatchObject({ messageId: 'invoice-status-INV-1-v4', subject: 'InvoiceStatusChanged' });
  });

  it('--repeat sends the same MessageId again, and the broker keeps one copy', async () => {
    const run = captured(env);

    const code = await send(
      [
        'payment',
        '--invoice',
        'INV-1',
        '--payment',
        'PAY-2',
        '--amount',
        '5',
        '--currency',
        'USD',
        '--repeat',
        '3',
      ],
      run.context,
    );

    expect(code).toBe(0);
    expect((await queued(PAYMENTS)).map((m) => m.messageId)).toEqual(['payment-PAY-2']);
    expect(fixture.peer.broker.topic(TOPIC).stats).toMatchObject({ sent: 3, droppedAsDuplicate: 2 });
    expect(run.out.filter((line) => line.startsWith('sent '))).toHaveLength(3);
    expect(run.out.join('\n')).toMatch(/duplicate detection window/);
  });
});

describe('send: any subject a consumer reads', () => {
  it('--subject and --body: validated by the consumers of the subject, with the MessageId rule of the event', async () => {
    const run = captured(env);

    const code = await send(
      ['--subject', 'OrderCreated', '--body', '{"orderId":"O-8","productId":"SKU-1","quantity":2}'],
      run.context,
    );
    const refused = captured(env);
    const unknown = await send(['--subject', 'Refund', '--body', '{}'], refused.context);

    expect(code).toBe(0);
    expect((await queued(ORDERS)).map((m) => m.messageId)).toEqual(['order-O-8']);
    expect(unknown).toBe(2);
    expect(refused.err.join('\n')).toMatch(/subject must be one a consumer reads/);
  });
});

describe('send: events from a JSON Lines file', () => {
  it('sends every line, honouring a given messageId', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'send-'));
    const file = join(directory, 'events.jsonl');
    await writeFile(
      file,
      [
        '{"subject":"PaymentReceived","body":{"paymentId":"P-9","invoiceId":"I-9","amount":1.25,"currency":"GBP"}}',
        '',
        '{"subject":"OrderCreated","body":{"orderId":"O-9","productId":"S-9","quantity":1},"messageId":"legacy-42"}',
      ].join('\n'),
    );

    const code = await send(['--file', file], captured(env).context);

    expect(code).toBe(0);
    expect((await queued(PAYMENTS)).map((m) => m.messageId)).toEqual(['payment-P-9']);
    expect((await queued(ORDERS)).map((m) => m.messageId)).toEqual(['legacy-42']);
  });

  it('names the file and line of an invalid event, and sends nothing', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'send-'));
    const file = join(directory, 'events.jsonl');
    await writeFile(
      file,
      [
        '{"subject":"OrderCreated","body":{"orderId":"O-1","productId":"S-1","quantity":1}}',
        '{"subject":"OrderCreated","body":{"orderId":"O-2","productId":"S-1","quantity":-1}}',
      ].join('\n'),
    );
    const run = captured(env);

    const code = await send(['--file', file], run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toContain(`${file}:2`);
    expect(run.err.join('\n')).toContain('quantity');
    expect(await queued(ORDERS)).toEqual([]);
  });
});

describe('send: bad input and unsafe configuration', () => {
  it.each([
    [
      ['payment', '--invoice', 'INV-1', '--payment', 'P', '--amount', '12.345', '--currency', 'EUR'],
      /two decimals/,
    ],
    [
      ['payment', '--invoice', 'INV-1', '--payment', 'P', '--amount', 'lots', '--currency', 'EUR'],
      /--amount must be a number/,
    ],
    [['payment', '--invoice', 'INV-1', '--amount', '1', '--currency', 'EUR'], /needs --payment/],
    [
      ['order', '--order', 'O', '--product', 'S', '--quantity', '1', '--currency', 'EUR'],
      /does not take --currency/,
    ],
    [['refund', '--invoice', 'INV-1'], /payment, order, status/],
    [['status', '--invoice', 'INV/1', '--status', 'Paid', '--version', '1'], /invoiceId/],
    [['payment', '--bogus'], /bogus/],
  ])('refuses %j with a clear message and sends nothing', async (argv, message) => {
    const run = captured(env);

    const code = await send(argv, run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toMatch(message);
    expect(fixture.peer.broker.topic(TOPIC).stats.sent).toBe(0);
  });

  it('refuses a connection string that is not for the emulator, and says what to use instead', async () => {
    const run = captured({
      SERVICEBUS_CONNECTION_STRING:
        'Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=c2VjcmV0',
    });

    const code = await send(['order', '--order', 'O', '--product', 'S', '--quantity', '1'], run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toMatch(/UseDevelopmentEmulator=true/);
    expect(run.err.join('\n')).toMatch(/SERVICEBUS_NAMESPACE/);
  });

  it('says how to connect when nothing is configured', async () => {
    const run = captured({});

    const code = await send(['order', '--order', 'O', '--product', 'S', '--quantity', '1'], run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toMatch(/SERVICEBUS_NAMESPACE=<name>\.servicebus\.windows\.net/);
  });
});
