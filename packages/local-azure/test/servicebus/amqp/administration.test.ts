import { createHmac } from 'node:crypto';
import { request } from 'node:https';

import { isServiceBusError, ServiceBusAdministrationClient } from '@azure/service-bus';

import { PEER_TOPOLOGY, type PeerFixture, receive, startPeer, TOPIC } from '../../../src/testing/peer';

/**
 * The peer's administration endpoint (HTTPS on the AMQP port, the ATOM protocol), through
 * @azure/service-bus's ServiceBusAdministrationClient, trusting the peer's certificate: entities
 * created, read, updated, listed and deleted, their runtime counts, the properties the model
 * honours taking effect over AMQP, and the errors as the SDK surfaces them.
 */
let fixture: PeerFixture;
let admin: ServiceBusAdministrationClient;

beforeEach(async () => {
  fixture = await startPeer();
  admin = new ServiceBusAdministrationClient(
    fixture.peer.connectionString,
    fixture.peer.administrationClientOptions,
  );
});
afterEach(async () => {
  await fixture.stop();
});

/** The RestError code and status an administration call failed with. */
async function failure(call: Promise<unknown>): Promise<{ code: unknown; statusCode: unknown }> {
  try {
    await call;
  } catch (error) {
    const { code, statusCode } = error as { code?: unknown; statusCode?: unknown };
    return { code, statusCode };
  }
  throw new Error('The call succeeded.');
}

/** A PUT of a raw body to the endpoint, signed as the SDK signs (its status and the start of its body). */
function put(path: string, body: string): Promise<{ status: number | undefined; body: string }> {
  const url = `https://${fixture.peer.host}:${fixture.peer.port}/${path}?api-version=2021-05`;
  const resource = encodeURIComponent(url.toLowerCase()).toLowerCase();
  const expiry = Math.round(Date.now() / 1000) + 300;
  const signature = encodeURIComponent(
    createHmac('sha256', 'SAS_KEY_VALUE').update(`${resource}\n${expiry}`).digest('base64'),
  );
  return new Promise((resolve, reject) => {
    const call = request(
      url,
      {
        method: 'PUT',
        ca: fixture.peer.certificate,
        headers: {
          authorization: `SharedAccessSignature sig=${signature}&se=${expiry}&skn=RootManageSharedAccessKey&sr=${resource}`,
          'content-type': 'application/atom+xml;type=entry;charset=utf-8',
        },
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode, body: text.slice(0, 200) }));
      },
    );
    call.on('error', reject);
    call.end(body);
  });
}

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of pages) items.push(item);
  return items;
}

describe('the namespace', () => {
  it('reads as a Standard namespace', async () => {
    const namespace = await admin.getNamespaceProperties();
    expect(namespace.messagingSku).toBe('Standard');
    expect(namespace.createdAt.getTime()).toBeLessThanOrEqual(Date.now());
  });
});

