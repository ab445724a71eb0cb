import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { appFunctions } from '@idempotent-consumers/devkit';
import {
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutboxMessage,
  type OutboxPublisher,
  processDelivery,
} from '@idempotent-consumers/inbox/internal';
import { delivery, dependencies, documentsIn, testConsumer } from '@idempotent-consumers/inbox/testing';
import { jsonNetDate, loadFunctionApp, retryDelays, useLocalStack } from '@idempotent-consumers/local-azure';

import { inboxRuntime } from '../../src/app';
import { relayChanges } from '../support/deliveries';

/**
 * The outbox relay as Azure runs it: the function registered by functions/outbox-relay.ts, handed a
 * page of changes through the worker path (the host's RPC request for a Cosmos DB trigger, with
 * Json.NET's rewriting of date-like strings), sending with the app's publisher.
 */
const stack = useLocalStack();

const sent: OutboxMessage[] = [];
let failSends = false;
const recording: OutboxPublisher = {
  send: (_topic, messages) =>
    failSends
      ? Promise.reject(new Error('ServiceBusError: ServiceCommunicationProblem'))
      : Promise.resolve((sent.push(...messages), [])),
  close: () => Promise.resolve(),
};
let original: OutboxPublisher;
beforeAll(() => {
  const runtime = inboxRuntime();
  original = runtime.publisher;
  runtime.publisher = recording;
});
afterAll(() => {
  inboxRuntime().publisher = original;
});
beforeEach(() => {
  sent.length = 0;
  failSends = false;
});

const at = '2026-12-01T10:00:00.120+02:00';
const publishing = testConsumer((message, tx) => {
  tx.create({ id: 'balance', amount: message.amount });
  tx.publish({
    topic: 'business-events',
    subject: 'Dated',
    name: 'dated',
    body: { at, amount: message.amount },
  });
});

async function committedPage(account: string): Promise<Record<string, unknown>[]> {
  await processDelivery(
    publishing,
    delivery({ accountId: account, amount: 4 }, { messageId: `relay-${account}` }),
    dependencies(stack.container),
  );
  return documentsIn(stack.container, `account:${account}`);
}

describe('the outbox relay function', () => {
  it('sends what the handler staged, dates and all, although the trigger rewrites date-like strings', async () => {
    const page = await committedPage('r1');

    const result = await relayChanges('outbox-relay', page);
    const outbox = (await documentsIn(stack.container, 'account:r1')).filter(
      (d) => d.type === OUTBOX_TYPE,
    ) as OutboxDocument[];

    // The host would hand this string over as "2026-12-01T08:00:00.12+00:00" were it a property.
    expect(jsonNetDate(at)).not.toBe(at);
    expect(result.error).toBeUndefined();
    expect(sent.map((m) => [m.subject, m.body])).toEqual([['Dated', { at, amount: 4 }]]);
    expect(outbox.map((d) => d.status)).toEqual(['dispatched']);
    expect(result.logs.map((line) => line.text).join('\n')).toMatch(/Relayed 1 outbox messages \{.*"sent":1/);
  });

  it('throws when Service Bus fails, so that the trigger retries the page, and says when the retries are spent', async () => {
    const page = await committedPage('r2');
    failSends = true;

    const retried = await relayChanges('outbox-relay', page, { retryCount: 3, maxRetryCount: 8 });
    const last = await relayChanges('outbox-relay', page, { retryCount: 8, maxRetryCount: 8 });

    expect(retried.error?.message).toContain('ServiceCommunicationProblem');
    expect(retried.logs.map((l) => l.text).join('\n')).toContain('the change feed page will be retried');
    expect(last.logs.map((l) => l.text).join('\n')).toContain('its retries are spent');
    const outbox = (await documentsIn(stack.container, 'account:r2')).filter((d) => d.type === OUTBOX_TYPE);
    expect(outbox.map((d) => d.status)).toEqual(['pending']);
  });

  it("gives a dispatch mark Cosmos DB holds up at the deadline the runtime's requestDeadlines set, and tries it again", async () => {
    const page = await committedPage('r4');
    const asked: number[] = [];
    const runtime = inboxRuntime();
    // Deadlines that pass after 30 ms of real time, while the server holds the first mark for 400 ms.
    runtime.requestDeadlines = {
      after: (ms, callback) => {
        asked.push(ms);
        const timer = setTimeout(callback, 30);
        return () => clearTimeout(timer);
      },
    };
    const held = stack.server.faults.inject({ kind: 'latency', on: 'write', ms: 400, times: 1 });
    try {
      const result = await relayChanges('outbox-relay', page);

      expect(result.error).toBeUndefined();
      expect(held.hits).toBe(1);
      // The mark given up, and its second attempt.
      expect(asked).toEqual([5_000, 5_000]);
      const outbox = (await documentsIn(stack.container, 'account:r4')).filter((d) => d.type === OUTBOX_TYPE);
      expect(outbox.map((d) => d.status)).toEqual(['dispatched']);
    } finally {
      delete runtime.requestDeadlines;
    }
  });

  it('ignores a page without outbox documents, sending and logging nothing', async () => {
    const result = await relayChanges('outbox-relay', [{ id: 'x', partitionKey: 'p', type: 'invoice' }]);

    expect(result.error).toBeUndefined();
    expect(sent).toEqual([]);
    expect(result.logs.filter((line) => line.category !== 'system')).toEqual([]);
  });

  it('retries a page for as long as the READMEs say before the sweeper takes over', async () => {
    const relay = (await loadFunctionApp(appFunctions())).cosmosDB.find((f) => f.name === 'outbox-relay');
    const policy = relay?.retry;
    if (!policy) throw new Error('the relay has no retry policy');
    // The host's exponential backoff, its jitter at the middle of its range.
    const next = retryDelays(policy, () => 0.5);
    const totalMs = Array.from({ length: policy.maxRetryCount }, () => next()).reduce((a, b) => a + b, 0);
    const minutes = Math.round(totalMs / 60_000);

    // The library's README as the app has it installed (a link to packages/inbox in the workspace).
    const library = join('node_modules', '@idempotent-consumers', 'inbox', 'README.md');
    for (const readme of [join('docs', 'how-it-works.md'), library]) {
      const text = readFileSync(join(__dirname, '..', '..', readme), 'utf8');
      expect({ readme, stated: /retries the page 8 times|8 retries/.test(text) }).toEqual({
        readme,
        stated: true,
      });
      expect({ readme, minutes: /about (\d+) minutes\)/.exec(text)?.[1] }).toEqual({
        readme,
        minutes: String(minutes),
      });
    }
    expect(policy.maxRetryCount).toBe(8);
  });
});
