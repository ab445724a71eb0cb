import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { ServiceBusMessage, ServiceBusReceivedMessage, ServiceBusReceiver } from '@azure/service-bus';
import { RETRY_COPIES } from '@idempotent-consumers/devkit';
import {
  markerLocation,
  RESUBMITTED_AT_PROPERTY,
  RETRY_SUBJECT,
  retryCopy,
  serviceBusMessageOf,
  type Topology,
  validateTopology,
} from '@idempotent-consumers/inbox/internal';
import { delivery, testConsumer } from '@idempotent-consumers/inbox/testing';
import { peekAll, receive, usePeer } from '@idempotent-consumers/local-azure';

import { writeLocalRun } from '../../src/build/localRun';
import { captured, deadLetters } from '../../src/testing/tools';
import { deliveryOf } from '../../src/tools/deadLetterIdentity';

/**
 * `npm run dead-letters` on a queue holding delayed-retry copies (packages/inbox/src/delayedRetry.ts),
 * through the real tool against the local peer. The topology is the test's own, served by the peer
 * and handed to the tool as a running npm start hands it (its settings file), so nothing here is the
 * sample's. The subscription's filter for its own copies (Subject inbox.retry and inboxRetryFor its
 * name, which the Bicep deploys for a subscription that declares delayedRetry) is set up by the
 * test with the SDK's rule manager.
 */
const TOPIC = 'probe-events';
const RETRYING = 'test.consumer';
const BYSTANDER = 'test.bystander';
const SUBJECT = 'ProbeHappened';
const MINUTE_MS = 60_000;
const PAST_WINDOW_MS = 66 * MINUTE_MS;

const topologyWith = (delayedRetry: boolean): Topology =>
  validateTopology({
    topics: [
      {
        name: TOPIC,
        subscriptions: [
          {
            name: RETRYING,
            subjects: [SUBJECT],
            ...(delayedRetry ? { delayedRetry: { attempts: 3, firstDelaySeconds: 30 } } : {}),
          },
          // Takes the original Subject too: a resubmitted copy must not reach it.
          { name: BYSTANDER, subjects: [SUBJECT, 'OtherHappened'] },
        ],
      },
    ],
  });

const fixture = usePeer({ topology: topologyWith(true), retryCopies: RETRY_COPIES });
const receivers: ServiceBusReceiver[] = [];
let directory: string;
let run = 0;

beforeEach(async () => {
  run++;
  directory = await mkdtemp(join(tmpdir(), 'dead-letters-retry-'));
  await fixture.client.createRuleManager(TOPIC, RETRYING).createRule('test-own-retry-copies', {
    subject: RETRY_SUBJECT,
    applicationProperties: { inboxRetryFor: RETRYING },
  });
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
  await rm(directory, { recursive: true, force: true });
});

function receiverOf(subscription: string, deadLetter = false): ServiceBusReceiver {
  const receiver = fixture.client.createReceiver(TOPIC, subscription, {
    ...(deadLetter ? { subQueueType: 'deadLetter' as const } : {}),
    maxAutoLockRenewalDurationInMs: 0,
  });
  receivers.push(receiver);
  return receiver;
}

/** The tool's environment: a running npm start's settings file, with the topics its peer serves. */
function toolEnv(topology: Topology = topologyWith(true)): Record<string, string> {
  const file = join(directory, 'local-run.json');
  writeLocalRun(file, {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    environment: { SERVICEBUS_CONNECTION_STRING: fixture.peer.connectionString },
    topology,
  });
  return { LOCAL_RUN_FILE: file };
}

const original = (name: string): string => `${name}-${run}`;
const body = (name: string): { accountId: string; amount: number } => ({
  accountId: original(name),
  amount: 3,
});

/** Copy `attempt` of message `name`, as the app schedules it (retryCopy, then the library's Service Bus form of it). */
function copyOf(name: string, attempt: number): ServiceBusMessage {
  const copy = retryCopy(
    delivery(body(name), {
      messageId: original(name),
      subject: SUBJECT,
      correlationId: `checkout-${run}`,
      applicationProperties: { tenant: 'contoso' },
    }),
    TOPIC,
    RETRYING,
    attempt,
  );
  return { ...serviceBusMessageOf(copy), scheduledEnqueueTimeUtc: new Date(fixture.clock.now()) };
}

const ordinary = (name: string): ServiceBusMessage => ({
  messageId: original(name),
  subject: SUBJECT,
  contentType: 'application/json',
  body: Buffer.from(JSON.stringify(body(name))),
});

/** Sends the messages in order; the consumer gives each up, and the broker dead-letters it. */
async function deadLetter(...messages: ServiceBusMessage[]): Promise<void> {
  const sender = fixture.client.createSender(TOPIC);
  for (const message of messages) await sender.sendMessages(message);
  await sender.close();
  const receiver = receiverOf(RETRYING);
  for (const message of await receive(receiver, messages.length)) {
    await receiver.deadLetterMessage(message, {
      deadLetterReason: 'MaxDeliveryCountExceeded',
      deadLetterErrorDescription: 'gave up',
    });
  }
}

