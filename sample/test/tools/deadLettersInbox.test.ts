import type { ServiceBusReceiver } from '@azure/service-bus';
import { appFunctions } from '@idempotent-consumers/devkit';
import { captured, deadLetters } from '@idempotent-consumers/devkit/internal/testing/tools';
import {
  type FunctionApp,
  loadFunctionApp,
  loggedOutcome,
  PAYMENTS,
  peekAll,
  PEER_TOPOLOGY,
  receive,
  TOPIC,
  useLocalStack,
  usePeer,
} from '@idempotent-consumers/local-azure';

/**
 * The dead-letter tool with the consumers' inbox: the local AMQP peer holds the dead letters, the
 * local Cosmos server holds the markers, and the markers are written by the app itself (the payment
 * applier, invoked through the Functions worker path), so the tool must find them exactly where the
 * app puts them.
 */
const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

const stack = useLocalStack();
let app: FunctionApp;
const PLANNER = 'shipping.shipment-planner';
const [events] = PEER_TOPOLOGY.topics;
const fixture = usePeer({
  topology: {
    topics: [
      {
        ...events!,
        subscriptions: [
          ...events!.subscriptions,
          { name: PLANNER, subjects: ['StockReserved', 'BackorderCreated'] },
        ],
      },
    ],
  },
});
let env: Record<string, string>;
/** Each test uses its own payment ids, so the markers of one test (same container) do not meet another's. */
let run = 0;

beforeAll(async () => {
  app = await loadFunctionApp(appFunctions());
});
beforeEach(() => {
  run++;
  env = {
    SERVICEBUS_CONNECTION_STRING: fixture.peer.connectionString,
    COSMOS_ENDPOINT: stack.server.endpoint,
    COSMOS_KEY: stack.server.key,
    COSMOS_DATABASE: 'app',
    COSMOS_CONTAINER: 'state',
  };
});

const messageId = (name: string): string => `payment-${name}-${run}`;
const body = (name: string, amount = 10): string =>
  JSON.stringify({ paymentId: `${name}-${run}`, invoiceId: `INV-${run}`, amount, currency: 'EUR' });

/** The app applies a payment: the real handler, through the worker, writes its marker. */
async function apply(id: string, text: string): Promise<void> {
  const result = await app.invokeServiceBus('billing-payment-applier', {
    body: text,
    messageId: id,
    subject: 'PaymentReceived',
    enqueuedTimeUtc: new Date(fixture.clock.now()),
  });
  expect(result.error).toBeUndefined();
  expect(loggedOutcome(result.logs)).toMatch(/^(processed|alternative)$/);
}

/** Publishes messages to the peer and dead-letters them, as a consumer that gave up would. */
async function deadLetter(...messages: { id: string; text: string }[]): Promise<void> {
  const sender = fixture.client.createSender(TOPIC);
  for (const { id, text } of messages) {
    await sender.sendMessages({
      body: Buffer.from(text),
      messageId: id,
      subject: 'PaymentReceived',
      contentType: 'application/json',
    });
  }
  await sender.close();
  const receiver = receiverFor(false);
  for (const message of await receive(receiver, messages.length)) {
    await receiver.deadLetterMessage(message, {
      deadLetterReason: 'MaxDeliveryCountExceeded',
      deadLetterErrorDescription: 'gave up',
    });
  }
}

const receiverFor = (deadLetterQueue: boolean): ServiceBusReceiver =>
  fixture.receiver(PAYMENTS, deadLetterQueue);

async function ids(deadLetterQueue: boolean): Promise<unknown[]> {
  return (await peekAll(receiverFor(deadLetterQueue))).map((message) => message.messageId);
}

const rowOf = (out: string[], id: string): string | undefined => out.find((line) => line.includes(`${id} `));

