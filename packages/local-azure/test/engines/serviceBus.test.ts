import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { ServiceBusClient, type ServiceBusReceivedMessage } from '@azure/service-bus';
import { buildHarness, DOTNET, warnWhenSkipped } from '@idempotent-consumers/engines';

import { ServiceBusTriggers, type TriggerDelivery, triggerSettings } from '../../src/host/serviceBusTriggers';
import { loadFunctionApp, type ServiceBusFunction } from '../../src/host/worker';
import { type LocalServiceBus, start } from '../../src/servicebus/amqp';
import { PAYMENTS, PEER_TOPOLOGY, TOPIC } from '../../src/testing/peer';
import { seen } from '../host/fixtureApp';
/**
 * The local Service Bus peer against the engine the Functions host runs: Azure.Messaging.ServiceBus
 * 7.21.0 (the .NET client of the Service Bus extension), with its default options, driven by the
 * test-only program in packages/engines/src/ServiceBus. The program prints what the client observed; the
 * assertions are here. Without `dotnet` on the machine the suite is skipped, saying so once.
 */
const run = promisify(execFile);
/** The options both triggers run under: the template's extensions.serviceBus, as a host.json of the suite's own. */
const HOST_JSON = join(__dirname, 'host.json');
const MAX_DELIVERY_COUNT = 4;
/** The timing comparison: a 1 s lock, a 1.5 s handler (the fixture's "hang"), more messages than maxConcurrentCalls. */
const LOCK_MS = 1000;
const SLOW_MS = 1500;
const MESSAGES = 40;
const topology = {
  topics: [
    { name: 'engine-events', subscriptions: [{ name: 'engine.checks', subjects: ['EngineChecked'] }] },
  ],
};

warnWhenSkipped(
  'packages/local-azure/test/engines/serviceBus.test.ts',
  'check the local peer against the .NET Service Bus client',
);

interface Seen {
  MessageId: string;
  Subject: string;
  ContentType: string;
  CorrelationId: string | null;
  Body: string;
  DeliveryCount: number;
  DeadLetterReason: string | null;
  DeadLetterErrorDescription: string | null;
  Properties: Record<string, { Type: string; Value: string }>;
}
type Results = Record<string, { Error?: string } & Record<string, unknown>>;

let peer: LocalServiceBus;
let harness: string;
let observed: { run: string; results: Results };
let forJavaScript: ServiceBusReceivedMessage[] = [];

