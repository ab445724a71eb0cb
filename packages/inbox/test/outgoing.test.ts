import {
  buildOutboxDocument,
  isOutboxDocument,
  losslessJson,
  MAX_OUTGOING_MESSAGE_BYTES,
  OUTBOX_TYPE,
  type OutboxDocument,
  outboxDocumentId,
  outboxEntryOf,
  type OutboxRoutes,
  type OutgoingMessage,
  PoisonMessageError,
  processDelivery,
  type ProcessDependencies,
} from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { delivery, dependencies, documentsIn, testConsumer } from '../src/testing';

/**
 * The limits tx.publish holds an outgoing message to (Service Bus's), each at its boundary: the
 * last value it takes and the first it refuses. A refusal is poison `invalid-outgoing-message`, and
 * nothing of the delivery is written. Then the relay's reading of an outbox document, one check at a
 * time.
 */
const stack = useLocalStack();

let accounts = 0;

const base: OutgoingMessage = { topic: 'business-events', subject: 'Happened', body: { n: 1 } };

/** What tx.publish of `message` ends in: `processed` (with its document written), or the poison's detail. */
async function publishing(
  message: OutgoingMessage,
  overrides: Partial<ProcessDependencies> = {},
): Promise<string> {
  const partitionKey = `account:outgoing-${++accounts}`;
  const consumer = testConsumer((_message, tx) => {
    tx.create({ id: 'effect' });
    tx.publish(message);
  });
  try {
    const result = await processDelivery(
      consumer,
      delivery({ accountId: `outgoing-${accounts}`, amount: 1 }),
      dependencies(stack.container, overrides),
    );
    const written = await documentsIn(stack.container, partitionKey);
    return `${result.outcome} (${written.length} documents)`;
  } catch (error) {
    if (!(error instanceof PoisonMessageError)) throw error;
    const written = await documentsIn(stack.container, partitionKey);
    return `${error.reason}${written.length > 0 ? ' WITH DOCUMENTS' : ''}: ${error.message}`;
  }
}

const text = (length: number): string => 'x'.repeat(length);
const properties = (count: number): Record<string, number> =>
  Object.fromEntries(Array.from({ length: count }, (_, index) => [`p${index}`, index]));

describe('tx.publish: the limits of an outgoing message', () => {
  it.each<[string, Partial<OutgoingMessage>, string | undefined]>([
    ['a topic of 50 characters', { topic: `t${text(48)}t` }, undefined],
    ['a topic of 51 characters', { topic: `t${text(49)}t` }, 'is not a Service Bus topic name'],
    ['a topic starting with a dash', { topic: '-events' }, 'is not a Service Bus topic name'],
    ['a topic that is not text', { topic: 42 as never }, 'the topic number is not'],
    ['a subject of 128 characters', { subject: text(128) }, undefined],
    ['a subject of 129 characters', { subject: text(129) }, 'must be text of 1 to 128 characters'],
    ['an empty subject', { subject: '' }, 'must be text of 1 to 128 characters'],
    ['a subject that is not text', { subject: 7 as never }, 'the subject number must be text'],
    ['a name of 128 characters', { name: text(128) }, undefined],
    ['a name of 129 characters', { name: text(129) }, 'the name'],
    ['an empty name', { name: '' }, 'the name "" must be text of 1 to 128 characters'],
    ['a name that is not text', { name: 1 as never }, 'the name number'],
    ['a correlationId of 128 characters', { correlationId: text(128) }, undefined],
    ['an empty correlationId', { correlationId: '' }, undefined],
    ['a correlationId of 129 characters', { correlationId: text(129) }, 'at most 128 characters'],
    ['a correlationId that is not text', { correlationId: 5 as never }, 'the correlationId number'],
    ['32 application properties', { applicationProperties: properties(32) }, undefined],
    [
      '33 application properties',
      { applicationProperties: properties(33) },
      '33 applicationProperties; at most 32',
    ],
    [
      'application properties that are not an object',
      { applicationProperties: 'p' as never },
      'must be an object',
    ],
    ['application properties that are null', { applicationProperties: null as never }, 'must be an object'],
    ['a property name of 128 characters', { applicationProperties: { [text(128)]: 1 } }, undefined],
    [
      'a property name of 129 characters',
      { applicationProperties: { [text(129)]: 1 } },
      'the application property',
    ],
    ['a text property of 1024 characters', { applicationProperties: { p: text(1024) } }, undefined],
    [
      'a text property of 1025 characters',
      { applicationProperties: { p: text(1025) } },
      'is text of 1025 characters',
    ],
    ['a boolean and a number property', { applicationProperties: { ok: false, n: -1.5 } }, undefined],
    ['an Infinity property', { applicationProperties: { p: Infinity } }, '"p" is Infinity'],
    ['a null property', { applicationProperties: { p: null as never } }, '"p" is null'],
    ['an object property', { applicationProperties: { p: {} as never } }, '"p" is an object'],
    ['an array property', { applicationProperties: { p: [] as never } }, '"p" is an array'],
    ['a Date property', { applicationProperties: { p: new Date(0) as never } }, '"p" is a Date'],
    ['an undefined body', { body: undefined }, 'the body is undefined'],
    ['a null body', { body: null }, undefined],
  ])('%s', async (_case, change, refusal) => {
    const outcome = await publishing({ ...base, ...change });

    if (refusal === undefined) expect(outcome).toBe('processed (3 documents)');
    else expect(outcome).toMatch(new RegExp(`^invalid-outgoing-message: tx\\.publish: .*${escape(refusal)}`));
  });

  it(`takes a message of exactly ${MAX_OUTGOING_MESSAGE_BYTES} bytes as JSON, and refuses one byte more`, async () => {
    const sized = (bytes: number): OutgoingMessage => {
      const frame = Buffer.byteLength(
        JSON.stringify({ subject: base.subject, correlationId: 'c', body: '' }),
      );
      return { ...base, correlationId: 'c', body: text(bytes - frame) };
    };

    expect(await publishing(sized(MAX_OUTGOING_MESSAGE_BYTES))).toBe('processed (3 documents)');
    expect(await publishing(sized(MAX_OUTGOING_MESSAGE_BYTES + 1))).toMatch(
      new RegExp(`takes ${MAX_OUTGOING_MESSAGE_BYTES + 1} bytes as JSON`),
    );
  });
});