/** Applied, payload mismatch, not applied, and one the consumer cannot read. */
async function seedEveryState(): Promise<void> {
  await apply(messageId('A'), body('A'));
  await apply(messageId('M'), body('M', 10));
  await deadLetter(
    { id: messageId('A'), text: body('A') },
    { id: messageId('M'), text: body('M', 20) },
    { id: messageId('N'), text: body('N') },
    { id: messageId('P'), text: body('P', -1) },
  );
}

describe('list', () => {
  it("shows each dead letter's state in its consumer's inbox", async () => {
    await seedEveryState();
    const out = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['list', PAYMENTS], out.context);

    expect(code).toBe(0);
    expect(out.out.join('\n')).toContain(`Inbox: ${stack.server.endpoint} app/state`);
    expect(rowOf(out.out, messageId('A'))).toMatch(/\sapplied\s/);
    expect(rowOf(out.out, messageId('M'))).toMatch(/\spayload-mismatch\s/);
    expect(rowOf(out.out, messageId('N'))).toMatch(/\snot-applied\s/);
    expect(rowOf(out.out, messageId('P'))).toMatch(/\spoison \(schema-violation\)\s/);
    // Never the body: list is not show.
    expect(out.out.join('\n')).not.toContain('"amount"');
  });

  it('says unknown once a marker could have been purged (INBOX_RETENTION after the enqueued time)', async () => {
    await seedEveryState();
    // The operator looks 31 days later (INBOX_RETENTION is P30D): a missing marker proves nothing.
    const out = captured(env, () => fixture.clock.now() + 31 * DAY_MS);

    await deadLetters(['list', PAYMENTS], out.context);

    expect(rowOf(out.out, messageId('N'))).toMatch(/\sunknown\s/);
    expect(rowOf(out.out, messageId('A'))).toMatch(/\sapplied\s/);
  });

  it('finds the marker of a MessageId the worker turns into a lossy number, and tells two such ids apart', async () => {
    // Both ids JSON-parse to 123456789012345680000: the app keys their markers by payload hash too.
    const [first, second] = [`123456789012345678901${run}`, `123456789012345678902${run}`];
    await apply(first, body('L1'));
    await deadLetter({ id: first, text: body('L1') }, { id: second, text: body('L2') });
    const out = captured(env, () => fixture.clock.now());

    await deadLetters(['list', PAYMENTS], out.context);

    expect(rowOf(out.out, first)).toMatch(/\sapplied\s/);
    expect(rowOf(out.out, second)).toMatch(/\snot-applied\s/);
  });

  it('shows when the broker stops dropping a resubmitted copy: enqueued + window + clock-skew margin', async () => {
    await deadLetter({ id: messageId('N'), text: body('N') });
    const [message] = await peekAll(receiverFor(true));
    const out = captured(env, () => fixture.clock.now());

    await deadLetters(['list', PAYMENTS, '--clock-skew', 'PT10M'], out.context);

    const expected = new Date(message!.enqueuedTimeUtc!.getTime() + 70 * MINUTE_MS).toISOString();
    expect(rowOf(out.out, messageId('N'))).toMatch(new RegExp(`\\s${expected}$`));
  });
});

