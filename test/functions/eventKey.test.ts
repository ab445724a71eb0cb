import { METRIC_NAMES } from '@idempotent-consumers/inbox/internal';
import { documentsIn } from '@idempotent-consumers/inbox/testing';
import {
  type FunctionApp,
  loadFunctionApp,
  type LogLine,
  MetricsSink,
  useLocalStack,
} from '@idempotent-consumers/local-azure';

import { EVENT_KEY_PROBE } from '../support/eventKeyProbe';

/**
 * A producer that re-mints MessageIds, as the host delivers to a consumer that declares an event
 * key (test/support/eventKeyProbe.ts): what the adapter logs (a warning that names the first
 * MessageId and shows the key only as its length and a hash prefix) and counts (inbox.messages with
 * the cause suspected_producer_duplicate), for `absorb` and for `flag`.
 */
const stack = useLocalStack();
let sink: MetricsSink;
let app: FunctionApp;
beforeAll(async () => {
  sink = MetricsSink.register(); // before the runtime builds its instruments
  app = await loadFunctionApp(EVENT_KEY_PROBE);
});
afterAll(() => sink.stop());

interface Logged {
  level: string;
  message: string;
  fields: Record<string, unknown>;
}

/** The adapter's lines above debug, and the raw text of all (to check what it leaves out). */
function logged(lines: readonly LogLine[]): { lines: Logged[]; text: string } {
  const user = lines.filter((line) => line.category === 'user');
  return {
    text: user.map((line) => line.text).join('\n'),
    lines: user
      .filter((line) => line.level !== 'debug')
      .map((line) => {
        const at = line.text.indexOf(' {');
        return {
          level: line.level,
          message: line.text.slice(0, at),
          fields: JSON.parse(line.text.slice(at + 1)) as Record<string, unknown>,
        };
      }),
  };
}

// A key that is personal data, which no log line may carry.
const PAYMENT_ID = 'payment-of-jane.doe@example.com';

async function deliver(
  functionName: string,
  account: string,
  messageId: string,
): Promise<{ lines: Logged[]; text: string }> {
  const result = await app.invokeServiceBus(functionName, {
    body: JSON.stringify({ accountId: account, paymentId: PAYMENT_ID }),
    messageId,
    subject: 'PaymentReceived',
    deliveryCount: 1,
  });
  if (result.error) throw result.error;
  return logged(result.logs);
}

const applied = async (account: string): Promise<string[]> =>
  (await documentsIn(stack.container, `account:${account}`))
    .filter((doc) => doc.type === 'applied')
    .map((doc) => String(doc.id))
    .sort();

const eventKeyLog = {
  characters: PAYMENT_ID.length,
  sha256: expect.stringMatching(/^[0-9a-f]{16}$/) as unknown,
};

it('absorb: the re-minted copy is completed unapplied, logged as a warning and counted as a duplicate with its cause', async () => {
  await deliver('eventKeyAbsorb', 'absorb-1', 'first-id');
  const copy = await deliver('eventKeyAbsorb', 'absorb-1', 're-minted-id');

  expect(copy.lines).toEqual([
    {
      level: 'warning',
      message:
        'Suspected producer duplicate: this event was applied under another MessageId; completed without applying it',
      fields: expect.objectContaining({
        consumer: 'test.event-key-absorb',
        messageId: 're-minted-id',
        outcome: 'duplicate',
        cause: 'suspected_producer_duplicate',
        firstMessageId: 'first-id',
        eventKey: eventKeyLog,
      }) as unknown,
    },
  ]);
  expect(copy.text).not.toContain('jane');
  expect(await applied('absorb-1')).toEqual(['applied-first-id']);
  const consumer = { consumer: 'test.event-key-absorb' };
  expect(
    await sink.value(METRIC_NAMES.messages, {
      ...consumer,
      outcome: 'duplicate',
      cause: 'suspected_producer_duplicate',
    }),
  ).toBe(1);
  expect(await sink.value(METRIC_NAMES.messages, { ...consumer, outcome: 'processed' })).toBe(1);
});

it('flag: the re-minted copy is applied, logged as a warning and counted as processed with the cause', async () => {
  const first = await deliver('eventKeyFlag', 'flag-1', 'first-id');
  const copy = await deliver('eventKeyFlag', 'flag-1', 're-minted-id');

  expect(first.lines.map(({ level, fields }) => [level, fields.outcome, fields.cause])).toEqual([
    ['information', 'processed', undefined],
  ]);
  expect(copy.lines).toEqual([
    {
      level: 'warning',
      message:
        'Suspected producer duplicate: this event was applied under another MessageId; applied anyway (eventKey onConflict: flag)',
      fields: expect.objectContaining({
        consumer: 'test.event-key-flag',
        messageId: 're-minted-id',
        outcome: 'processed',
        cause: 'suspected_producer_duplicate',
        firstMessageId: 'first-id',
        eventKey: eventKeyLog,
      }) as unknown,
    },
  ]);
  expect(copy.text).not.toContain('jane');
  expect(await applied('flag-1')).toEqual(['applied-first-id', 'applied-re-minted-id']);
  const consumer = { consumer: 'test.event-key-flag' };
  expect(
    await sink.value(METRIC_NAMES.messages, {
      ...consumer,
      outcome: 'processed',
      cause: 'suspected_producer_duplicate',
    }),
  ).toBe(1);
  expect(await sink.value(METRIC_NAMES.messages, { ...consumer, outcome: 'processed' })).toBe(2);
});

it('bounds the first MessageId it echoes', async () => {
  const long = 'x'.repeat(128);
  await deliver('eventKeyAbsorb', 'absorb-2', long);
  const copy = await deliver('eventKeyAbsorb', 'absorb-2', 'copy-of-long');

  expect(copy.lines[0]?.fields.firstMessageId).toBe(`${'x'.repeat(100)}…(128 characters)`);
});
