import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { runTool, type ToolContext } from '@idempotent-consumers/devkit';
import { writeLocalRun } from '@idempotent-consumers/devkit/internal/build/localRun';
import { captured } from '@idempotent-consumers/devkit/internal/testing/tools';
import { ToolSide } from '@idempotent-consumers/devkit/internal/tools/console/toolSide';
import { loadSubjectRules, parseEventLines } from '@idempotent-consumers/devkit/internal/tools/events';
import { main } from '@idempotent-consumers/devkit/internal/tools/send';
import {
  ORDERS,
  PAYMENTS,
  peekAll,
  PEER_TOPOLOGY,
  startPeer,
  TOPIC,
  usePeer,
} from '@idempotent-consumers/local-azure';

import { topology } from '../../../src/topology';

const send = (argv: string[], context: ToolContext): Promise<number> => runTool('send', main, argv, context);

const fixture = usePeer();
let env: Record<string, string>;
beforeEach(() => {
  env = { SERVICEBUS_CONNECTION_STRING: fixture.peer.connectionString };
});

/** A JSON Lines file of events in a fresh temporary folder. */
async function eventsFile(lines: string[]): Promise<string> {
  const file = join(await mkdtemp(join(tmpdir(), 'send-')), 'events.jsonl');
  await writeFile(file, lines.join('\n'));
  return file;
}

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
  it('starts a trace for each event: its copies carry it as traceparent and Diagnostic-Id, and the output names it', async () => {
    const run = captured(env);

    await send(
      [
        'payment',
        '--invoice',
        'INV-T',
        '--payment',
        'PAY-T',
        '--amount',
        '1',
        '--currency',
        'EUR',
        '--repeat',
        '2',
      ],
      run.context,
    );
    await send(
      ['payment', '--invoice', 'INV-T', '--payment', 'PAY-U', '--amount', '1', '--currency', 'EUR'],
      run.context,
    );

    const receiver = fixture.client.createReceiver(TOPIC, PAYMENTS);
    const messages = await peekAll(receiver);
    await receiver.close();
    const traces = messages.map((message) => message.applicationProperties?.traceparent);
    const printed = run.out.flatMap((line) => /\(trace ([0-9a-f]{32})\)$/.exec(line)?.[1] ?? []);
    expect(messages.map((message) => message.applicationProperties?.['Diagnostic-Id'])).toEqual(traces);
    expect(
      traces.map((traceparent) => /^00-([0-9a-f]{32})-[0-9a-f]{16}-01$/.exec(String(traceparent))?.[1]),
    ).toEqual([...new Set(printed)]);
    // Repeat copies are one event (one trace; the broker keeps the first), another event starts another.
    expect(printed).toHaveLength(3);
    expect(new Set(printed).size).toBe(2);
  });

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

describe('send: a message no subscription takes', () => {
  const reserved = JSON.stringify({ orderId: 'O-1', productId: 'SKU-1', quantity: 1 });

  it('warns, naming the topic and the subject, when the running npm start has no subscription for it', async () => {
    // The peer serves what npm start loaded (no shipping.shipment-planner yet); src/topology.json has it now.
    const file = join(await mkdtemp(join(tmpdir(), 'local-run-')), 'local-run.json');
    writeLocalRun(file, { pid: process.pid, startedAt: '', environment: env, topology: PEER_TOPOLOGY });
    const run = captured({ LOCAL_RUN_FILE: file });

    const code = await send(['--subject', 'StockReserved', '--body', reserved], run.context);

    expect(code).toBe(0);
    expect(fixture.peer.broker.topic(TOPIC).stats).toMatchObject({ accepted: 1, matchedNoSubscription: 1 });
    expect(run.err.at(-1)).toBe(
      'Warning: no subscription of business-events in the running npm start takes StockReserved: Service Bus ' +
        'reported success and dropped the message(s), as it drops every message no subscription takes. ' +
        'src/topology.json now has a subscription for StockReserved that the running npm start has not loaded (it runs without watch mode): restart it.',
    );
  });

  it('warns from src/topology.json for a --topic none of whose subscriptions takes the subject, once', async () => {
    const shipping = await startPeer({
      topology: { topics: [...PEER_TOPOLOGY.topics, { name: 'shipping-events', subscriptions: [] }] },
    });
    const run = captured({ SERVICEBUS_CONNECTION_STRING: shipping.peer.connectionString });

    const code = await send(
      [
        'order',
        '--order',
        'O-1',
        '--product',
        'SKU-1',
        '--quantity',
        '1',
        '--topic',
        'shipping-events',
        '--repeat',
        '2',
      ],
      run.context,
    ).finally(() => shipping.stop());

    expect(code).toBe(0);
    expect(shipping.peer.broker.topic('shipping-events').stats).toMatchObject({ matchedNoSubscription: 1 });
    expect(run.err).toEqual([
      expect.stringMatching(
        /^Warning: no subscription of shipping-events in src\/topology\.json takes OrderCreated: .*no subscription takes\.$/,
      ),
    ]);
  });

  it('says nothing when a subscription takes every message', async () => {
    const run = captured(env);

    await send(['order', '--order', 'O-2', '--product', 'SKU-1', '--quantity', '1'], run.context);

    expect(fixture.peer.broker.topic(TOPIC).stats.matchedNoSubscription).toBe(0);
    expect(run.err.join('\n')).not.toContain('Warning');
  });
});