describe('a message its consumer read and rejected', () => {
  const reserved = (): { id: string; text: string } => ({
    id: `reserved-${run}`,
    // A backorder's body under the Subject StockReserved: the planner's handler rejects it as poison.
    text: JSON.stringify({ orderId: `O-${run}`, productId: 'SKU-1', quantity: 1, reason: 'unknown-product' }),
  });

  /** The app's last delivery (the tenth) rejects it and notes why; the broker dead-letters it. */
  async function rejectAndDeadLetter(): Promise<string> {
    const { id, text } = reserved();
    const result = await app.invokeServiceBus('shipping-shipment-planner', {
      body: text,
      messageId: id,
      subject: 'StockReserved',
      deliveryCount: 10,
      enqueuedTimeUtc: new Date(fixture.clock.now()),
    });
    expect(loggedOutcome(result.logs)).toBe('poison');
    const sender = fixture.client.createSender(TOPIC);
    await sender.sendMessages({ body: Buffer.from(text), messageId: id, subject: 'StockReserved' });
    await sender.close();
    const receiver = fixture.receiver(PLANNER);
    const [message] = await receive(receiver, 1);
    await receiver.deadLetterMessage(message!, {
      deadLetterReason: 'MaxDeliveryCountExceeded',
      deadLetterErrorDescription: '',
    });
    return id;
  }

  it('is listed as rejected, with the reason its failure note records and what a resubmit would do', async () => {
    const id = await rejectAndDeadLetter();
    const out = captured(env, () => fixture.clock.now());

    await deadLetters(['list', PLANNER], out.context);

    expect(rowOf(out.out, id)).toMatch(/\srejected \(rejected-by-handler; delivery 10, \d{4}-[^)]+\)\s/);
    expect(out.out).toContainEqual(
      expect.stringMatching(
        /^rejected: its consumer read it and rejected it as poison .* without --include-poison$/,
      ),
    );
  });

  it('is not resubmitted without --include-poison, and is with it', async () => {
    const id = await rejectAndDeadLetter();
    fixture.clock.advance(66 * MINUTE_MS);
    const refused = captured(env, () => fixture.clock.now());

    const refusedCode = await deadLetters(['resubmit', PLANNER, '--all'], refused.context);
    const deadLettered = (await peekAll(fixture.receiver(PLANNER, true))).map((m) => m.messageId);
    const includedCode = await deadLetters(
      ['resubmit', PLANNER, '--all', '--include-poison'],
      captured(env, () => fixture.clock.now()).context,
    );

    expect(refusedCode).toBe(1);
    expect(refused.out.join('\n')).toMatch(
      new RegExp(
        `refused #\\d+ messageId=${id} .*: rejected \\(rejected-by-handler; .*--include-poison resubmits it`,
      ),
    );
    expect(deadLettered).toEqual([id]);
    expect(includedCode).toBe(0);
    expect((await peekAll(fixture.receiver(PLANNER))).map((m) => m.messageId)).toEqual([id]);
  });
});

