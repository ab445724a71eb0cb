import {
  defineVersionedConsumer,
  type Delivery,
  FAILURE_NOTE_TYPE,
  failureNote,
  failureNoteId,
  markerLocation,
  PoisonMessageError,
} from '@idempotent-consumers/inbox/internal';
import { documentsIn, testConsumer, TestMessage } from '@idempotent-consumers/inbox/testing';
import { type FunctionApp, loadFunctionApp, useLocalStack } from '@idempotent-consumers/local-azure';

import { onHandle, PUBLISHER_PROBE } from '../support/publisherProbe';

/**
 * On the last delivery Service Bus makes (SERVICEBUS_MAX_DELIVERY_COUNT, 10 here), a consumer whose
 * handler rejected the message or failed notes why, next to where its marker would be, so that the
 * dead-letter tool can say what a resubmit would do (packages/inbox/src/failureNote.ts). Through the worker
 * path, with the library's Service Bus handler, on the local Cosmos DB server.
 */
const stack = useLocalStack();

let app: FunctionApp;
beforeAll(async () => {
  app = await loadFunctionApp(PUBLISHER_PROBE);
});

let accounts = 0;

async function deliver(
  handle: Parameters<typeof onHandle>[0],
  { deliveryCount = 10, body }: { deliveryCount?: number; body?: string } = {},
): Promise<{
  error: Error | undefined;
  logs: string;
  documents: Record<string, unknown>[];
  account: string;
}> {
  const account = `noted-${++accounts}`;
  onHandle(handle);
  const result = await app.invokeServiceBus('publisherProbe', {
    body: body ?? JSON.stringify({ accountId: account, amount: 4 }),
    messageId: `m-${account}`,
    subject: 'Test',
    deliveryCount,
  });
  return {
    error: result.error,
    logs: result.logs.map((line) => line.text).join('\n'),
    documents: await documentsIn(stack.container, `account:${account}`),
    account,
  };
}

/** The JSON fields of the log line that starts with `message`. */
function fieldsOf(logs: string, message: string): unknown {
  const line = logs.split('\n').find((text) => text.startsWith(`${message} {`));
  return line === undefined ? undefined : JSON.parse(line.slice(message.length + 1));
}

const rejecting = (): never => {
  throw new PoisonMessageError('rejected-by-handler', 'the invoice is closed\nsecond line');
};

describe('the failure note of a last delivery', () => {
  it('records a handler rejection on the last delivery, where the tool looks for it, and nothing else', async () => {
    const { error, logs, documents, account } = await deliver(rejecting);
    const location = markerLocation(
      testConsumer(() => undefined),
      {
        body: { accountId: account, amount: 4 },
        messageId: `m-${account}`,
        deliveryCount: 10,
        messageIdIsLossy: false,
      } as never,
    );

    expect(error?.message).toMatch(/the invoice is closed/);
    expect(documents).toEqual([
      expect.objectContaining({
        id: failureNoteId(location.id),
        type: FAILURE_NOTE_TYPE,
        partitionKey: `account:${account}`,
        consumer: 'test.consumer',
        messageId: `m-${account}`,
        payloadHash: location.payloadHash,
        reason: 'rejected-by-handler',
        error: 'PoisonMessageError: the invoice is closed',
        deliveryCount: 10,
        failedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
        ttl: 30 * 86_400,
      }),
    ]);
    expect(failureNoteId(location.id)).toMatch(/^inbox-failure-[A-Za-z0-9_-]{43}$/);
    expect(fieldsOf(logs, 'Noted why the last delivery failed, for npm run dead-letters')).toEqual({
      consumer: 'test.consumer',
      note: failureNoteId(location.id),
      reason: 'rejected-by-handler',
    });
  });

  it('records an unexpected error as failed, by its name and first line', async () => {
    const { error, documents } = await deliver(() => {
      throw new TypeError('cannot read properties of undefined\n    at handle');
    });

    expect(error?.name).toBe('TypeError');
    expect(documents).toEqual([
      expect.objectContaining({ reason: 'failed', error: 'TypeError: cannot read properties of undefined' }),
    ]);
  });

  it('writes nothing before the last delivery', async () => {
    const { error, documents, logs } = await deliver(rejecting, { deliveryCount: 9 });

    expect(error).toBeInstanceOf(Error);
    expect(documents).toEqual([]);
    expect(logs).not.toContain('Noted');
  });

  it('writes nothing when Cosmos DB itself failed: the note would fail the same way', async () => {
    stack.server.faults.inject({ kind: 'unavailable', on: 'batch', times: 1 });

    const { error, documents, logs } = await deliver((_message, tx) => tx.create({ id: 'balance' }));

    expect(error?.message).toMatch(/Cosmos DB failed the request with 503/);
    expect(documents).toEqual([]);
    expect(logs).not.toContain('Noted');
  });

  it('writes nothing for a message the consumer cannot read (the tool reads it the same way)', async () => {
    const { error, logs, account } = await deliver(() => undefined, { body: 'not json' });
    const { resources } = await stack.container.items
      .query({
        query: 'SELECT * FROM c WHERE c.type = @type AND c.messageId = @messageId',
        parameters: [
          { name: '@type', value: FAILURE_NOTE_TYPE },
          { name: '@messageId', value: `m-${account}` },
        ],
      })
      .fetchAll();

    expect(error?.message).toMatch(/not JSON/);
    expect(logs).not.toMatch(/Noted|Could not note/);
    expect(resources).toEqual([]);
  });

  it('logs a note it cannot write, and the delivery fails as it would have', async () => {
    stack.server.faults.inject({ kind: 'unavailable', on: 'write', times: 1 });

    const { error, documents, logs } = await deliver(rejecting);

    expect(error?.message).toMatch(/the invoice is closed/);
    expect(documents).toEqual([]);
    expect(
      fieldsOf(logs, 'Could not note why the last delivery failed; the dead-letter tool will not know'),
    ).toEqual({
      consumer: 'test.consumer',
      error: expect.stringMatching(/^Error: .*(503|unavailable)/is) as unknown,
    });
  });
});

describe('failureNote', () => {
  const delivery = {
    body: { accountId: 'a', amount: 1 },
    messageId: 'm-1',
    deliveryCount: 10,
    messageIdIsLossy: false,
  } as unknown as Delivery;
  const deps = { settings: { inbox: { retentionSeconds: 60 } }, now: () => new Date(0) } as never;

  it('keeps none for a versioned consumer: it keeps no marker to stand in for', () => {
    const versioned = defineVersionedConsumer({
      name: 'test.versioned',
      schema: TestMessage,
      project: (message) => ({ id: 'state', partitionKey: message.accountId, version: message.amount }),
    });

    expect(failureNote(versioned as never, delivery, new Error('x'), deps)).toBeUndefined();
    expect(
      failureNote(
        testConsumer(() => undefined),
        delivery,
        new Error('x'),
        deps,
      ),
    ).toMatchObject({
      ttl: 60,
      failedAt: '1970-01-01T00:00:00.000Z',
    });
  });

  it('names a thrown value that is not an Error by its type', () => {
    expect(
      failureNote(
        testConsumer(() => undefined),
        delivery,
        'a string',
        deps,
      ),
    ).toMatchObject({
      reason: 'failed',
      error: 'string: a string',
    });
  });

  it('keeps the error to 300 characters and its length', () => {
    const note = failureNote(
      testConsumer(() => undefined),
      delivery,
      new Error('x'.repeat(1000)),
      deps,
    );

    expect(note?.error).toBe(`Error: ${'x'.repeat(293)}…(1007 characters)`);
  });
});