const rowOf = (out: string[], id: string): string => out.find((line) => line.includes(`${id} `)) ?? '';
const tableRows = (out: string[]): string[] => {
  const header = out.findIndex((line) => line.startsWith('seq'));
  return out.slice(header + 1, out.indexOf('', header));
};

describe('list', () => {
  it('shows each copy as attempt n of its original, next to the rest of its family', async () => {
    const invalid = { ...copyOf('x', 1), messageId: `broken-${run}` };
    delete invalid.applicationProperties!.inboxRetryOf;
    await deadLetter(ordinary('a'), copyOf('x', 2), ordinary('b'), ordinary('x'), copyOf('x', 1), invalid);
    const out = captured(toolEnv(), () => fixture.clock.now());

    const code = await deadLetters(['list', RETRYING, '--topic', TOPIC], out.context);

    const rows = tableRows(out.out);
    expect(code).toBe(0);
    expect(out.err).toEqual([expect.stringContaining('Using the app npm start runs')]);
    expect(out.out.find((line) => line.startsWith('seq'))).toMatch(
      /^seq\s+messageId\s+subject\s+delayed retry\s+reason\s/,
    );
    // The family together, the original first, its copies by attempt; everything else in its place.
    expect(rows.map((row) => row.split(/\s+/)[1])).toEqual([
      original('a'),
      original('x'),
      `${original('x')}:retry:${RETRYING}:1`,
      `${original('x')}:retry:${RETRYING}:2`,
      original('b'),
      `broken-${run}`,
    ]);
    expect(rowOf(out.out, original('x'))).toMatch(
      new RegExp(`${SUBJECT}\\s+original\\s+MaxDeliveryCountExceeded`),
    );
    expect(rowOf(out.out, `${original('x')}:retry:${RETRYING}:2`)).toMatch(
      new RegExp(
        `inbox\\.retry\\s+attempt 2 of ${original('x')} \\(${SUBJECT}\\)\\s+MaxDeliveryCountExceeded\\s+gave up\\s+0\\s+\\S+\\s+\\d{4}-`,
      ),
    );
    expect(rowOf(out.out, `broken-${run}`)).toMatch(
      /inbox\.retry\s+invalid-retry-copy: its inboxRetry\* properties are missing or malformed\s.*never: an invalid delayed-retry copy/,
    );
    // An ordinary message keeps its columns: nothing in the family's.
    expect(rowOf(out.out, original('b'))).toMatch(
      new RegExp(`${SUBJECT}\\s+MaxDeliveryCountExceeded\\s+gave up\\s+0\\s`),
    );
    expect(out.out).toContainEqual(expect.stringMatching(/^delayed retry: a copy its consumer scheduled/));
    // Never the body.
    expect(out.out.join('\n')).not.toContain('accountId');
  });

  it('prints a queue without copies as before: no delayed retry column', async () => {
    await deadLetter(ordinary('a'));
    const out = captured(toolEnv(), () => fixture.clock.now());

    await deadLetters(['list', RETRYING, '--topic', TOPIC], out.context);

    expect(out.out.find((line) => line.startsWith('seq'))).toMatch(/^seq\s+messageId\s+subject\s+reason\s/);
    expect(out.out.join('\n')).not.toContain('delayed retry');
  });
});

describe('show', () => {
  it("says which copy of which original it is, and an ordinary message's lines are as before", async () => {
    await deadLetter(copyOf('x', 3), ordinary('a'));
    const copy = captured(toolEnv(), () => fixture.clock.now());
    const plain = captured(toolEnv(), () => fixture.clock.now());

    await deadLetters(
      ['show', RETRYING, '--topic', TOPIC, `${original('x')}:retry:${RETRYING}:3`],
      copy.context,
    );
    await deadLetters(['show', RETRYING, '--topic', TOPIC, original('a')], plain.context);

    expect(copy.out).toContainEqual(
      `  delayed retry:              attempt 3 of ${original('x')} (${SUBJECT})`,
    );
    expect(plain.out.join('\n')).not.toContain('delayed retry');
  });
});