describe('tx.publish: where the message may go, and what it is written as', () => {
  const subjects = (count: number): string[] =>
    Array.from({ length: count }, (_, index) => `Subject${String(index).padStart(2, '0')}`);
  const routes = (topics: Record<string, string[]>): Partial<ProcessDependencies> => ({
    outboxRoutes: (): OutboxRoutes =>
      new Map(Object.entries(topics).map(([topic, taken]) => [topic, new Set(taken)])),
  });

  it('refuses a subject no subscription takes, naming at most ten of those they take, or none', async () => {
    const eleven = await publishing(
      { ...base, subject: 'Unheard' },
      routes({ 'business-events': subjects(11) }),
    );
    const ten = await publishing(
      { ...base, subject: 'Unheard' },
      routes({ 'business-events': subjects(10) }),
    );
    const none = await publishing({ ...base, subject: 'Unheard' }, routes({ 'business-events': [] }));

    expect(eleven).toContain(`(they take: ${subjects(10).join(', ')}, ...), so Service Bus would accept`);
    expect(ten).toContain(`(they take: ${subjects(10).join(', ')}), so Service Bus would accept`);
    expect(none).toContain('(they take: none), so Service Bus would accept');
    for (const outcome of [eleven, ten, none]) {
      expect(outcome).toMatch(
        /^invalid-outgoing-message: tx\.publish: no subscription of the topic "business-events" takes the subject "Unheard" /,
      );
    }
  });

  it('takes a subject a subscription takes, on a topic that lists the consumer', async () => {
    expect(await publishing(base, routes({ 'business-events': ['Happened'] }))).toBe(
      'processed (3 documents)',
    );
    expect(await publishing(base, routes({ 'other-events': ['Happened'] }))).toMatch(
      /the topic "business-events" does not list test\.consumer among its publishers/,
    );
  });

  it('gives the message a MessageId of 32 hex digits, in the document named after it', async () => {
    const partitionKey = `account:outgoing-${++accounts}`;
    const consumer = testConsumer((_message, tx) => {
      tx.publish(base);
    });
    await processDelivery(
      consumer,
      delivery({ accountId: `outgoing-${accounts}`, amount: 1 }),
      dependencies(stack.container),
    );
    const [outbox] = (await documentsIn(stack.container, partitionKey)).filter(
      (document) => document.type === OUTBOX_TYPE,
    );

    expect(outbox?.messageId).toMatch(/^[0-9a-f]{32}$/);
    expect(outbox?.id).toBe(`outbox-${String(outbox?.messageId)}`);
    expect(outboxDocumentId('abc')).toBe('outbox-abc');
  });

  it('takes an object without a prototype as the plain data it is', async () => {
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { sku: 'A', quantity: 2 });

    expect(await publishing({ ...base, body: { line: bare } })).toBe('processed (3 documents)');
  });

  it("refuses a body that refers to itself, with JSON's own reason", async () => {
    const looped: Record<string, unknown> = { n: 1 };
    looped['self'] = looped;

    expect(await publishing({ ...base, body: looped })).toMatch(
      /^invalid-outgoing-message: tx\.publish: the message cannot be written as JSON \(Converting circular structure to JSON/,
    );
  });
});

