// Sending from the console, over HTTP as its page does, on the local peer with the real SDK: a plan
// first (what would be sent, which subscriptions' filters take it, which consumers accept it), and
// only the plan the user confirmed is sent. Nothing here depends on the sample's subjects.

import { createHash } from 'node:crypto';
import { request } from 'node:http';

import type { Topology } from '@idempotent-consumers/inbox/internal';
import { PAYMENTS, peekAll, PEER_TOPOLOGY, TOPIC, usePeer } from '@idempotent-consumers/local-azure';
import { z } from 'zod';

import { ConsoleBackend } from '../../src/tools/console/backend';
import { type RunningConsole, startConsole } from '../../src/tools/console/server';
import { ToolSide } from '../../src/tools/console/toolSide';
import { contentMessageId, type SubjectRules } from '../../src/tools/events';

/** A second consumer of PaymentReceived, stricter than the first: it wants the currency. */
const AUDIT = 'audit.payment-log';
const TOPOLOGY: Topology = {
  topics: [
    {
      name: TOPIC,
      subscriptions: [
        ...PEER_TOPOLOGY.topics[0]!.subscriptions,
        { name: AUDIT, subjects: ['PaymentReceived'] },
      ],
    },
  ],
};
const payment = z.object({ paymentId: z.string(), amount: z.number().positive() });
const RULES = new Map<string, SubjectRules>([
  [
    'PaymentReceived',
    {
      schemas: new Map([
        [PAYMENTS, payment],
        [AUDIT, payment.extend({ currency: z.string() })],
      ]),
    },
  ],
]);
const PAID = { paymentId: 'PAY-1', amount: 5, currency: 'EUR' };

const peer = usePeer({ topology: TOPOLOGY });
let running: RunningConsole;
/** The topology the console serves: a test changes it as npm start's watch mode would. */
let served: Topology;

async function startedConsole(actions: boolean): Promise<RunningConsole> {
  const tools = new ToolSide({
    serviceBus: peer.client,
    inbox: 'COSMOS_ENDPOINT is not set',
    rules: RULES,
    duplicateWindowSeconds: 3600,
    clockSkewSeconds: 0,
    now: () => Date.now(),
  });
  const backend = new ConsoleBackend({
    target: 'the local peer',
    actions,
    readOnlyReason: 'read-only here',
    inbox: 'COSMOS_ENDPOINT is not set',
    tools: () => Object.assign(tools, { close: () => Promise.resolve() }),
    topology: () => served,
    counts: () => Promise.resolve({ counts: new Map() }),
    functions: () => [],
    others: () => [],
    nextPurge: () => undefined,
    feed: undefined,
  });
  return startConsole({ port: 0, backend });
}

beforeEach(async () => {
  served = TOPOLOGY;
  running = await startedConsole(true);
});
afterEach(() => running.stop());

/** A POST as the console's page makes it: its token, its origin, JSON. */
function post(
  path: string,
  body: unknown,
  target: RunningConsole = running,
): Promise<{ status: number; value: Record<string, unknown> }> {
  const { origin, hash } = new URL(target.url);
  return new Promise((resolve, reject) => {
    const sent = request(
      `${origin}/api/${path}`,
      {
        method: 'POST',
        headers: {
          'x-console-token': new URLSearchParams(hash.slice(1)).get('token')!,
          'content-type': 'application/json',
          origin,
        },
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () =>
          resolve({ status: response.statusCode!, value: JSON.parse(text) as Record<string, unknown> }),
        );
      },
    );
    sent.on('error', reject);
    sent.end(JSON.stringify(body));
  });
}

/** A GET as the console's page makes it: its token. */
function get(path: string): Promise<{ status: number; value: Record<string, unknown> }> {
  const { origin, hash } = new URL(running.url);
  return new Promise((resolve, reject) => {
    request(
      `${origin}/api/${path}`,
      { headers: { 'x-console-token': new URLSearchParams(hash.slice(1)).get('token')! } },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () =>
          resolve({ status: response.statusCode!, value: JSON.parse(text) as Record<string, unknown> }),
        );
      },
    )
      .on('error', reject)
      .end();
  });
}