(DOTNET ? describe : describe.skip)(
  'Azure.Messaging.ServiceBus (the extension’s client) against the local peer',
  () => {
    beforeAll(async () => {
      harness = await buildHarness('ServiceBus');
      peer = await start({ topology, maxDeliveryCount: MAX_DELIVERY_COUNT });
      // Interop one way: what the JavaScript client sends, the program receives first.
      const client = new ServiceBusClient(peer.connectionString);
      await client.createSender('engine-events').sendMessages({
        messageId: 'from-javascript',
        subject: 'EngineChecked',
        contentType: 'application/json',
        correlationId: 'correlation-js',
        body: { from: 'javascript' },
        applicationProperties: {
          text: 'from JavaScript',
          whole: 42,
          fraction: 2.5,
          flag: true,
          when: new Date(Date.UTC(2026, 11, 2)),
        },
      });
      const { stdout } = await run(
        'dotnet',
        [
          harness,
          peer.connectionString,
          ...['engine-events', 'engine.checks', 'EngineChecked', String(MAX_DELIVERY_COUNT)],
          HOST_JSON,
        ],
        { timeout: 240_000 },
      );
      observed = JSON.parse(stdout) as typeof observed;
      // And the other: what the program left, the JavaScript client receives.
      const receiver = client.createReceiver('engine-events', 'engine.checks');
      forJavaScript = await receiver.receiveMessages(1, { maxWaitTimeInMs: 30_000 });
      for (const message of forJavaScript) await receiver.completeMessage(message);
      await client.close();
    }, 600_000);

    afterAll(async () => {
      await peer?.stop();
    });

    const result = <T>(check: string): T => {
      const seen = observed.results[check];
      expect({ check, error: seen?.Error }).toEqual({ check, error: undefined });
      return seen as T;
    };

    it('connects with SASL MSSBCBS and a token on $cbs, sends and receives a message intact', () => {
      const seen = result<Seen>('roundtrip');

      expect(seen).toMatchObject({
        MessageId: `${observed.run}-roundtrip`,
        Subject: 'EngineChecked',
        ContentType: 'application/json',
        CorrelationId: 'correlation-1',
        Body: '{"check":"roundtrip"}',
        DeliveryCount: 1,
      });
      expect(seen.Properties).toMatchObject({
        text: { Type: 'String', Value: 'héllo' },
        double: { Type: 'Double', Value: '2.5' },
        bool: { Type: 'Boolean', Value: 'True' },
        when: { Type: 'DateTime', Value: '2026-12-02T15:00:00.0000000Z' },
      });
    });

    it('keeps each property its type: an int Int32, a long Int64, and the described types the client writes', () => {
      expect(result<Seen>('roundtrip').Properties).toMatchObject({
        int: { Type: 'Int32', Value: '42' },
        long: { Type: 'Int64', Value: '1099511627776' },
      });
      expect(result<Seen>('roundtripDescribed').Properties).toEqual({
        offset: { Type: 'DateTimeOffset', Value: '2026-12-02T15:00:00.0000000+00:00' },
        span: { Type: 'TimeSpan', Value: '01:30:00' },
        guid: { Type: 'Guid', Value: '8f2c1c1e-6a8b-4d8e-9a55-2f4b3c1d0e7a' },
        uri: { Type: 'Uri', Value: 'https://example.com/a' },
        bytes: { Type: 'Byte[]', Value: 'System.Byte[]' },
      });
    });

    it('carries a message from @azure/service-bus to the .NET client, and one back, intact', () => {
      expect(result<Seen>('fromJavaScript')).toMatchObject({
        MessageId: 'from-javascript',
        Subject: 'EngineChecked',
        ContentType: 'application/json',
        CorrelationId: 'correlation-js',
        Body: '{"from":"javascript"}',
        Properties: {
          text: { Type: 'String', Value: 'from JavaScript' },
          fraction: { Type: 'Double', Value: '2.5' },
          flag: { Type: 'Boolean', Value: 'True' },
          when: { Type: 'DateTime', Value: '2026-12-02T00:00:00.0000000Z' },
        },
      });
      // JavaScript has one number type: rhea sends a positive whole number as an AMQP uint, and the
      // peer passes it on as it came.
      expect(result<Seen>('fromJavaScript').Properties.whole).toEqual({ Type: 'UInt32', Value: '42' });

      expect(forJavaScript.map((m) => [m.messageId, m.subject, m.correlationId, m.contentType])).toEqual([
        [`${observed.run}-forJavaScript`, 'EngineChecked', 'correlation-2', 'application/json'],
      ]);
      // The SDK hands a data section of JSON over parsed.
      expect(forJavaScript[0]!.body).toEqual({ check: 'forJavaScript' });
      expect(forJavaScript[0]!.applicationProperties).toEqual({
        text: 'from .NET',
        int: 7,
        long: 2 ** 40,
        double: 0.5,
        bool: false,
        // A timestamp: @azure/service-bus hands it over as milliseconds (unless skipConvertingDate).
        when: Date.UTC(2026, 11, 2, 16),
      });
    });

    it('peeks without a delivery, renews a lock, and redelivers an abandoned message with its modified properties', () => {
      const seen = result<{
        Peeked: { MessageId: string; DeliveryCount: number };
        First: Seen;
        RenewMovedLockMs: number;
        Second: Seen;
      }>('abandon');

      expect(seen.Peeked).toEqual({ MessageId: `${observed.run}-abandon`, DeliveryCount: 0 });
      expect(seen.First.DeliveryCount).toBe(1);
      expect(seen.RenewMovedLockMs).toBeGreaterThan(0);
      expect(seen.Second).toMatchObject({ MessageId: `${observed.run}-abandon`, DeliveryCount: 2 });
      expect(seen.Second.Properties.abandonedBy).toEqual({ Type: 'String', Value: 'engine' });
    });

    it('does not count a delivery the client released: a message that came on the credit a timed-out receive left', () => {
      const seen = result<{
        TimedOut: boolean;
        Peeked: { MessageId: string; DeliveryCount: number } | null;
        Received: Seen;
      }>('released');

      expect(seen.TimedOut).toBe(true);
      expect(seen.Peeked).toEqual({ MessageId: `${observed.run}-released`, DeliveryCount: 0 });
      expect(seen.Received).toMatchObject({ MessageId: `${observed.run}-released`, DeliveryCount: 1 });
    });

    it('dead-letters with a reason and a description, read back from the dead-letter queue', () => {
      expect(result<Seen>('deadletter')).toMatchObject({
        MessageId: `${observed.run}-deadletter`,
        DeadLetterReason: 'engine-reason',
        DeadLetterErrorDescription: 'engine description',
      });
    });

    it('receives in receiveAndDelete: the message is handed out once and is gone', () => {
      const seen = result<{ Taken: Seen; Left: string | null }>('receiveAndDelete');

      expect(seen.Taken).toMatchObject({
        MessageId: `${observed.run}-receive-and-delete`,
        Body: '{"check":"receive-and-delete"}',
      });
      expect(seen.Left).toBeNull();
    });

    it('defers a message: set aside with its modified properties, received only by sequence number, then completed', () => {
      const seen = result<{
        PlainReceive: string | null;
        Again: Seen;
        AgainLocked: boolean;
        ThirdDeliveryCount: number;
        AfterComplete: string | null;
      }>('defer');

      expect(seen.PlainReceive).toBeNull();
      expect(seen.Again).toMatchObject({ MessageId: `${observed.run}-deferred` });
      expect(seen.Again.Properties.deferredBy).toEqual({ Type: 'String', Value: 'engine' });
      expect(seen.AgainLocked).toBe(true);
      // The abandon counted a delivery, and the message stayed deferred.
      expect(seen.ThirdDeliveryCount).toBe(seen.Again.DeliveryCount + 1);
      expect(seen.AfterComplete).toBe('MessageNotFound');
    });

    it('schedules a message until its time and cancels another by its sequence number', () => {
      const seen = result<{
        SequenceNumbers: number[];
        CancelAgain: string | null;
        PeekedBefore: string | null;
        Received: Seen;
        ScheduledFor: number;
        Asked: number;
        EnqueuedOnTime: boolean;
        After: string | null;
      }>('schedule');

      expect(seen.SequenceNumbers.every((n) => n > 0)).toBe(true);
      expect(new Set(seen.SequenceNumbers).size).toBe(2);
      expect(seen.PeekedBefore).toBeNull();
      expect(seen.Received.MessageId).toBe(`${observed.run}-scheduled`);
      // AMQP timestamps are whole milliseconds.
      expect(seen.ScheduledFor).toBe(seen.Asked);
      expect(seen.EnqueuedOnTime).toBe(true);
      expect(seen.After).toBeNull();
      expect(seen.CancelAgain).toBe('MessageNotFound');
    });

    it('checks shared access signatures: refuses a wrong key and an expired token, accepts one signed with the key', () => {
      type Outcome = { Sent: boolean; Refused?: string; Reason?: string; Message?: string };
      const seen = result<{ WrongKey: Outcome; Signed: Outcome; SignedReceived: string; Expired: Outcome }>(
        'sas',
      );

      expect(seen.WrongKey).toMatchObject({ Sent: false, Refused: 'UnauthorizedAccessException' });
      expect(seen.WrongKey.Message).toMatch(/InvalidSignature/);
      expect(seen.Expired).toMatchObject({ Sent: false, Refused: 'UnauthorizedAccessException' });
      expect(seen.Expired.Message).toMatch(/ExpiredToken/);
      expect(seen.Signed).toEqual({ Sent: true });
      expect(seen.SignedReceived).toBe(`${observed.run}-sas-signed`);
    });

    it("runs the extension's processor with host.json's options: it completes after success, abandons after a throw until max deliveries, then the message is dead-lettered", () => {
      const seen = result<{
        Options: Record<string, unknown>;
        Deliveries: { MessageId?: string; DeliveryCount?: number }[];
        Errors: { Source: string; Error: string }[];
        DeadLettered: Seen;
      }>('processor');
      const failing = `${observed.run}-processor-fails`;

      expect(seen.Options).toEqual({
        AutoCompleteMessages: true,
        MaxConcurrentCalls: 16,
        PrefetchCount: 0,
        MaxAutoLockRenewalDuration: '00:05:00',
      });
      expect(seen.Deliveries.filter((d) => d.MessageId === `${observed.run}-processor-succeeds`)).toEqual([
        { MessageId: `${observed.run}-processor-succeeds`, DeliveryCount: 1 },
      ]);
      expect(seen.Deliveries.filter((d) => d.MessageId === failing).map((d) => d.DeliveryCount)).toEqual(
        Array.from({ length: MAX_DELIVERY_COUNT }, (_, i) => i + 1),
      );
      // Each throw reaches the error handler as the function's; nothing else went wrong.
      expect(seen.Errors).toEqual(
        Array.from({ length: MAX_DELIVERY_COUNT }, () => ({
          Source: 'ProcessMessageCallback',
          Error: 'The function failed.',
        })),
      );
      expect(seen.DeadLettered).toMatchObject({
        MessageId: failing,
        DeadLetterReason: 'MaxDeliveryCountExceeded',
      });
      // Nothing is left behind: the successful message was completed, not redelivered.
      expect(peer.broker.subscription('engine-events', 'engine.checks').entity.activeCount).toBe(0);
    });

    it("settles as our trigger model does: the model's deliveries and dead letter match the extension's processor", async () => {
      const processor = result<{
        Deliveries: { MessageId?: string; DeliveryCount?: number }[];
        DeadLettered: Seen;
      }>('processor');
      const counts = (messageId: string): number[] =>
        processor.Deliveries.filter((d) => d.MessageId === messageId).map((d) => d.DeliveryCount!);
      const engine = {
        succeeds: counts(`${observed.run}-processor-succeeds`),
        fails: counts(`${observed.run}-processor-fails`),
        deadLetterReason: processor.DeadLettered.DeadLetterReason,
      };

      const model = await runTriggerModel();

      expect(model.deliveries).toEqual(engine);
      // And the model settled each delivery as the extension does: complete on return, abandon on a throw.
      expect(model.settlements).toEqual({
        succeeds: ['completed'],
        fails: Array.from({ length: MAX_DELIVERY_COUNT }, () => 'abandoned'),
      });
    });

    it('serves message sessions to the .NET client: accept by id and next, one receiver each, state, renewal, a send without SessionId refused', async () => {
      const sessionPeer = await start({
        topology,
        queues: [{ name: 'engine-sessions', requiresSession: true }],
      });
      let engine: Results;
      try {
        const { stdout } = await run(
          'dotnet',
          [harness, '--sessions', sessionPeer.connectionString, 'engine-sessions'],
          { timeout: 120_000 },
        );
        engine = (JSON.parse(stdout) as { results: Results }).results;
      } finally {
        await sessionPeer.stop();
      }

      expect(engine).toEqual({
        acceptSession: { SessionId: 'alice', Bodies: ['alice:a1', 'alice:a2'], LockedInFuture: true },
        acceptNextSession: { SessionId: 'bob', Body: 'b1' },
        sessionCannotBeLocked: { Reason: 'SessionCannotBeLocked' },
        sessionState: { Initial: null, Set: 'step-2', Renewed: true },
        sendWithoutSessionId: {
          Refused: 'InvalidOperationException',
          Message: expect.stringContaining('The SessionId was not set on a message') as unknown,
        },
      });
    });

    it('renews the lock of a handler slower than the lock and runs at most maxConcurrentCalls at once, as our trigger model does', async () => {
      const timingPeer = await start({
        topology,
        maxDeliveryCount: MAX_DELIVERY_COUNT,
        lockDurationMs: LOCK_MS,
      });
      let engine: Results;
      try {
        const { stdout } = await run(
          'dotnet',
          [
            harness,
            '--timing',
            timingPeer.connectionString,
            'engine-events',
            'engine.checks',
            'EngineChecked',
            HOST_JSON,
            String(SLOW_MS),
            String(MESSAGES),
          ],
          { timeout: 180_000 },
        );
        engine = (JSON.parse(stdout) as { results: Results }).results;
      } finally {
        await timingPeer.stop();
      }
      const model = await runTimingModel();

      // The engine: renewed while the handler ran, completed on the first delivery; 16 at once
      // (host.json's maxConcurrentCalls), never more.
      expect(engine['slowHandler']).toEqual({ Deliveries: [{ DeliveryCount: 1, Renewed: true }], Left: 0 });
      expect(engine['concurrency']).toEqual({ MaxConcurrentCalls: 16, MaxRunning: 16, Handled: MESSAGES });
      expect(model).toEqual({
        slowHandler: { deliveries: [1], settlements: ['completed'], left: 0 },
        concurrency: { maxRunning: 16, handled: MESSAGES },
      });
    }, 240_000);
  },
);