describe('queues', () => {
  it('are created, read, listed, updated and deleted', async () => {
    const created = await admin.createQueue('orders', {
      lockDuration: 'PT30S',
      maxDeliveryCount: 3,
      requiresDuplicateDetection: true,
      duplicateDetectionHistoryTimeWindow: 'PT2M',
      enablePartitioning: true,
      userMetadata: 'kept as sent',
    });
    expect(created).toMatchObject({
      name: 'orders',
      lockDuration: 'PT30S',
      maxDeliveryCount: 3,
      requiresDuplicateDetection: true,
      duplicateDetectionHistoryTimeWindow: 'PT2M',
      enablePartitioning: true,
      userMetadata: 'kept as sent',
      requiresSession: false,
      status: 'Active',
    });
    await admin.createQueue('invoices');

    expect(await admin.queueExists('orders')).toBe(true);
    expect(await admin.queueExists('missing')).toBe(false);
    expect((await all(admin.listQueues())).map((q) => q.name)).toEqual(['invoices', 'orders']);

    const queue = await admin.getQueue('orders');
    const updated = await admin.updateQueue({ ...queue, maxDeliveryCount: 7, lockDuration: 'PT1M' });
    expect(updated).toMatchObject({
      maxDeliveryCount: 7,
      lockDuration: 'PT1M',
      userMetadata: 'kept as sent',
    });
    expect(fixture.peer.broker.queue('orders').entity.maxDeliveryCount).toBe(7);

    await admin.deleteQueue('orders');
    expect(await admin.queueExists('orders')).toBe(false);
    expect(fixture.peer.broker.queues.has('orders')).toBe(false);
  });

  it('created with requiresSession, receive by session', async () => {
    expect(await admin.createQueue('sessioned', { requiresSession: true })).toMatchObject({
      requiresSession: true,
    });
    await fixture.client
      .createSender('sessioned')
      .sendMessages({ body: 'x', messageId: 's', sessionId: 'a' });
    const receiver = await fixture.client.acceptNextSession('sessioned');
    const [message] = await receive(receiver, 1);

    expect([receiver.sessionId, message?.messageId]).toEqual(['a', 's']);
    await receiver.completeMessage(message!);
  });

  it('lists in pages of $top, continuing from $skip', async () => {
    for (const name of ['q1', 'q2', 'q3', 'q4', 'q5']) await admin.createQueue(name);
    const pages: string[][] = [];
    for await (const page of admin.listQueues().byPage({ maxPageSize: 2 }))
      pages.push(page.map((q) => q.name));
    expect(pages).toEqual([['q1', 'q2'], ['q3', 'q4'], ['q5']]);
  });

  it('answers 409 for a name taken (by a queue or a topic) and 404 for one not there, as the SDK surfaces them', async () => {
    await admin.createQueue('taken');
    expect(await failure(admin.createQueue('TAKEN'))).toEqual({
      code: 'MessageEntityAlreadyExistsError',
      statusCode: 409,
    });
    expect(await failure(admin.createQueue(TOPIC))).toMatchObject({ statusCode: 409 });
    expect(await failure(admin.getQueue('absent'))).toEqual({
      code: 'MessageEntityNotFoundError',
      statusCode: 404,
    });
    expect(await failure(admin.deleteQueue('absent'))).toEqual({
      code: 'MessageEntityNotFoundError',
      statusCode: 404,
    });
    const queue = await admin.getQueue('taken');
    expect(await failure(admin.updateQueue({ ...queue, name: 'absent' }))).toMatchObject({ statusCode: 404 });
  });

  it('created over ATOM works over AMQP at once, with its own lock duration and maximum delivery count', async () => {
    await admin.createQueue('work', { lockDuration: 'PT5S', maxDeliveryCount: 2 });
    await fixture.client.createSender('work').sendMessages({ body: 'poison', messageId: 'p1' });
    const receiver = fixture.client.createReceiver('work', { maxAutoLockRenewalDurationInMs: 0 });
    for (let delivery = 0; delivery < 2; delivery++) {
      const [message] = await receive(receiver, 1);
      const lockMs = message!.lockedUntilUtc!.getTime() - message!.enqueuedTimeUtc!.getTime();
      expect(lockMs).toBeGreaterThan(4_000);
      expect(lockMs).toBeLessThanOrEqual(5_000 + 1_000);
      await receiver.abandonMessage(message!);
    }
    const [dead] = await receive(fixture.client.createReceiver('work', { subQueueType: 'deadLetter' }), 1);

    expect(dead).toMatchObject({ messageId: 'p1', deadLetterReason: 'MaxDeliveryCountExceeded' });
  });

  it('counts active, dead-lettered and scheduled messages', async () => {
    await admin.createQueue('counted');
    const sender = fixture.client.createSender('counted');
    await sender.sendMessages([
      { body: 'a', messageId: 'a' },
      { body: 'b', messageId: 'b' },
      { body: 'c', messageId: 'c' },
    ]);
    const [later] = await sender.scheduleMessages(
      { body: 'later', messageId: 'l' },
      new Date(Date.now() + 60_000),
    );
    const receiver = fixture.client.createReceiver('counted');
    const [first] = await receive(receiver, 1);
    await receiver.deadLetterMessage(first!, { deadLetterReason: 'Bad', deadLetterErrorDescription: 'bad' });

    const counts = await admin.getQueueRuntimeProperties('counted');
    expect(counts).toMatchObject({
      name: 'counted',
      activeMessageCount: 2,
      deadLetterMessageCount: 1,
      scheduledMessageCount: 1,
      transferMessageCount: 0,
      totalMessageCount: 4,
    });
    expect(counts.sizeInBytes).toBeGreaterThan(0);
    await sender.cancelScheduledMessages(later!);
  });

  it('drops a duplicate only when created with duplicate detection', async () => {
    await admin.createQueue('plain');
    await admin.createQueue('deduplicated', { requiresDuplicateDetection: true });
    for (const name of ['plain', 'deduplicated']) {
      const sender = fixture.client.createSender(name);
      await sender.sendMessages({ body: 'one', messageId: 'same' });
      await sender.sendMessages({ body: 'two', messageId: 'same' });
    }
    expect((await admin.getQueueRuntimeProperties('plain')).activeMessageCount).toBe(2);
    expect((await admin.getQueueRuntimeProperties('deduplicated')).activeMessageCount).toBe(1);
  });

  it('expires a message at its default TTL, dead-lettering it only when asked to', async () => {
    await admin.createQueue('dropping', { defaultMessageTimeToLive: 'PT1S' });
    await admin.createQueue('keeping', {
      defaultMessageTimeToLive: 'PT1S',
      deadLetteringOnMessageExpiration: true,
    });
    for (const name of ['dropping', 'keeping'])
      await fixture.client.createSender(name).sendMessages({ body: 'short-lived', messageId: name });
    fixture.clock.advance(2_000);
    for (const name of ['dropping', 'keeping'])
      expect(await fixture.client.createReceiver(name).receiveMessages(1, { maxWaitTimeInMs: 300 })).toEqual(
        [],
      );

    expect((await admin.getQueueRuntimeProperties('dropping')).deadLetterMessageCount).toBe(0);
    const [dead] = await fixture.client
      .createReceiver('keeping', { subQueueType: 'deadLetter' })
      .peekMessages(1);
    expect(dead).toMatchObject({ messageId: 'keeping', deadLetterReason: 'TTLExpiredException' });
  });

  it('deleted, ends its receivers: a receive from it fails as not found', async () => {
    await admin.createQueue('doomed');
    const receiver = fixture.client.createReceiver('doomed');
    await receiver.peekMessages(1);
    const receiving = receiver.receiveMessages(1, { maxWaitTimeInMs: 10_000 }).then(
      () => 'returned',
      (error: unknown) => (isServiceBusError(error) ? error.code : String(error)),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await admin.deleteQueue('doomed');

    expect(await receiving).toBe('MessagingEntityNotFound');
    const again = await fixture.client
      .createSender('doomed')
      .sendMessages({ body: 'x' })
      .then(
        () => 'sent',
        (error: unknown) => (isServiceBusError(error) ? error.code : String(error)),
      );
    expect(again).toBe('MessagingEntityNotFound');
  });
});

describe('topics and subscriptions', () => {
  it('are created, read, listed, updated and deleted, and a subscription created over ATOM takes every message', async () => {
    await admin.createTopic('events', {
      requiresDuplicateDetection: true,
      duplicateDetectionHistoryTimeWindow: 'PT1H',
    });
    await admin.createSubscription('events', 'audit', { lockDuration: 'PT10S', maxDeliveryCount: 4 });
    await admin.createSubscription('events', 'billing');

    expect((await all(admin.listTopics())).map((t) => t.name)).toEqual([TOPIC, 'events']);
    expect((await all(admin.listSubscriptions('events'))).map((s) => s.subscriptionName)).toEqual([
      'audit',
      'billing',
    ]);
    expect(await admin.getSubscription('events', 'audit')).toMatchObject({
      topicName: 'events',
      subscriptionName: 'audit',
      lockDuration: 'PT10S',
      maxDeliveryCount: 4,
    });
    expect(await admin.topicExists('events')).toBe(true);
    expect(await admin.subscriptionExists('events', 'nope')).toBe(false);

    await fixture.client.createSender('events').sendMessages([
      { body: 'x', subject: 'Anything', messageId: 'x' },
      { body: 'y', messageId: 'y' },
    ]);
    const topic = await admin.getTopicRuntimeProperties('events');
    expect(topic).toMatchObject({ name: 'events', subscriptionCount: 2, scheduledMessageCount: 0 });
    const audit = await admin.getSubscriptionRuntimeProperties('events', 'audit');
    expect(audit).toMatchObject({ activeMessageCount: 2, deadLetterMessageCount: 0, totalMessageCount: 2 });

    const subscription = await admin.getSubscription('events', 'audit');
    expect(await admin.updateSubscription({ ...subscription, maxDeliveryCount: 9 })).toMatchObject({
      maxDeliveryCount: 9,
    });
    await admin.deleteSubscription('events', 'billing');
    expect((await all(admin.listSubscriptions('events'))).map((s) => s.subscriptionName)).toEqual(['audit']);
    await admin.deleteTopic('events');
    expect(await admin.topicExists('events')).toBe(false);
  });

  it('reads the declared topology with the model’s settings', async () => {
    const names = PEER_TOPOLOGY.topics[0]!.subscriptions.map((s) => s.name).sort();
    expect((await all(admin.listSubscriptions(TOPIC))).map((s) => s.subscriptionName)).toEqual(names);
    expect(await admin.getTopic(TOPIC)).toMatchObject({
      requiresDuplicateDetection: true,
      duplicateDetectionHistoryTimeWindow: 'PT1H',
      defaultMessageTimeToLive: 'P14D',
    });
    expect(await admin.getSubscription(TOPIC, names[0]!)).toMatchObject({
      lockDuration: 'PT1M',
      maxDeliveryCount: 10,
    });
  });

  it('a subscription deleted detaches its receivers, and creating one under a missing topic is not found', async () => {
    await admin.createTopic('short');
    await admin.createSubscription('short', 'only');
    const receiver = fixture.client.createReceiver('short', 'only');
    await receiver.peekMessages(1);
    const receiving = receiver.receiveMessages(1, { maxWaitTimeInMs: 10_000 }).then(
      () => 'returned',
      (error: unknown) => (isServiceBusError(error) ? error.code : String(error)),
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await admin.deleteSubscription('short', 'only');

    expect(await receiving).toBe('MessagingEntityNotFound');
    expect(await failure(admin.createSubscription('missing', 'sub'))).toMatchObject({ statusCode: 404 });
  });
});

describe('rules', () => {
  it('a subscription created over ATOM has the $Default true rule; rules are created, read, listed, updated and deleted, and filter', async () => {
    await admin.createTopic('routed');
    await admin.createSubscription('routed', 'picky');
    expect((await all(admin.listRules('routed', 'picky'))).map((r) => [r.name, r.filter])).toEqual([
      ['$Default', { sqlExpression: '1=1', sqlParameters: undefined }],
    ]);

    await admin.deleteRule('routed', 'picky', '$Default');
    await admin.createRule('routed', 'picky', 'orders', {
      subject: 'OrderCreated',
      applicationProperties: { tenant: 'a' },
    });
    await admin.createRule('routed', 'picky', 'big', { sqlExpression: "region = 'eu'" });
    expect(await admin.getRule('routed', 'picky', 'orders')).toMatchObject({
      name: 'orders',
      filter: { subject: 'OrderCreated', applicationProperties: { tenant: 'a' } },
    });
    expect(await failure(admin.createRule('routed', 'picky', 'orders', { subject: 'Again' }))).toMatchObject({
      code: 'MessageEntityAlreadyExistsError',
      statusCode: 409,
    });
    expect(await admin.ruleExists('routed', 'picky', 'nope')).toBe(false);

    const sender = fixture.client.createSender('routed');
    await sender.sendMessages([
      { body: 1, messageId: 'm1', subject: 'OrderCreated', applicationProperties: { tenant: 'a' } },
      { body: 2, messageId: 'm2', subject: 'OrderCreated', applicationProperties: { tenant: 'b' } },
      { body: 3, messageId: 'm3', applicationProperties: { region: 'eu' } },
    ]);
    const peeked = await fixture.client.createReceiver('routed', 'picky').peekMessages(10);
    expect(peeked.map((m) => m.messageId)).toEqual(['m1', 'm3']);

    const rule = await admin.getRule('routed', 'picky', 'big');
    await admin.updateRule('routed', 'picky', { ...rule, filter: { sqlExpression: "region = 'us'" } });
    expect((await admin.getRule('routed', 'picky', 'big')).filter).toMatchObject({
      sqlExpression: "region = 'us'",
    });
    await admin.deleteRule('routed', 'picky', 'big');
    expect((await all(admin.listRules('routed', 'picky'))).map((r) => r.name)).toEqual(['orders']);
  });

  it('a subscription created with a default rule filters with it; an action is refused (400)', async () => {
    await admin.createTopic('defaults');
    await admin.createSubscription('defaults', 'payments', {
      defaultRuleOptions: { name: 'only-payments', filter: { subject: 'PaymentReceived' } },
    });
    expect((await all(admin.listRules('defaults', 'payments'))).map((r) => r.name)).toEqual([
      'only-payments',
    ]);
    await fixture.client.createSender('defaults').sendMessages([
      { body: 1, messageId: 'p', subject: 'PaymentReceived' },
      { body: 2, messageId: 'o', subject: 'OrderCreated' },
    ]);
    expect((await admin.getSubscriptionRuntimeProperties('defaults', 'payments')).activeMessageCount).toBe(1);

    expect(
      await failure(
        admin.createRule(
          'defaults',
          'payments',
          'acting',
          { sqlExpression: '1=1' },
          { sqlExpression: "SET x = 'y'" },
        ),
      ),
    ).toMatchObject({ statusCode: 400 });
  });
});

describe('refusals', () => {
  it('a wrong key is 401', async () => {
    const wrong = fixture.peer.connectionString.replace('SAS_KEY_VALUE', 'not-the-key');
    const other = new ServiceBusAdministrationClient(wrong, fixture.peer.administrationClientOptions);
    expect(await failure(other.getQueue('any'))).toEqual({
      code: 'UnauthorizedRequestError',
      statusCode: 401,
    });
  });

  it('a name Service Bus would refuse is 400, and so is a value of the wrong type', async () => {
    expect(await failure(admin.createQueue('bad name!'))).toMatchObject({
      code: 'ServiceError',
      statusCode: 400,
    });
    expect(await failure(admin.createQueue('x'.repeat(261)))).toMatchObject({ statusCode: 400 });
    expect(await failure(admin.createSubscription(TOPIC, 's'.repeat(51)))).toMatchObject({ statusCode: 400 });
    expect(await failure(admin.createQueue('locked', { lockDuration: 'PT10M' }))).toMatchObject({
      statusCode: 400,
    });
    expect(await admin.queueExists('locked')).toBe(false);
  });

  it('a body over 256 KB is 413, and the error does not echo it', async () => {
    const error = await admin
      .createQueue('big', { userMetadata: 'm'.repeat(300 * 1024) })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ statusCode: 413 });
    expect(String((error as Error).message).length).toBeLessThan(1_000);
  });

  it('a body nested too deep, or declaring entities, is 400 and the peer serves on', async () => {
    const entry = (content: string): string =>
      `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">${content}</content></entry>`;
    const deep = entry(`${'<a>'.repeat(20_000)}${'</a>'.repeat(20_000)}`);
    const declared = `<!DOCTYPE x [<!ENTITY e "boom">]>${entry('<QueueDescription><UserMetadata>&e;</UserMetadata></QueueDescription>')}`;

    expect(await put('deep', deep)).toMatchObject({ status: 400 });
    expect(await put('declared', declared)).toMatchObject({ status: 400 });
    expect((await put('fine', entry('<QueueDescription/>'))).status).toBe(201);
    expect(await admin.queueExists('fine')).toBe(true);
  });

  it('an untrusted client (no CA given) does not connect: the certificate is self-signed', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const call = request(
        { host: fixture.peer.host, port: fixture.peer.port, path: '/$namespaceinfo', method: 'GET' },
        () => resolve('connected'),
      );
      call.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
      call.end();
    });
    expect(outcome).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
  });
});