describe('resubmit', () => {
  it("sends a copy as it is: its own MessageId, the retry Subject and its family's properties, to its subscription only", async () => {
    await deadLetter(copyOf('x', 2));
    const bystanderBefore = (await peekAll(receiverOf(BYSTANDER))).length;
    fixture.clock.advance(PAST_WINDOW_MS);
    const out = captured(toolEnv(), () => fixture.clock.now());

    const code = await deadLetters(
      ['resubmit', RETRYING, '--topic', TOPIC, '--message-id', `${original('x')}:retry:${RETRYING}:2`],
      out.context,
    );

    expect(code).toBe(0);
    expect(out.out.join('\n')).toMatch(
      new RegExp(
        `resubmitted #\\d+ messageId=${original('x')}:retry:${RETRYING}:2 subject=inbox\\.retry; dead-lettered copy completed`,
      ),
    );
    const [arrived, ...more] = await receive(receiverOf(RETRYING), 2, 1_000);
    expect(more).toEqual([]);
    expect(arrived).toMatchObject({
      messageId: `${original('x')}:retry:${RETRYING}:2`,
      subject: RETRY_SUBJECT,
      correlationId: `checkout-${run}`,
      contentType: 'application/json',
    });
    expect(arrived!.applicationProperties).toEqual({
      tenant: 'contoso',
      inboxRetryOf: original('x'),
      inboxRetryFor: RETRYING,
      inboxRetryAttempt: 2,
      inboxRetrySubject: SUBJECT,
      [RESUBMITTED_AT_PROPERTY]: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/) as unknown,
    });
    // Its consumer keys it by the original: the marker the original's delivery would have.
    const consumer = testConsumer(() => undefined, { name: RETRYING });
    expect(markerLocation(consumer, deliveryOf(arrived!))).toEqual(
      markerLocation(consumer, delivery(body('x'), { messageId: original('x') })),
    );
    // The subscription that takes the original Subject did not get it, and the dead letter is gone.
    expect((await peekAll(receiverOf(BYSTANDER))).length).toBe(bystanderBefore);
    expect(await peekAll(receiverOf(RETRYING, true))).toEqual([]);
  });

  it('refuses an invalid copy, and a copy whose subscription declares no delayedRetry, and leaves both', async () => {
    const invalid = { ...copyOf('y', 1), messageId: `broken-${run}` };
    invalid.applicationProperties!.inboxRetryAttempt = 'one';
    await deadLetter(copyOf('x', 1), invalid);
    fixture.clock.advance(PAST_WINDOW_MS);
    const sent = fixture.peer.broker.topic(TOPIC).stats.sent;
    const out = captured(toolEnv(topologyWith(false)), () => fixture.clock.now());

    const code = await deadLetters(['resubmit', RETRYING, '--topic', TOPIC, '--all', '--force'], out.context);

    const text = out.out.join('\n');
    expect(code).toBe(1);
    expect(text).toMatch(
      new RegExp(
        `refused #\\d+ messageId=${original('x')}:retry:${RETRYING}:1 .*: a delayed-retry copy, and ${RETRYING} declares no delayedRetry`,
      ),
    );
    expect(text).toMatch(
      new RegExp(
        `refused #\\d+ messageId=broken-${run} .*: an invalid delayed-retry copy \\(its inboxRetry\\* properties are missing or malformed\\)`,
      ),
    );
    expect(fixture.peer.broker.topic(TOPIC).stats.sent).toBe(sent);
    expect(
      (await peekAll(receiverOf(RETRYING, true))).map((m: ServiceBusReceivedMessage) => m.messageId),
    ).toEqual([`${original('x')}:retry:${RETRYING}:1`, `broken-${run}`]);
  });
});

describe('discard', () => {
  const contents = async (): Promise<unknown[]> =>
    (await peekAll(receiverOf(RETRYING, true))).map((m: ServiceBusReceivedMessage) => ({
      messageId: m.messageId,
      subject: m.subject,
      body: m.body as unknown,
      applicationProperties: m.applicationProperties,
    }));

  it('refuses a message whose inbox state is not checked; with --force removes it and gives back the others unchanged', async () => {
    await deadLetter(ordinary('a'), copyOf('x', 1), ordinary('b'));
    const before = await contents();
    const sent = fixture.peer.broker.topic(TOPIC).stats.sent;
    const refused = captured(toolEnv(), () => fixture.clock.now());
    const forced = captured(toolEnv(), () => fixture.clock.now());

    const refusedCode = await deadLetters(
      ['discard', RETRYING, '--topic', TOPIC, '--message-id', original('b')],
      refused.context,
    );
    const afterRefusal = await contents();
    const forcedCode = await deadLetters(
      ['discard', RETRYING, '--topic', TOPIC, '--message-id', original('b'), '--force'],
      forced.context,
    );

    expect(refusedCode).toBe(1);
    expect(refused.out.join('\n')).toMatch(
      new RegExp(
        `refused #\\d+ messageId=${original('b')} .*: inbox state not checked, so nothing says it was applied\\. ` +
          'Discarded, its business effect would never happen',
      ),
    );
    expect(afterRefusal).toEqual(before);
    expect(forcedCode).toBe(0);
    expect(forced.out.join('\n')).toMatch(
      new RegExp(`discarded #\\d+ messageId=${original('b')} .*: completed in the dead-letter queue`),
    );
    // The copy and the other message were locked on the way to it: there as they were.
    expect(forced.out.join('\n')).toContain(
      '2 other message(s) locked on the way were given back unchanged.',
    );
    expect(await contents()).toEqual(before.slice(0, 2));
    expect(fixture.peer.broker.topic(TOPIC).stats.sent).toBe(sent);
  });
});
