import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { ServiceBusReceiver } from '@azure/service-bus';
import { writeLocalRun } from '@idempotent-consumers/devkit/internal/build/localRun';
import { captured, deadLetters, UNREACHABLE } from '@idempotent-consumers/devkit/internal/testing/tools';
import { RESUBMITTED_AT_PROPERTY } from '@idempotent-consumers/inbox/internal';
import { PAYMENTS, peekAll, receive, TOPIC, usePeer } from '@idempotent-consumers/local-azure';

/**
 * The operator's dead-letter workflow against the local peer: list on Monday, resubmit on Thursday.
 * Thursday is reached by jumping the peer's clock, and the tool reads the same clock.
 */
const HOUR_MS = 3_600_000;
/** Past the duplicate window (PT1H) and the default clock-skew margin (PT5M). */
const PAST_WINDOW_MS = HOUR_MS + 6 * 60_000;
const payment = (id: string): object => ({ paymentId: id, invoiceId: 'INV-1', amount: 10, currency: 'EUR' });

const fixture = usePeer({ maxDeliveryCount: 3 });
let env: Record<string, string>;

beforeEach(async () => {
  env = { SERVICEBUS_CONNECTION_STRING: fixture.peer.connectionString };
  await seedDeadLetters();
});

const receiverFor = (deadLetter: boolean): ServiceBusReceiver => fixture.receiver(PAYMENTS, deadLetter);

/**
 * Two dead letters, the two ways messages get there: PAY-1 dead-lettered by its consumer (poison),
 * PAY-2 abandoned until maxDeliveryCount ran out. PAY-1 carries every property a resubmit must keep.
 */
async function seedDeadLetters(): Promise<void> {
  const sender = fixture.client.createSender(TOPIC);
  await sender.sendMessages({
    body: payment('PAY-1'),
    messageId: 'payment-PAY-1',
    subject: 'PaymentReceived',
    correlationId: 'checkout-17',
    contentType: 'application/json',
    applicationProperties: { tenant: 'contoso', schemaVersion: 2 },
  });
  await sender.sendMessages({
    body: payment('PAY-2'),
    messageId: 'payment-PAY-2',
    subject: 'PaymentReceived',
  });
  await sender.close();

  const receiver = receiverFor(false);
  const [first, second] = await receive(receiver, 2);
  await receiver.deadLetterMessage(first!, {
    deadLetterReason: 'schema-violation',
    deadLetterErrorDescription: 'amount: must be positive',
  });
  await receiver.abandonMessage(second!);
  for (let delivery = 2; delivery <= 3; delivery++) {
    const [again] = await receive(receiver, 1);
    await receiver.abandonMessage(again!);
  }
}

async function queue(deadLetter: boolean): Promise<{ messageId: unknown; deliveryCount?: number }[]> {
  return (await peekAll(receiverFor(deadLetter))).map(({ messageId, deliveryCount }) => ({
    messageId,
    deliveryCount,
  }));
}

describe('list', () => {
  it('shows every dead letter with its reason, description and delivery count', async () => {
    const run = captured(env);

    const code = await deadLetters(['list', PAYMENTS], run.context);

    const text = run.out.join('\n');
    expect(code).toBe(0);
    expect(text).toContain('2 message(s)');
    expect(run.out.filter((line) => line.startsWith('Inbox state not checked'))).toEqual([
      expect.stringContaining('COSMOS_ENDPOINT is not set'),
    ]);
    // Dead-lettered on its first delivery: Service Bus counts a delivery only when it is abandoned
    // or its lock expires, so 0.
    expect(run.out.find((line) => line.includes('payment-PAY-1'))).toMatch(
      /PaymentReceived\s+schema-violation\s+amount: must be positive\s+0\s/,
    );
    expect(run.out.find((line) => line.includes('payment-PAY-2'))).toMatch(/MaxDeliveryCountExceeded/);
  });

  it('changes nothing: no lock taken, no delivery counted', async () => {
    const before = await queue(true);

    await deadLetters(['list', PAYMENTS], captured(env).context);

    expect(await queue(true)).toEqual(before);
  });
});

describe('show', () => {
  it('prints the body and properties of one message, by MessageId or sequence number', async () => {
    const byId = captured(env);
    const [pay1] = await peekAll(receiverFor(true));

    await deadLetters(['show', PAYMENTS, 'payment-PAY-1'], byId.context);
    const bySequence = captured(env);
    await deadLetters(['show', PAYMENTS, String(pay1!.sequenceNumber)], bySequence.context);

    const text = byId.out.join('\n');
    expect(text).toContain('"paymentId": "PAY-1"');
    expect(text).toMatch(/DeadLetterReason:\s+schema-violation/);
    expect(text).toMatch(/correlationId:\s+checkout-17/);
    expect(text).toContain('"tenant":"contoso"');
    expect(bySequence.out).toEqual(byId.out);
  });

  it('fails clearly for a message that is not there', async () => {
    const run = captured(env);

    const code = await deadLetters(['show', PAYMENTS, 'payment-NOPE'], run.context);

    expect(code).toBe(1);
    expect(run.err.join('\n')).toContain("'payment-NOPE'");
  });
});