describe('resubmit', () => {
  it('completes applied ones without sending, refuses a payload mismatch, resubmits the rest', async () => {
    await seedEveryState();
    fixture.clock.advance(66 * MINUTE_MS);
    const out = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['resubmit', PAYMENTS, '--all'], out.context);

    const text = out.out.join('\n');
    expect(code).toBe(1);
    expect(text).toMatch(
      new RegExp(`already applied #\\d+ messageId=${messageId('A')} .*completed, not resubmitted`),
    );
    expect(text).toMatch(new RegExp(`refused #\\d+ messageId=${messageId('M')} .*payload mismatch`));
    expect(text).toMatch(
      new RegExp(
        `refused #\\d+ messageId=${messageId('P')} .*: poison \\(schema-violation\\); its consumer cannot read it`,
      ),
    );
    expect(await ids(true)).toEqual([messageId('M'), messageId('P')]);
    expect(await ids(false)).toEqual([messageId('N')]);
  });

  it('resubmits a poison message with --include-poison (once its consumer takes it)', async () => {
    await seedEveryState();
    fixture.clock.advance(66 * MINUTE_MS);

    const code = await deadLetters(
      ['resubmit', PAYMENTS, '--message-id', messageId('P'), '--include-poison'],
      captured(env, () => fixture.clock.now()).context,
    );

    expect(code).toBe(0);
    expect(await ids(false)).toEqual([messageId('P')]);
  });

  it('resubmits a payload mismatch with --force', async () => {
    await seedEveryState();
    fixture.clock.advance(66 * MINUTE_MS);

    const code = await deadLetters(
      ['resubmit', PAYMENTS, '--message-id', messageId('M'), '--force'],
      captured(env, () => fixture.clock.now()).context,
    );

    expect(code).toBe(0);
    expect(await ids(false)).toEqual([messageId('M')]);
    expect(await ids(true)).not.toContain(messageId('M'));
  });

  it('refuses a message whose Subject no subscription takes, and leaves it in the dead-letter queue', async () => {
    // As a filter changed since would have left it: dead-lettered under a Subject nothing takes now.
    const now = fixture.clock.now();
    fixture.peer.broker.subscription(TOPIC, PAYMENTS).deadLetterQueue.enqueue({
      body: body('R'),
      messageId: messageId('R'),
      subject: 'PaymentRecieved',
      sequenceNumber: 1_000_000,
      enqueuedAt: now,
      expiresAt: now + DAY_MS,
      deliveryCount: 10,
      deadLetter: { reason: 'MaxDeliveryCountExceeded', description: '', at: now },
    });
    fixture.clock.advance(66 * MINUTE_MS);
    const out = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['resubmit', PAYMENTS, '--all', '--force'], out.context);

    expect(code).toBe(1);
    expect(out.out.join('\n')).toMatch(
      /refused #1000000 .*no subscription of business-events takes this Subject/,
    );
    expect(await ids(true)).toEqual([messageId('R')]);
    expect(fixture.peer.broker.topic(TOPIC).stats.sent).toBe(0);
  });

  describe('the clock-skew margin at the end of the duplicate window', () => {
    // The message is 58 minutes old by the broker's clock; the operator's clock runs 2 minutes fast.
    const operatorClock = (): number => fixture.clock.now() + 2 * MINUTE_MS + 1_000;

    beforeEach(async () => {
      await deadLetter({ id: messageId('N'), text: body('N') });
      fixture.clock.advance(58 * MINUTE_MS);
    });

    it('refuses by default, and says from when', async () => {
      const out = captured(env, operatorClock);

      const code = await deadLetters(['resubmit', PAYMENTS, '--all'], out.context);

      expect(code).toBe(1);
      expect(out.out.join('\n')).toMatch(/plus the clock-skew margin \(PT5M\)\. Resubmit it from/);
      expect(await ids(true)).toEqual([messageId('N')]);
      expect(fixture.peer.broker.topic(TOPIC).stats.droppedAsDuplicate).toBe(0);
    });

    it('without a margin the copy is sent into the window: dropped, and the message is lost', async () => {
      // What the margin prevents, shown on the peer.
      const code = await deadLetters(
        ['resubmit', PAYMENTS, '--all', '--clock-skew', 'PT0S'],
        captured(env, operatorClock).context,
      );

      expect(code).toBe(0);
      expect(fixture.peer.broker.topic(TOPIC).stats.droppedAsDuplicate).toBe(1);
      expect(await ids(true)).toEqual([]);
      expect(await ids(false)).toEqual([]);
    });
  });

  it('--dry-run shows every decision and changes nothing', async () => {
    await seedEveryState();
    fixture.clock.advance(66 * MINUTE_MS);
    const before = (await peekAll(receiverFor(true))).map((m) => [m.messageId, m.deliveryCount]);
    const sent = fixture.peer.broker.topic(TOPIC).stats.sent;
    const out = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['resubmit', PAYMENTS, '--all', '--dry-run'], out.context);

    const text = out.out.join('\n');
    expect(code).toBe(1);
    expect(text).toMatch(
      new RegExp(`would complete #\\d+ messageId=${messageId('A')} .*without resubmitting`),
    );
    expect(text).toMatch(new RegExp(`would resubmit #\\d+ messageId=${messageId('N')}`));
    expect(text).toMatch(new RegExp(`refused #\\d+ messageId=${messageId('M')} .*payload mismatch`));
    expect(text).toContain('Dry run: nothing was sent, completed or locked.');
    expect((await peekAll(receiverFor(true))).map((m) => [m.messageId, m.deliveryCount])).toEqual(before);
    expect(fixture.peer.broker.topic(TOPIC).stats.sent).toBe(sent);
    expect(await ids(false)).toEqual([]);
  });
});