describe('send: events from a JSON Lines file', () => {
  it('sends every line, honouring a given messageId', async () => {
    const file = await eventsFile([
      '{"subject":"PaymentReceived","body":{"paymentId":"P-9","invoiceId":"I-9","amount":1.25,"currency":"GBP"}}',
      '',
      '{"subject":"OrderCreated","body":{"orderId":"O-9","productId":"S-9","quantity":1},"messageId":"legacy-42"}',
    ]);

    const code = await send(['--file', file], captured(env).context);

    expect(code).toBe(0);
    expect((await queued(PAYMENTS)).map((m) => m.messageId)).toEqual(['payment-P-9']);
    expect((await queued(ORDERS)).map((m) => m.messageId)).toEqual(['legacy-42']);
  });

  it('names the file and line of an invalid event, and sends nothing', async () => {
    const file = await eventsFile([
      '{"subject":"OrderCreated","body":{"orderId":"O-1","productId":"S-1","quantity":1}}',
      '{"subject":"OrderCreated","body":{"orderId":"O-2","productId":"S-1","quantity":-1}}',
    ]);
    const run = captured(env);

    const code = await send(['--file', file], run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toContain(`${file}:2`);
    expect(run.err.join('\n')).toContain('quantity');
    expect(await queued(ORDERS)).toEqual([]);
  });
});

describe('send: bodies of your own, broken ones on purpose', () => {
  const negative = '{"paymentId":"PAY-5","invoiceId":"INV-1","amount":-5,"currency":"EUR"}';

  it('refuses a body its consumer would refuse, says how to send it anyway, and sends nothing', async () => {
    const run = captured(env);

    const code = await send(['--subject', 'PaymentReceived', '--body', negative], run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toMatch(/invalid event:\n {2}- amount: .*\n\(--allow-invalid sends it anyway/);
    expect(fixture.peer.broker.topic(TOPIC).stats.sent).toBe(0);
  });

  it('--allow-invalid sends it as given, with the MessageId asked for, and says it is expected to be poison', async () => {
    const run = captured(env);

    const code = await send(
      ['--subject', 'PaymentReceived', '--body', negative, '--message-id', 'bad-1', '--allow-invalid'],
      run.context,
    );

    expect(code).toBe(0);
    expect(await queued(PAYMENTS)).toEqual([
      { messageId: 'bad-1', subject: 'PaymentReceived', body: JSON.parse(negative) as unknown },
    ]);
    expect(run.out[0]).toMatch(/^sent PaymentReceived messageId=bad-1 .*; expected to be poison \(amount: /);
    expect(run.out.join('\n')).toContain(`npm run peek -- ${PAYMENTS} --dead-letter`);
  });

  it('--raw-body sends text that is not JSON as its bytes, only with --allow-invalid', async () => {
    const refused = captured(env);
    const refusedCode = await send(
      ['--subject', 'PaymentReceived', '--raw-body', 'PAY-6 paid'],
      refused.context,
    );
    const run = captured(env);

    const code = await send(
      ['--subject', 'PaymentReceived', '--raw-body', 'PAY-6 paid', '--allow-invalid'],
      run.context,
    );

    const [message] = await peekAll(fixture.receiver(PAYMENTS));
    expect(refusedCode).toBe(2);
    expect(refused.err.join('\n')).toMatch(/body: not JSON/);
    expect(code).toBe(0);
    expect(message?.body).toEqual(Buffer.from('PAY-6 paid'));
    expect(message?.messageId).toMatch(/^PaymentReceived-[0-9a-f]{40}$/);
    expect(run.out[0]).toContain('(raw) PAY-6 paid; expected to be poison (body: not JSON)');
  });

  it('--raw-body with JSON the consumer reads is an ordinary event, sent byte for byte', async () => {
    const text = '{ "paymentId": "PAY-7", "invoiceId": "INV-1", "amount": 1, "currency": "EUR" }';

    const code = await send(['--subject', 'PaymentReceived', '--raw-body', text], captured(env).context);

    const [message] = await peekAll(
      fixture.client.createReceiver(TOPIC, PAYMENTS, { skipParsingBodyAsJson: true }),
    );
    expect(code).toBe(0);
    expect(message?.body).toEqual(Buffer.from(text));
    expect(message?.messageId).toBe('payment-PAY-7');
  });

  it('echoes what it sends on one line, cut short', async () => {
    const run = captured(env);

    await send(
      [
        '--subject',
        'PaymentReceived',
        '--raw-body',
        `line one\nline two ${'x'.repeat(500)}`,
        '--allow-invalid',
      ],
      run.context,
    );

    expect(run.out[0]).toContain('(raw) line one line two xxx');
    expect(run.out[0]!.length).toBeLessThan(500);
  });

  it.each([
    [['--subject', 'PaymentReceived', '--body', '{}', '--raw-body', 'x'], /one of --body and --raw-body/],
    [['--subject', 'PaymentReceived'], /one of --body and --raw-body/],
    [['--subject', 'PaymentReceived', '--body', 'PAY-8 paid'], /--body is not JSON .*--raw-body/],
  ])('refuses %j', async (argv, message) => {
    const run = captured(env);

    expect(await send(argv, run.context)).toBe(2);
    expect(run.err.join('\n')).toMatch(message);
  });

  it('a JSON Lines file: rawBody and MessageId per line, its invalid lines only with --allow-invalid', async () => {
    const file = await eventsFile([
      '{"subject":"OrderCreated","messageId":"o-1","body":{"orderId":"O-1","productId":"S-1","quantity":1}}',
      '{"subject":"OrderCreated","messageId":"o-2","rawBody":"O-2 x1"}',
    ]);
    const refused = captured(env);

    const code = await send(['--file', file], refused.context);
    const run = captured(env);
    const allowed = await send(['--file', file, '--allow-invalid'], run.context);

    expect(code).toBe(2);
    expect(refused.err.join('\n')).toContain(`${file}:2: invalid event:\n  - body: not JSON`);
    expect(allowed).toBe(0);
    expect((await queued(ORDERS)).map((m) => m.messageId)).toEqual(['o-1', 'o-2']);
    expect(run.out.filter((line) => line.includes('expected to be poison'))).toEqual([
      expect.stringContaining('messageId=o-2'),
    ]);
    const both = captured(env);
    await writeFile(file, '{"subject":"OrderCreated","messageId":"o-3","body":{},"rawBody":"{}"}');
    expect(await send(['--file', file, '--allow-invalid'], both.context)).toBe(2);
    expect(both.err.join('\n')).toContain(`${file}:1: give a body or a rawBody (one of them)`);
  });
});

describe('send: --dry-run', () => {
  const body = { paymentId: 'PAY-7', invoiceId: 'INV-7', amount: 3, currency: 'EUR' };

  it("says what would be sent, as the console's plan says it, and sends nothing", async () => {
    const run = captured(env);
    const side = new ToolSide({
      serviceBus: fixture.client,
      inbox: 'not connected',
      rules: await loadSubjectRules(),
      duplicateWindowSeconds: 3600,
      clockSkewSeconds: 0,
      now: () => Date.now(),
    });

    const code = await send(
      ['--subject', 'PaymentReceived', '--body', JSON.stringify(body), '--dry-run'],
      run.context,
    );
    const plan = await side.planSend(topology, { subject: 'PaymentReceived', body, allowInvalid: false });

    expect(code).toBe(0);
    expect(fixture.peer.broker.topic(TOPIC).stats.sent).toBe(0);
    expect(run.out).toEqual([...plan.lines, 'Dry run: nothing was sent.']);
    expect(plan.lines.slice(0, 1)).toEqual([
      'would send PaymentReceived messageId=payment-PAY-7 (derived from the event) to business-events',
    ]);
    expect(plan.lines.slice(2)).toEqual([
      `  taken by the filters of ${PAYMENTS}`,
      `  ${PAYMENTS} accepts it`,
    ]);
  });

  it('needs no Service Bus: a file of events, repeated, each planned with its copies', async () => {
    const file = await eventsFile([
      JSON.stringify({ subject: 'PaymentReceived', body }),
      JSON.stringify({ subject: 'OrderCreated', body: { orderId: 'O-1', productId: 'S-1', quantity: 0 } }),
    ]);
    const run = captured({ LOCAL_RUN_FILE: join(tmpdir(), 'no-such-directory', 'local-run.json') });

    const code = await send(['--file', file, '--repeat', '2', '--allow-invalid', '--dry-run'], run.context);

    expect(code).toBe(0);
    const firsts = run.out.filter((line) => line.startsWith('would send '));
    expect(firsts).toEqual([
      'would send PaymentReceived messageId=payment-PAY-7 (derived from the event) to business-events, 2 copies with the same MessageId',
      expect.stringMatching(
        /^would send OrderCreated messageId=\S+ \(derived from the event\) to business-events, 2 copies/,
      ) as string,
    ]);
    expect(run.out).toContainEqual(
      expect.stringMatching(/^ {2}inventory\.stock-reserver refuses it: quantity: /),
    );
    expect(run.out.at(-1)).toBe('Dry run: nothing was sent.');
  });
});

describe('the example events file', () => {
  const EXAMPLE = join(__dirname, '..', '..', 'examples', 'events.jsonl');

  it('parses: an event, the same event again, and poison messages, which send refuses without --allow-invalid', async () => {
    const rules = await loadSubjectRules();
    const text = await readFile(EXAMPLE, 'utf8');

    const events = parseEventLines(text, 'sample/examples/events.jsonl', rules, true);

    expect(events.map((event) => [event.messageId, event.poison !== undefined])).toEqual([
      ['payment-PAY-1', false],
      ['payment-PAY-1', false],
      ['payment-PAY-2', true],
      ['payment-PAY-3', true],
    ]);
    expect(events[1]).toEqual(events[0]);
    expect(() => parseEventLines(text, 'sample/examples/events.jsonl', rules)).toThrow(
      /examples\/events\.jsonl:3: /,
    );
  });

  it('is sent by npm run send -- --file sample/examples/events.jsonl --allow-invalid; the broker drops the repeat', async () => {
    const run = captured(env);

    const code = await send(['--file', EXAMPLE, '--allow-invalid'], run.context);

    expect(code).toBe(0);
    expect((await queued(PAYMENTS)).map((m) => m.messageId)).toEqual([
      'payment-PAY-1',
      'payment-PAY-2',
      'payment-PAY-3',
    ]);
    expect(fixture.peer.broker.topic(TOPIC).stats).toMatchObject({ sent: 4, droppedAsDuplicate: 1 });
    expect(run.out.filter((line) => line.includes('expected to be poison'))).toHaveLength(2);
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
    // No npm start either: its settings file would be read from LOCAL_RUN_FILE, which names nothing.
    const run = captured({ LOCAL_RUN_FILE: join(tmpdir(), 'no-such-directory', 'local-run.json') });

    const code = await send(['order', '--order', 'O', '--product', 'S', '--quantity', '1'], run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toMatch(/SERVICEBUS_NAMESPACE=<name>\.servicebus\.windows\.net/);
  });
});