describe('the duplicate window', () => {
  /** Past a PT10M window and the clock-skew margin (PT5M), well inside PT1H. */
  const PAST_TEN_MINUTES_MS = 16 * 60_000;

  it('defaults to SERVICEBUS_DUPLICATE_WINDOW when the environment sets it, else PT1H', async () => {
    // A dry run: this peer's own window is PT1H, and a copy sent now would be dropped.
    fixture.clock.advance(PAST_TEN_MINUTES_MS);
    const argv = ['resubmit', PAYMENTS, '--message-id', 'payment-PAY-1', '--dry-run'];
    const tenMinutes = captured({ ...env, SERVICEBUS_DUPLICATE_WINDOW: 'PT10M' }, () => fixture.clock.now());
    const anHour = captured(env, () => fixture.clock.now());

    const codes = [await deadLetters(argv, tenMinutes.context), await deadLetters(argv, anHour.context)];

    expect(codes).toEqual([0, 1]);
    expect(tenMinutes.out).toContainEqual(
      expect.stringMatching(/^would resubmit #\d+ messageId=payment-PAY-1/),
    );
    expect(anHour.out.join('\n')).toMatch(/refused .*duplicate detection window \(PT1H\)/);
  });

  it('--duplicate-window wins over the environment', async () => {
    fixture.clock.advance(PAST_TEN_MINUTES_MS);
    const run = captured({ ...env, SERVICEBUS_DUPLICATE_WINDOW: 'PT10M' }, () => fixture.clock.now());

    const code = await deadLetters(
      ['resubmit', PAYMENTS, '--message-id', 'payment-PAY-1', '--duplicate-window', 'PT1H'],
      run.context,
    );

    expect(code).toBe(1);
    expect(run.out.join('\n')).toMatch(/refused .*duplicate detection window \(PT1H\)/);
  });

  it('comes with the rest of the settings from a running npm start', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'local-run-')), 'local-run.json');
    writeLocalRun(file, {
      pid: process.pid,
      startedAt: new Date().toISOString(),
      environment: { ...env, SERVICEBUS_DUPLICATE_WINDOW: 'PT10M' },
    });
    const run = captured({ LOCAL_RUN_FILE: file });

    const code = await deadLetters(['list', PAYMENTS], run.context);

    expect(code).toBe(0);
    expect(run.err).toEqual([expect.stringContaining('Using the app npm start runs')]);
    expect(run.out.join('\n')).toContain('2 message(s)');
    expect(run.out.join('\n')).toContain('the duplicate window (PT10M)');
  });

  it('refuses a SERVICEBUS_DUPLICATE_WINDOW that is not a duration, naming it', async () => {
    const run = captured({ ...env, SERVICEBUS_DUPLICATE_WINDOW: 'an hour' });

    const code = await deadLetters(['list', PAYMENTS], run.context);

    expect(code).toBe(2);
    expect(run.err.join('\n')).toMatch(/SERVICEBUS_DUPLICATE_WINDOW 'an hour' is not an ISO-8601 duration/);
  });
});