let fixture: Promise<ServiceBusFunction> | undefined;
/** The fixture consumer of packages/local-azure/test/host/fixtureApp.ts: returns, throws or takes 1.5 s, as the body says. */
function fixtureConsumer(): Promise<ServiceBusFunction> {
  fixture ??= loadFunctionApp([join(__dirname, '..', 'host', 'fixtureApp.ts')]).then((app) =>
    app.serviceBus.find((f) => f.name === 'fixture-consumer')!,
  );
  return fixture;
}

/** Our trigger model (packages/local-azure/src/host/serviceBusTriggers.ts) on `peer` with the suite's host.json, reporting each delivery. */
function modelTriggers(peer: LocalServiceBus, consumer: ServiceBusFunction, deliveries: TriggerDelivery[]) {
  const client = new ServiceBusClient(peer.connectionString);
  const hostJson = JSON.parse(readFileSync(HOST_JSON, 'utf8')) as unknown;
  const triggers = new ServiceBusTriggers(
    client,
    [consumer],
    triggerSettings(hostJson),
    (delivery) => deliveries.push(delivery),
    (_name, error) => {
      throw error;
    },
  );
  return {
    client,
    start: () => triggers.start(),
    stop: async () => {
      await triggers.stop();
      await client.close();
    },
  };
}