/** What each subscription holds: MessageId, Subject and body bytes. */
async function queued(
  subscription: string,
): Promise<{ messageId: unknown; subject: unknown; body: string }[]> {
  const receiver = peer.client.createReceiver(TOPIC, subscription, { skipParsingBodyAsJson: true });
  try {
    return (await peekAll(receiver)).map((message) => ({
      messageId: message.messageId,
      subject: message.subject,
      body: (message.body as Buffer).toString('utf8'),
    }));
  } finally {
    await receiver.close();
  }
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

describe('the console sends only a plan the user confirmed', () => {
  it('refuses a send without a confirmed plan, and sends nothing', async () => {
    const refused = await post('send', { subject: 'PaymentReceived', body: PAID });

    expect(refused).toEqual({
      status: 409,
      value: { error: 'A send carries out a plan: ask for the plan first, and confirm it.' },
    });
    expect(peer.peer.broker.topic(TOPIC).stats.sent).toBe(0);
    expect(await queued(PAYMENTS)).toEqual([]);
  });

  it("plans: topic, Subject, MessageId, body size and SHA-256, the filters that take it, each consumer's verdict", async () => {
    const text = JSON.stringify(PAID);

    const { status, value } = await post('send/plan', { subject: 'PaymentReceived', body: PAID });

    expect(status).toBe(200);
    const messageId = contentMessageId('PaymentReceived', { paymentId: 'PAY-1', amount: 5 });
    expect(value).toEqual({
      topic: TOPIC,
      subject: 'PaymentReceived',
      messageId,
      messageIdGiven: false,
      copies: 1,
      bodyBytes: Buffer.byteLength(text),
      bodySha256: sha256(text),
      subscriptions: [PAYMENTS, AUDIT],
      consumers: [{ consumer: PAYMENTS }, { consumer: AUDIT }],
      poison: undefined,
      lines: [
        `would send PaymentReceived messageId=${messageId} (derived from the event) to ${TOPIC}`,
        `  body: ${Buffer.byteLength(text)} bytes, sha256 ${sha256(text).slice(0, 12)}`,
        `  taken by the filters of ${PAYMENTS}, ${AUDIT}`,
        `  ${PAYMENTS} accepts it`,
        `  ${AUDIT} accepts it`,
      ],
      fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/) as string,
    });
    // A plan sends nothing.
    expect(peer.peer.broker.topic(TOPIC).stats.sent).toBe(0);
  });

  it('plans and offers each subject on the topic the served topology names, whatever src/topology.json says', async () => {
    served = {
      topics: [{ name: 'console-only', subscriptions: [{ name: PAYMENTS, subjects: ['PaymentReceived'] }] }],
    };

    const { status, value } = await post('send/plan', { subject: 'PaymentReceived', body: PAID });
    const form = await get('send-form');

    expect(status).toBe(200);
    expect(value).toMatchObject({ topic: 'console-only', subscriptions: [PAYMENTS] });
    expect(form.value).toMatchObject({ subjects: [{ subject: 'PaymentReceived', topic: 'console-only' }] });
  });

  it('sends exactly the planned message once the plan is confirmed', async () => {
    const input = { subject: 'PaymentReceived', body: PAID, messageId: 'given-1' };
    const plan = (await post('send/plan', input)).value;
    expect(plan.lines).toContain(`would send PaymentReceived messageId=given-1 (given) to ${TOPIC}`);

    const sent = await post('send', { ...input, fingerprint: plan.fingerprint });

    expect(sent.status).toBe(200);
    expect(sent.value).toMatchObject({ messageId: 'given-1', topic: TOPIC });
    const message = { messageId: 'given-1', subject: 'PaymentReceived', body: JSON.stringify(PAID) };
    expect(await queued(PAYMENTS)).toEqual([message]);
    expect(await queued(AUDIT)).toEqual([message]);
    expect(sha256(message.body)).toBe(plan.bodySha256);
    expect(peer.peer.broker.topic(TOPIC).stats.sent).toBe(1);
  });

  it('refuses (409, nothing sent) when what would be sent is no longer the plan: another body, or other filters', async () => {
    const input = { subject: 'PaymentReceived', body: PAID };
    const { fingerprint } = (await post('send/plan', input)).value;

    const otherBody = await post('send', { ...input, body: { ...PAID, amount: 6 }, fingerprint });
    // npm start's watch mode reloaded a topology whose audit subscription no longer takes the Subject.
    served = {
      topics: [{ name: TOPIC, subscriptions: TOPOLOGY.topics[0]!.subscriptions.slice(0, -1) }],
    };
    const otherFilters = await post('send', { ...input, fingerprint });

    for (const refused of [otherBody, otherFilters]) {
      expect(refused).toEqual({
        status: 409,
        value: {
          error:
            'What would be sent is no longer the plan you confirmed (the form, the filters or the consumers changed): ' +
            'nothing was sent. Look at the new plan.',
        },
      });
    }
    expect(peer.peer.broker.topic(TOPIC).stats.sent).toBe(0);
  });

  it('plans a body a consumer refuses only when asked to send it anyway, and says so', async () => {
    const input = { subject: 'PaymentReceived', body: { paymentId: 'PAY-2', amount: 5 }, messageId: 'bad-1' };

    const refused = await post('send/plan', input);
    const { value: plan } = await post('send/plan', { ...input, allowInvalid: true });
    const sent = await post('send', { ...input, allowInvalid: true, fingerprint: plan.fingerprint });

    expect(refused.status).toBe(400);
    expect(refused.value.error).toMatch(/^The form: invalid event for audit\.payment-log:\s+- currency: /);
    // In the page's words: its box, not the command's flag.
    expect(refused.value.error).toContain(
      '(the box "send it even if its consumers refuse it" sends it anyway, as a poison message.)',
    );
    expect(plan.consumers).toEqual([
      { consumer: PAYMENTS },
      { consumer: AUDIT, refusal: expect.stringMatching(/^currency: /) as string },
    ]);
    expect(plan.poison).toMatch(/^currency: /);
    expect((plan.lines as string[]).slice(3)).toEqual([
      `  ${PAYMENTS} accepts it`,
      expect.stringMatching(/^ {2}audit\.payment-log refuses it: currency: /) as string,
      '  sent although refused (the box "send it even if its consumers refuse it"): a poison message, on purpose. The host retries it until ' +
        'maxDeliveryCount, then Service Bus dead-letters it.',
    ]);
    expect(sent.status).toBe(200);
    expect((await queued(AUDIT)).map((message) => message.messageId)).toEqual(['bad-1']);
  });

  it('read-only: plans, but refuses to send, and sends nothing', async () => {
    const viewer = await startedConsole(false);
    try {
      const input = { subject: 'PaymentReceived', body: PAID };
      const plan = await post('send/plan', input, viewer);
      const sent = await post('send', { ...input, fingerprint: plan.value.fingerprint }, viewer);

      expect(plan.status).toBe(200);
      expect(sent).toEqual({ status: 403, value: { error: 'read-only here' } });
      expect(peer.peer.broker.topic(TOPIC).stats.sent).toBe(0);
    } finally {
      await viewer.stop();
    }
  });
});
