import { PAYMENTS, receive, TOPIC, usePeer } from '@idempotent-consumers/local-azure';

import { captured, peek, UNREACHABLE } from '../../src/testing/tools';

/**
 * `npm run peek` against the local peer through the real SDK. --topic names the peer's topic, so
 * these tests do not depend on src/topology.json (nor on the sample's events).
 */
const SECRET = 'card 4111 1111 1111 1111';
const fixture = usePeer({ maxDeliveryCount: 3 });
let env: Record<string, string>;

beforeEach(async () => {
  env = { SERVICEBUS_CONNECTION_STRING: fixture.peer.connectionString };
  const sender = fixture.client.createSender(TOPIC);
  for (const id of ['m-1', 'm-2', 'm-3']) {
    await sender.sendMessages({ body: { id, note: SECRET }, messageId: id, subject: 'PaymentReceived' });
  }
  await sender.close();
});

const rowOf = (lines: string[], messageId: string): string | undefined =>
  lines.find((line) => line.includes(` ${messageId} `));

describe('peek a subscription', () => {
  it('prints one line per message, with its size and hash but not its content', async () => {
    const run = captured(env);

    const code = await peek([PAYMENTS, '--topic', TOPIC], run.context);

    expect(code).toBe(0);
    expect(run.out[0]).toMatch(
      /^business-events\/Subscriptions\/billing\.payment-applier on .*: 3 message\(s\)/,
    );
    expect(run.out[1]).toMatch(/^seq\s+messageId\s+subject\s+enqueued \(UTC\)\s+deliveries\s+body$/);
    expect(rowOf(run.out, 'm-1')).toMatch(
      /^\d+\s+m-1\s+PaymentReceived\s+\d{4}-\d\d-\d\dT\S+Z\s+0\s+\d+ B sha256:[0-9a-f]{16}$/,
    );
    expect(run.out).toHaveLength(5);
    expect(run.out.join('\n')).not.toContain('4111');
  });

  it('locks and settles nothing: a receiver gets every message afterwards, on its first delivery', async () => {
    await peek([PAYMENTS, '--topic', TOPIC], captured(env).context);
    const receiver = fixture.receiver(PAYMENTS);
    const received = await receive(receiver, 3);

    expect(received.map((m) => [m.messageId, m.deliveryCount])).toEqual([
      ['m-1', 0],
      ['m-2', 0],
      ['m-3', 0],
    ]);
  });

  it('shows a message a consumer holds locked, and does not count a delivery', async () => {
    const consumer = fixture.receiver(PAYMENTS);
    const [held] = await receive(consumer, 1);
    const run = captured(env);

    await peek([PAYMENTS, '--topic', TOPIC], run.context);
    await consumer.abandonMessage(held!);
    const [again] = await receive(fixture.receiver(PAYMENTS), 1);

    expect(rowOf(run.out, 'm-1')).toMatch(/Z\s+0\s+\d+ B/);
    expect(again).toMatchObject({ messageId: 'm-1', deliveryCount: 1 });
  });

  it('--max shows the oldest n and says there may be more', async () => {
    const run = captured(env);

    await peek([PAYMENTS, '--topic', TOPIC, '--max', '2'], run.context);

    expect(run.out[0]).toContain('2 message(s) (the oldest 2; --max shows more)');
    expect(rowOf(run.out, 'm-2')).toBeDefined();
    expect(rowOf(run.out, 'm-3')).toBeUndefined();
  });
});

describe('peek a dead-letter queue', () => {
  beforeEach(async () => {
    const receiver = fixture.receiver(PAYMENTS);
    const [first] = await receive(receiver, 1);
    await receiver.deadLetterMessage(first!, {
      deadLetterReason: 'schema-violation',
      deadLetterErrorDescription: `amount: must be positive\n${'x'.repeat(200)}`,
    });
  });

  it('shows the reason and a bounded description, and leaves the message there', async () => {
    const run = captured(env);

    const code = await peek([PAYMENTS, '--topic', TOPIC, '--dead-letter'], run.context);
    const [again] = await receive(fixture.receiver(PAYMENTS, true), 1);

    expect(code).toBe(0);
    expect(run.out[0]).toMatch(/billing\.payment-applier\/\$DeadLetterQueue on .*: 1 message\(s\)/);
    const row = rowOf(run.out, 'm-1')!;
    expect(row).toMatch(/\s0\s+\d+ B sha256:[0-9a-f]{16}\s+schema-violation\s+amount: must be positive x+…$/);
    expect(row.length).toBeLessThan(300);
    expect(again).toMatchObject({ messageId: 'm-1', deliveryCount: 0 });
  });
});

describe('usage', () => {
  it.each([
    [[], /Say which subscription to peek/],
    [[PAYMENTS, 'extra'], /Unexpected arguments: extra/],
    [[PAYMENTS, '--max', '0'], /--max must be an integer from 1 to 1000; got '0'/],
    [[PAYMENTS, '--max', 'lots'], /--max must be an integer/],
    [['no-such-subscription'], /not a subscription in src\/topology.json/],
    [[PAYMENTS, '--lock'], /Unknown option '--lock'/],
  ])('refuses %j with the usage and exit code 2, before connecting', async (argv, message) => {
    const run = captured({ SERVICEBUS_CONNECTION_STRING: UNREACHABLE });

    const code = await peek(argv, run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toMatch(message);
    expect(run.err.join('\n')).toContain('Usage:');
    expect(run.out).toEqual([]);
  });
});