describe('discard', () => {
  /** What is in the dead-letter queue, with each body: a discard must leave the others as they were. */
  async function contents(): Promise<[unknown, unknown][]> {
    return (await peekAll(receiverFor(true))).map((m) => [m.messageId, m.body]);
  }

  it('removes an applied message and a poison one for good, and gives back the others it locked, unchanged', async () => {
    await seedEveryState();
    const out = captured(env, () => fixture.clock.now());

    const code = await deadLetters(
      ['discard', PAYMENTS, '--message-id', messageId('A'), '--message-id', messageId('P')],
      out.context,
    );

    const text = out.out.join('\n');
    expect(code).toBe(0);
    expect(text).toMatch(
      new RegExp(`will discard #\\d+ messageId=${messageId('A')} .*: applied; .*its effect is in place`),
    );
    expect(text).toMatch(
      new RegExp(`discarded #\\d+ messageId=${messageId('P')} .*: completed in the dead-letter queue`),
    );
    // M and N were locked on the way to P: given back.
    expect(text).toMatch(
      /Discarded 2, refused 0, not found 0, failed 0, not received 0; 2 other message\(s\) locked on the way were given back unchanged\./,
    );
    expect(await contents()).toEqual([
      [messageId('M'), JSON.parse(body('M', 20))],
      [messageId('N'), JSON.parse(body('N'))],
    ]);
    expect(await ids(false)).toEqual([]);
  });

  it('refuses a message never applied without --force, and says its effect would never happen', async () => {
    await seedEveryState();
    const before = await contents();
    const out = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['discard', PAYMENTS, '--message-id', messageId('N')], out.context);

    expect(code).toBe(1);
    expect(out.out.join('\n')).toMatch(
      new RegExp(
        `refused #\\d+ messageId=${messageId('N')} .*: not-applied: never applied\\. Discarded, its business effect would never happen; .*--force discards it anyway`,
      ),
    );
    expect(await contents()).toEqual(before);
  });

  it('discards a message never applied with --force', async () => {
    await seedEveryState();
    const out = captured(env, () => fixture.clock.now());

    const code = await deadLetters(
      ['discard', PAYMENTS, '--message-id', messageId('N'), '--force'],
      out.context,
    );

    expect(code).toBe(0);
    expect(out.out.join('\n')).toMatch(
      new RegExp(
        `will discard #\\d+ messageId=${messageId('N')} .*\\(--force\\): not-applied: never applied\\. Its business effect never happens\\.`,
      ),
    );
    expect(await ids(true)).toEqual([messageId('A'), messageId('M'), messageId('P')]);
    expect(await ids(false)).toEqual([]);
  });

  it('--dry-run says what would be discarded and what is refused, and changes nothing', async () => {
    await seedEveryState();
    const before = (await peekAll(receiverFor(true))).map((m) => [m.messageId, m.deliveryCount]);
    const out = captured(env, () => fixture.clock.now());

    const code = await deadLetters(['discard', PAYMENTS, '--all', '--dry-run'], out.context);

    const text = out.out.join('\n');
    expect(code).toBe(1);
    expect(text).toMatch(new RegExp(`would discard #\\d+ messageId=${messageId('A')} `));
    expect(text).toMatch(
      new RegExp(`would discard #\\d+ messageId=${messageId('P')} .*: poison \\(schema-violation\\)`),
    );
    expect(text).toMatch(new RegExp(`refused #\\d+ messageId=${messageId('M')} .*: payload mismatch`));
    expect(text).toMatch(new RegExp(`refused #\\d+ messageId=${messageId('N')} `));
    expect(text).toContain('Dry run: nothing was completed or locked.');
    expect((await peekAll(receiverFor(true))).map((m) => [m.messageId, m.deliveryCount])).toEqual(before);
  });
});