describe('losslessJson, on any value', () => {
  it.each<[string, unknown, string]>([
    ['a number that is not finite, as the whole value', Number.NaN, 'NaN, which JSON cannot keep'],
    ['undefined, as the whole value', undefined, 'the message is not a JSON value.'],
    [
      'a path that starts in an array',
      [{ a: Number.POSITIVE_INFINITY }],
      'Infinity at [0].a, which JSON cannot keep',
    ],
    [
      'the first of two problems',
      { a: Number.NaN, b: Number.POSITIVE_INFINITY },
      'NaN at a, which JSON cannot keep',
    ],
  ])('%s', (_case, value, problem) => {
    const written = losslessJson(value);

    expect(typeof written === 'string' ? written : written.problem).toMatch(
      new RegExp(`^${escape(problem)}`),
    );
  });

  it('writes what it keeps exactly as JSON.stringify does', () => {
    const value = { a: [1, 'b', null, { c: true }], d: new Date(0) };

    expect(losslessJson(value)).toBe(JSON.stringify(value));
  });
});

describe('isOutboxDocument, on a change feed page', () => {
  it('takes only objects typed as outbox documents, whatever else the page holds', () => {
    const page: unknown[] = [null, 7, 'outbox', { type: OUTBOX_TYPE }, { type: 'marker' }, {}];

    expect(page.map((document) => isOutboxDocument(document))).toEqual([
      false,
      false,
      false,
      true,
      false,
      false,
    ]);
  });
});

const escape = (literal: string): string => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe("the relay's reading of an outbox document, one check at a time", () => {
  const valid = (): OutboxDocument =>
    buildOutboxDocument(
      { ...base, applicationProperties: { n: 1 } },
      0,
      { consumer: 'test.consumer', key: 'k', messageId: 'm', correlationId: undefined },
      'account:read',
      new Date('2026-12-01T00:00:00Z'),
    );
  /** The valid document with its message JSON changed by `change`. */
  const withMessage = (change: (message: Record<string, unknown>) => unknown): OutboxDocument => {
    const document = valid();
    const message = JSON.parse(document.message) as Record<string, unknown>;
    return { ...document, message: JSON.stringify(change(message)) };
  };
  const reading = (document: OutboxDocument): string => {
    const read = outboxEntryOf(document);
    return read.ok
      ? `ok ${read.entry.partitionKey} ${read.entry.message.messageId}`
      : `${read.reason}: ${read.detail}`;
  };

  it('reads the document tx.publish writes: its message and the partition its text names', () => {
    const document = valid();

    expect(reading(document)).toBe(`ok account:read ${document.messageId}`);
    expect(outboxEntryOf(document)).toMatchObject({
      ok: true,
      entry: {
        message: {
          topic: 'business-events',
          subject: 'Happened',
          body: { n: 1 },
          correlationId: 'm',
          applicationProperties: { n: 1 },
          contentType: 'application/json',
        },
      },
    });
  });

  it.each<[string, (document: OutboxDocument) => OutboxDocument, string]>([
    [
      'no message text',
      (d) => ({ ...d, message: undefined as never }),
      'unreadable: it has no "message" text.',
    ],
    [
      'a message that is not JSON',
      (d) => ({ ...d, message: '{oops' }),
      'unreadable: its "message" (5 characters) is not JSON.',
    ],
    [
      'a message that is an array',
      (d) => ({ ...d, message: '[]' }),
      'unreadable: its "message" is not a JSON object.',
    ],
    [
      'a message that is null',
      (d) => ({ ...d, message: 'null' }),
      'unreadable: its "message" is not a JSON object.',
    ],
    [
      'a message that is a number',
      (d) => ({ ...d, message: '7' }),
      'unreadable: its "message" is not a JSON object.',
    ],
    [
      'no messageId',
      () => withMessage(({ messageId: _, ...m }) => m),
      'unreadable: its "message" has no messageId.',
    ],
    [
      'an empty messageId',
      () => withMessage((m) => ({ ...m, messageId: '' })),
      'unreadable: its "message" has no messageId.',
    ],
    [
      'no partitionKey',
      () => withMessage(({ partitionKey: _, ...m }) => m),
      'unreadable: its "message" has no partitionKey.',
    ],
    [
      'a partitionKey that is not text',
      () => withMessage((m) => ({ ...m, partitionKey: 3 })),
      'unreadable: its "message" has no partitionKey.',
    ],
    [
      'a messageId its id does not match',
      () => withMessage((m) => ({ ...m, messageId: 'other' })),
      'unreadable: its id is not "outbox-other", the one its messageId gives.',
    ],
    [
      'a topic Service Bus does not take',
      () => withMessage((m) => ({ ...m, topic: 'no such/topic' })),
      'invalid: the topic "no such/topic" is not a Service Bus topic name.',
    ],
    [
      'no body',
      () => withMessage(({ body: _, ...m }) => m),
      'invalid: the body is undefined; publish a JSON value.',
    ],
    [
      'an application property that is an object',
      () => withMessage((m) => ({ ...m, applicationProperties: { p: {} } })),
      'invalid: the application property "p" is an object;',
    ],
    [
      'a body too large',
      () => withMessage((m) => ({ ...m, body: text(MAX_OUTGOING_MESSAGE_BYTES) })),
      'invalid: the message takes',
    ],
  ])('%s', (_case, change, expected) => {
    expect(reading(change(valid()))).toMatch(new RegExp(`^${escape(expected)}`));
  });
});