describe('resubmit', () => {
  it('refuses a message still inside the duplicate window, says from when it can go, and leaves everything alone', async () => {
    const run = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['resubmit', PAYMENTS, '--message-id', 'payment-PAY-1'], run.context);

    expect(code).toBe(1);
    expect(run.out.join('\n')).toMatch(
      /refused #\d+ messageId=payment-PAY-1 .* Resubmit it from \d{4}-\d\d-\d\dT/,
    );
    expect((await queue(true)).map((m) => m.messageId)).toEqual(['payment-PAY-1', 'payment-PAY-2']);
    expect(await queue(false)).toEqual([]);
  });

  it('after the window: sends an identical copy to the topic, then completes the dead-lettered one', async () => {
    fixture.clock.advance(PAST_WINDOW_MS);
    const run = captured(env, () => fixture.clock.now());
    const before = fixture.clock.now();

    const code = await deadLetters(['resubmit', PAYMENTS, '--message-id', 'payment-PAY-1'], run.context);
    const after = fixture.clock.now();

    const [resubmitted] = await peekAll(receiverFor(false));
    expect(code).toBe(0);
    expect(resubmitted).toMatchObject({
      messageId: 'payment-PAY-1',
      subject: 'PaymentReceived',
      correlationId: 'checkout-17',
      contentType: 'application/json',
      applicationProperties: { tenant: 'contoso', schemaVersion: 2 },
      body: payment('PAY-1'),
    });
    expect(resubmitted?.applicationProperties).not.toHaveProperty('DeadLetterReason');
    // Marked with the time of the resubmit, for the consumer's duplicate cause.
    const marked = Date.parse(String(resubmitted?.applicationProperties?.[RESUBMITTED_AT_PROPERTY]));
    expect(marked).toBeGreaterThanOrEqual(before);
    expect(marked).toBeLessThanOrEqual(after);
    expect((await queue(true)).map((m) => m.messageId)).toEqual(['payment-PAY-2']);
    expect(run.out.join('\n')).toMatch(/resubmitted #\d+ messageId=payment-PAY-1/);
  });

  it('--all resubmits a message that exhausted maxDeliveryCount too, and the consumer can take it again', async () => {
    fixture.clock.advance(PAST_WINDOW_MS);

    const code = await deadLetters(
      ['resubmit', PAYMENTS, '--all'],
      captured(env, () => fixture.clock.now()).context,
    );
    const receiver = receiverFor(false);
    const again = await receive(receiver, 2);
    await Promise.all(again.map((message) => receiver.completeMessage(message)));

    expect(code).toBe(0);
    expect(again.map((m) => m.messageId)).toEqual(['payment-PAY-1', 'payment-PAY-2']);
    expect(await queue(true)).toEqual([]);
    expect(await queue(false)).toEqual([]);
  });

  it('--dry-run prints the plan and changes nothing', async () => {
    fixture.clock.advance(PAST_WINDOW_MS);
    const before = await queue(true);
    const run = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['resubmit', PAYMENTS, '--all', '--dry-run'], run.context);

    expect(code).toBe(0);
    expect(run.out.filter((line) => line.startsWith('would resubmit'))).toHaveLength(2);
    expect(run.out.join('\n')).toContain('Dry run: nothing was sent, completed or locked.');
    expect(await queue(true)).toEqual(before);
    expect(await queue(false)).toEqual([]);
    expect(fixture.peer.broker.topic(TOPIC).stats.sent).toBe(2);
  });

  it('leaves messages it was not asked for where they are', async () => {
    fixture.clock.advance(PAST_WINDOW_MS);

    await deadLetters(
      ['resubmit', PAYMENTS, '--message-id', 'payment-PAY-2'],
      captured(env, () => fixture.clock.now()).context,
    );

    expect((await queue(true)).map((m) => m.messageId)).toEqual(['payment-PAY-1']);
    expect((await queue(false)).map((m) => m.messageId)).toEqual(['payment-PAY-2']);
  });

  it('--ignore-duplicate-window inside the window loses the message: the broker drops the copy, the original is completed', async () => {
    // Why the window check exists, shown on the peer: this is the outcome it prevents.
    const run = captured(env, () => fixture.clock.now());

    const code = await deadLetters(
      ['resubmit', PAYMENTS, '--message-id', 'payment-PAY-1', '--ignore-duplicate-window'],
      run.context,
    );

    expect(code).toBe(0);
    expect(run.err.join('\n')).toMatch(/warning: --ignore-duplicate-window/);
    expect(fixture.peer.broker.topic(TOPIC).stats.droppedAsDuplicate).toBe(1);
    expect(await queue(false)).toEqual([]);
    expect((await queue(true)).map((m) => m.messageId)).toEqual(['payment-PAY-2']);
  });

  it('reports MessageIds that are not in the dead-letter queue', async () => {
    fixture.clock.advance(PAST_WINDOW_MS);
    const run = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['resubmit', PAYMENTS, '--message-id', 'payment-NOPE'], run.context);

    expect(code).toBe(1);
    expect(run.out.join('\n')).toContain('not found: no dead-lettered message has MessageId payment-NOPE');
    expect((await queue(true)).map((m) => m.messageId)).toEqual(['payment-PAY-1', 'payment-PAY-2']);
  });

  it.each([
    [['resubmit', PAYMENTS], /--message-id <id> \(one or more\) or --all/],
    [['resubmit', PAYMENTS, '--all', '--message-id', 'x'], /not both/],
    [['resubmit', PAYMENTS, '--all', '--duplicate-window', 'an hour'], /--duplicate-window/],
    [['list', PAYMENTS, '--force'], /--force do\(es\) not apply to list/],
    [['show', PAYMENTS], /show needs the MessageId or sequence number/],
    [['show', PAYMENTS, 'a', 'b'], /Unexpected arguments for show/],
    [['list', PAYMENTS, '--clock-skew', '5 minutes'], /--clock-skew '5 minutes' is not an ISO-8601 duration/],
    [['list', 'no-such-subscription'], /not a subscription in src\/topology.json/],
    [['purge', PAYMENTS], /Say what to do/],
  ])(
    'refuses %j with a clear message and the usage, before connecting to anything',
    async (argv, message) => {
      // Nothing listens on this endpoint: a tool that connected first would fail differently.
      const run = captured({
        SERVICEBUS_CONNECTION_STRING: UNREACHABLE,
        COSMOS_ENDPOINT: 'http://127.0.0.1:9/',
        COSMOS_KEY: 'cGxhY2Vob2xkZXIta2V5LWZvci10ZXN0cw==',
      });

      const code = await deadLetters(argv, run.context);

      expect(code).toBe(2);
      expect(run.err.join('\n')).toMatch(message);
      expect(run.err.join('\n')).toContain('Usage:');
      expect(run.out).toEqual([]);
    },
  );
});
