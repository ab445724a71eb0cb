import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { InvocationContext } from '@azure/functions';
import { type Delivery, markerId, payloadHash, toDelivery } from '@idempotent-consumers/inbox/internal';
import {
  loadFunctionApp,
  PROBE_FUNCTION,
  probeDeliveries,
  type ServiceBusDelivery,
} from '@idempotent-consumers/local-azure';

/** What the trigger adapter makes of one delivery, run through the worker path to the probe function. */
async function adapted(delivery: ServiceBusDelivery): Promise<Delivery> {
  const result = await (await loadFunctionApp(PROBE_FUNCTION)).invokeServiceBus('probe', delivery);
  if (result.error) throw result.error;
  const { message, context } = probeDeliveries.at(-1)!;
  return toDelivery(message, context);
}

describe('toDelivery (the trigger adapter)', () => {
  it('types what the host hands over', async () => {
    const enqueued = new Date('2026-11-29T10:00:00Z');

    const delivery = await adapted({
      body: '{"a":1}',
      messageId: 'abc-123',
      deliveryCount: 3,
      subject: 'PaymentReceived',
      correlationId: 'corr-9',
      enqueuedTimeUtc: enqueued,
      applicationProperties: { tenant: 'contoso', attempt: 2 },
    });

    expect(delivery).toEqual({
      body: { a: 1 },
      messageId: 'abc-123',
      messageIdIsLossy: false,
      deliveryCount: 3,
      enqueuedTimeUtc: enqueued,
      subject: 'PaymentReceived',
      correlationId: 'corr-9',
      applicationProperties: { tenant: 'contoso', attempt: 2 },
    });
  });

  it('reads the application properties the host camelCased, under the names the host gives', async () => {
    const delivery = await adapted({
      body: '{}',
      applicationProperties: { TenantId: 'contoso', Attempt: 2 },
    });

    expect(delivery.applicationProperties).toEqual({ tenantId: 'contoso', attempt: 2 });
  });

  it('gives a MessageId the host parsed as a number back as that number\'s text, flagged: "1e3" arrives as "1000"', async () => {
    const delivery = await adapted({ body: '{}', messageId: '1e3' });

    expect([delivery.messageId, delivery.messageIdIsLossy]).toEqual(['1000', true]);
  });

  it("takes no value a JSON body shadowed for the broker's: such a message is poison", async () => {
    const delivery = await adapted({
      body: '{"messageId":"from-the-body","DeliveryCount":7,"paid":true}',
      messageId: 'from-the-broker',
      deliveryCount: 1,
    });

    expect(delivery).toMatchObject({
      messageId: undefined,
      deliveryCount: 1,
      shadowedByBody: ['messageId', 'deliveryCount'],
    });
  });

  it('gives an all-digit MessageId back as a string, flagged: several texts parse to each number', async () => {
    const small = await adapted({ body: '{}', messageId: '12345' });
    const smallMetadata = probeDeliveries.at(-1)?.context.triggerMetadata;
    const large = await adapted({ body: '{}', messageId: '9007199254740993' });

    expect(smallMetadata?.messageId).toBe(12345);
    expect([small.messageId, small.messageIdIsLossy]).toEqual(['12345', true]);
    expect([large.messageId, large.messageIdIsLossy]).toEqual(['9007199254740992', true]);
  });

  it('keeps MessageIds the host parsed as JSON literals stable, flagged', async () => {
    const ids = async (messageId: string): Promise<[string | undefined, boolean]> => {
      const delivery = await adapted({ body: '{}', messageId });
      return [delivery.messageId, delivery.messageIdIsLossy];
    };

    expect(await ids('true')).toEqual(['true', true]);
    expect(await ids('null')).toEqual(['null', true]);
    expect(await ids('[1, 2]')).toEqual(['[1,2]', true]);
    expect(await ids('"1e3"')).toEqual(['1e3', true]);
    expect(await ids('order-42')).toEqual(['order-42', false]);
    expect(await ids('"q7"')).toEqual(['q7', false]); // the one pair no rule can tell apart: see README
  });

  it('reads EnqueuedTimeUtc, which the host writes without a zone designator, as UTC in any time zone', async () => {
    const enqueued = new Date('2026-11-29T10:00:00.12Z');
    await adapted({ body: '{}', messageId: 'tz', enqueuedTimeUtc: enqueued });
    const hostValue = probeDeliveries.at(-1)?.context.triggerMetadata?.enqueuedTimeUtc;
    // A process in a zone 5.5 hours ahead of UTC, where reading the text as local time would be wrong.
    const script = `
      const { InvocationContext } = require('@azure/functions');
      const { toDelivery } = require('./src/delivery');
      const metadata = { enqueuedTimeUtc: ${JSON.stringify(hostValue)} };
      const delivery = toDelivery({}, new InvocationContext({ triggerMetadata: metadata }));
      process.stdout.write(JSON.stringify([new Date(metadata.enqueuedTimeUtc), delivery.enqueuedTimeUtc]));`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
      cwd: path.join(__dirname, '..'),
      env: { ...process.env, TZ: 'Asia/Kolkata' },
      encoding: 'utf8',
    });

    expect(hostValue).toBe('2026-11-29T10:00:00.12');
    expect(child.stderr).toBe('');
    const [localReading, adapterReading] = JSON.parse(child.stdout) as [string, string];
    expect(localReading).toBe('2026-11-29T04:30:00.120Z');
    expect(adapterReading).toBe(enqueued.toISOString());
  });

  it("reads the broker's values the body did not replace: Label for Subject, EnqueuedTime for EnqueuedTimeUtc", async () => {
    const enqueued = new Date('2026-11-29T10:00:00Z');
    const body = {
      Subject: 'body',
      enqueuedTimeUtc: '2020-01-01T00:00:00Z',
      correlationId: 'body',
      userProperties: {},
    };

    const delivery = await adapted({
      body: JSON.stringify(body),
      messageId: 'm-1',
      subject: 'PaymentReceived',
      correlationId: 'broker',
      enqueuedTimeUtc: enqueued,
      applicationProperties: { tenant: 'contoso' },
    });

    expect(probeDeliveries.at(-1)?.context.triggerMetadata).toMatchObject({
      subject: 'body',
      correlationId: 'body',
    });
    expect(delivery).toMatchObject({
      messageId: 'm-1',
      subject: 'PaymentReceived',
      correlationId: undefined, // no other copy: unknown rather than the body's
      enqueuedTimeUtc: enqueued,
      applicationProperties: { tenant: 'contoso' },
      shadowedByBody: ['correlationId'],
    });
  });

  it('names each broker value the body hid under every name it comes under, and reads it as absent', async () => {
    const body = {
      subject: 'b',
      LABEL: 'b',
      applicationProperties: { forged: 1 },
      userProperties: { forged: 2 },
    };

    const delivery = await adapted({
      body: JSON.stringify(body),
      messageId: 'm-1',
      subject: 'inbox.retry',
      applicationProperties: { inboxRetryOf: 'm-0' },
    });

    expect(delivery).toMatchObject({
      messageId: 'm-1',
      subject: undefined,
      applicationProperties: {},
      shadowedByBody: ['subject', 'applicationProperties'],
    });
    // Hidden, never forged: the body's properties are not read as the broker's.
    expect(delivery.applicationProperties).not.toHaveProperty('forged');
  });

  it('copes with missing metadata', () => {
    const delivery = toDelivery('raw', new InvocationContext({ triggerMetadata: {} }));

    expect(delivery).toMatchObject({
      messageId: undefined,
      deliveryCount: 1,
      subject: undefined,
      applicationProperties: {},
    });
  });
});