async function until(what: string, done: () => boolean, limitMs = 60_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen in ${limitMs / 1000} s.`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * The timing script through our trigger model, on a peer with the same short lock: the fixture's
 * 1.5 s body ("hang") once, then MESSAGES of them at once.
 */
async function runTimingModel(): Promise<{
  slowHandler: { deliveries: number[]; settlements: string[]; left: number };
  concurrency: { maxRunning: number; handled: number };
}> {
  const modelPeer = await start({
    topology: PEER_TOPOLOGY,
    maxDeliveryCount: MAX_DELIVERY_COUNT,
    lockDurationMs: LOCK_MS,
  });
  const deliveries: TriggerDelivery[] = [];
  const model = modelTriggers(modelPeer, await fixtureConsumer(), deliveries);
  const subscription = modelPeer.broker.subscription(TOPIC, PAYMENTS);
  try {
    model.start();
    const sender = model.client.createSender(TOPIC);
    await sender.sendMessages({ body: 'hang', subject: 'PaymentReceived', messageId: 'model-slow' });
    await until('The slow delivery', () => deliveries.length === 1);
    // Twice as long again: a lost lock would bring the message back.
    await new Promise((resolve) => setTimeout(resolve, 2 * SLOW_MS));
    const slowHandler = {
      deliveries: deliveries.map((d) => d.deliveryCount),
      settlements: deliveries.map((d) => d.settlement),
      left: subscription.entity.activeCount,
    };
    deliveries.length = 0;
    seen.maxRunning = 0;
    await sender.sendMessages(
      Array.from({ length: MESSAGES }, (_, i) => ({
        body: 'hang',
        subject: 'PaymentReceived',
        messageId: `model-${i}`,
      })),
    );
    await until('Every concurrent delivery', () => deliveries.length === MESSAGES);
    return { slowHandler, concurrency: { maxRunning: seen.maxRunning, handled: deliveries.length } };
  } finally {
    await model.stop();
    await modelPeer.stop();
  }
}

/**
 * The same script through our Service Bus trigger model (packages/local-azure/src/host/serviceBusTriggers.ts, what
 * npm start runs) with the suite's host.json: a fixture function that returns for one message and
 * throws for another, on a peer with the same maximum delivery count.
 */
async function runTriggerModel(): Promise<{
  deliveries: { succeeds: number[]; fails: number[]; deadLetterReason: string | null };
  settlements: { succeeds: string[]; fails: string[] };
}> {
  const modelPeer = await start({ topology: PEER_TOPOLOGY, maxDeliveryCount: MAX_DELIVERY_COUNT });
  const deliveries: TriggerDelivery[] = [];
  const model = modelTriggers(modelPeer, await fixtureConsumer(), deliveries);
  try {
    model.start();
    await model.client.createSender(TOPIC).sendMessages([
      { body: 'ok', subject: 'PaymentReceived', messageId: 'model-succeeds' },
      { body: 'throw', subject: 'PaymentReceived', messageId: 'model-fails' },
    ]);
    const deadLetters = modelPeer.broker.subscription(TOPIC, PAYMENTS).deadLetterQueue;
    const deadline = Date.now() + 60_000;
    while (deadLetters.activeCount === 0 || deliveries.length < MAX_DELIVERY_COUNT + 1) {
      if (Date.now() > deadline) throw new Error(`The model delivered ${deliveries.length} times in 60 s.`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const of = (messageId: string): TriggerDelivery[] => deliveries.filter((d) => d.messageId === messageId);
    return {
      deliveries: {
        succeeds: of('model-succeeds').map((d) => d.deliveryCount),
        fails: of('model-fails').map((d) => d.deliveryCount),
        deadLetterReason: deadLetters.peek()[0]?.deadLetter?.reason ?? null,
      },
      settlements: {
        succeeds: of('model-succeeds').map((d) => d.settlement),
        fails: of('model-fails').map((d) => d.settlement),
      },
    };
  } finally {
    await model.stop();
    await modelPeer.stop();
  }
}