/** toDelivery on metadata as the host hands it, for the cases the worker path cannot produce. */
const withMetadata = (triggerMetadata: Record<string, unknown>, body: unknown = {}): Delivery =>
  toDelivery(body, new InvocationContext({ triggerMetadata }));

describe('toDelivery: what it reads, value by value', () => {
  it('marks a MessageId and a DeliveryCount the body replaced, whatever their case, and reads neither', () => {
    const delivery = withMetadata(
      { messageId: 'from-the-body', deliveryCount: 9, subject: 'PaymentReceived' },
      { MessageId: 'from-the-body', DELIVERYCOUNT: 9, amount: 1 },
    );

    expect(delivery).toMatchObject({
      shadowedByBody: ['messageId', 'deliveryCount'],
      messageId: undefined,
      deliveryCount: 1,
      subject: 'PaymentReceived',
    });
    expect(withMetadata({ messageId: 'm' }, { messageId: 'm' }).shadowedByBody).toEqual(['messageId']);
  });

  it('takes a body property that is null or an array as no replacement (the host skips those)', () => {
    const delivery = withMetadata(
      { messageId: 'broker', deliveryCount: 2 },
      { messageId: null, deliveryCount: [1] },
    );

    expect(delivery).toMatchObject({ shadowedByBody: undefined, messageId: 'broker', deliveryCount: 2 });
  });

  it('reads the metadata of a body that is not an object: null, text, bytes, a list', () => {
    for (const body of [null, 'text', Buffer.from('bytes'), [{ messageId: 'x' }], 42]) {
      expect(withMetadata({ messageId: 'broker' }, body)).toMatchObject({
        body,
        messageId: 'broker',
        shadowedByBody: undefined,
      });
    }
  });

  it('takes a DeliveryCount that is not a whole number above zero as the first delivery', () => {
    const counts = [0, -1, 2.5, 'abc', '3', 4].map(
      (deliveryCount) => withMetadata({ deliveryCount }).deliveryCount,
    );

    expect(counts).toEqual([1, 1, 1, 1, 3, 4]);
  });

  it('takes an empty MessageId as none, and keeps a text one exact', () => {
    expect(withMetadata({ messageId: '' })).toMatchObject({ messageId: undefined, messageIdIsLossy: false });
    expect(withMetadata({ messageId: 'order-1' })).toMatchObject({
      messageId: 'order-1',
      messageIdIsLossy: false,
    });
  });

  it('reads Subject and CorrelationId as text: empty or null is none, another value its JSON', () => {
    expect(withMetadata({ subject: '', correlationId: null })).toMatchObject({
      subject: undefined,
      correlationId: undefined,
    });
    expect(withMetadata({ subject: 42, correlationId: { a: 1 } })).toMatchObject({
      subject: '42',
      correlationId: '{"a":1}',
    });
    expect(withMetadata({ subject: 'PaymentReceived' }).subject).toBe('PaymentReceived');
  });

  it('reads EnqueuedTimeUtc from text or milliseconds; a zoneless time is UTC, a zoned one keeps its zone', () => {
    const at = (enqueuedTimeUtc: unknown): string | undefined =>
      withMetadata({ enqueuedTimeUtc }).enqueuedTimeUtc?.toISOString();

    expect(at('2026-11-29T10:00')).toBe('2026-11-29T10:00:00.000Z');
    expect(at('2026-11-29T10:00:05')).toBe('2026-11-29T10:00:05.000Z');
    expect(at('2026-11-29T10:00:05.123456')).toBe('2026-11-29T10:00:05.123Z');
    expect(at('2026-11-29T10:00:00+02:00')).toBe('2026-11-29T08:00:00.000Z');
    expect(at(Date.UTC(2026, 10, 29, 10))).toBe('2026-11-29T10:00:00.000Z');
    expect([at('not a date'), at(true), at({}), at(undefined)]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('reads ApplicationProperties from UserProperties when the body replaced them', () => {
    const delivery = withMetadata(
      { applicationProperties: { from: 'body' }, userProperties: { tenant: 'contoso' } },
      { applicationProperties: { from: 'body' } },
    );

    expect(delivery.applicationProperties).toEqual({ tenant: 'contoso' });
  });

  it('reads ApplicationProperties from an object or its JSON text; anything else is none', () => {
    const properties = (applicationProperties: unknown): Record<string, unknown> =>
      withMetadata({ applicationProperties }).applicationProperties;

    expect(properties({ tenant: 'contoso' })).toEqual({ tenant: 'contoso' });
    expect(properties('{"tenant":"contoso"}')).toEqual({ tenant: 'contoso' });
    expect([
      properties('{not json'),
      properties('null'),
      properties('[1]'),
      properties(7),
      properties(null),
    ]).toEqual([{}, {}, {}, {}, {}]);
  });
});

describe('markers', () => {
  it('derives a legal, deterministic id per (consumer, MessageId), whatever the MessageId holds', () => {
    const hostile = `${'/\\?#'.repeat(8)}${'ü'.repeat(96)}`;

    const ids = [
      markerId('billing', hostile),
      markerId('billing', hostile),
      markerId('inventory', hostile),
      markerId('billing', 'other'),
    ];

    expect(ids[0]).toBe(ids[1]);
    expect(new Set(ids).size).toBe(3);
    for (const id of ids) expect(id).toMatch(/^inbox-[A-Za-z0-9_-]{43}$/);
  });

  it('does not confuse the consumer and MessageId boundary', () => {
    expect(markerId('ab', 'c')).not.toBe(markerId('a', 'bc'));
  });

  it('hashes the payload independently of key order, but not of values', () => {
    expect(payloadHash({ a: 1, b: { c: [1, 2], d: 'x' } })).toBe(
      payloadHash({ b: { d: 'x', c: [1, 2] }, a: 1 }),
    );
    expect(payloadHash({ a: 1 })).not.toBe(payloadHash({ a: 2 }));
    expect(payloadHash({ list: [1, 2] })).not.toBe(payloadHash({ list: [2, 1] }));
  });
});
