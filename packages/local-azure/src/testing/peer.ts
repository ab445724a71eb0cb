import { connect } from 'node:net';

import {
  ServiceBusClient,
  type ServiceBusReceivedMessage,
  type ServiceBusReceiver,
} from '@azure/service-bus';
import Long from 'long';

import { type LocalServiceBus, type LocalServiceBusOptions, start } from '../servicebus/amqp';
import { type ScaledClock, scaledClock } from '../servicebus/clock';
import { testHooks } from './hooks';

export const TOPIC = 'business-events';
export const PAYMENTS = 'billing.payment-applier';
export const ORDERS = 'inventory.stock-reserver';

/**
 * The topics the peer serves in these tests: the sample's, written here so that the peer's own
 * tests do not change with src/topology.json (npm run new:consumer, npm run remove:samples). The
 * tools' tests that use it send the sample's events, and go with the sample.
 */
/** Plain data (mutable arrays), so that it is also an app's Topology for the tools' tests. */
export const PEER_TOPOLOGY: {
  topics: { name: string; subscriptions: { name: string; subjects: string[] }[] }[];
} = {
  topics: [
    {
      name: TOPIC,
      subscriptions: [
        { name: PAYMENTS, subjects: ['PaymentReceived'] },
        { name: ORDERS, subjects: ['OrderCreated'] },
        { name: 'billing.invoice-status-projector', subjects: ['InvoiceStatusChanged'] },
      ],
    },
  ],
};

export interface PeerFixture {
  peer: LocalServiceBus;
  /** Real time (scale 1) that a test can jump forward, past a lock or a duplicate window. */
  clock: ScaledClock;
  client: ServiceBusClient;
  stop(): Promise<void>;
}

/** The local peer on a free port, and the real @azure/service-bus client connected to it. */
export async function startPeer(options: Partial<LocalServiceBusOptions> = {}): Promise<PeerFixture> {
  const clock = scaledClock(1);
  const peer = await start({
    port: 0,
    clock,
    topology: PEER_TOPOLOGY,
    ...options,
  });
  const client = new ServiceBusClient(peer.connectionString, { retryOptions: { maxRetries: 0 } });
  return {
    peer,
    clock,
    client,
    stop: async () => {
      await client.close();
      await peer.stop();
    },
  };
}

export interface PeerHandle extends PeerFixture {
  /**
   * A peek-lock receiver on a subscription of the topic (or on its dead-letter queue), closed after
   * the test. Tests settle what they receive, so the lock is not renewed automatically.
   */
  receiver: (subscription: string, deadLetter?: boolean) => ServiceBusReceiver;
}

/**
 * A fresh peer for each test of the file (or describe block) that calls this, stopped after the
 * test with the receivers it opened. The handle's fields are set once a test runs.
 */
export function usePeer(options: Partial<LocalServiceBusOptions> = {}): PeerHandle {
  const receivers: ServiceBusReceiver[] = [];
  const handle = {
    receiver: (subscription: string, deadLetter = false): ServiceBusReceiver => {
      const receiver = handle.client.createReceiver(TOPIC, subscription, {
        ...(deadLetter ? { subQueueType: 'deadLetter' as const } : {}),
        maxAutoLockRenewalDurationInMs: 0,
      });
      receivers.push(receiver);
      return receiver;
    },
  } as PeerHandle;
  const { afterEach, beforeEach } = testHooks();
  beforeEach(async () => {
    Object.assign(handle, await startPeer(options));
  });
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
    await handle.stop();
  });
  return handle;
}

/** Receives exactly `count` messages (the SDK returns as soon as it has them). */
export async function receive(
  receiver: ServiceBusReceiver,
  count: number,
  maxWaitTimeInMs = 5_000,
): Promise<ServiceBusReceivedMessage[]> {
  const received: ServiceBusReceivedMessage[] = [];
  while (received.length < count) {
    const batch = await receiver.receiveMessages(count - received.length, { maxWaitTimeInMs });
    if (batch.length === 0) break;
    received.push(...batch);
  }
  return received;
}

/**
 * Everything in a queue without locking it, by pages. The sequence number is explicit: without it,
 * the SDK continues after the last message any receiver on the same client peeked at that entity.
 */
export async function peekAll(receiver: ServiceBusReceiver): Promise<ServiceBusReceivedMessage[]> {
  const peeked: ServiceBusReceivedMessage[] = [];
  let fromSequenceNumber = Long.ONE;
  for (;;) {
    const page = await receiver.peekMessages(50, { fromSequenceNumber });
    if (page.length === 0) return peeked;
    peeked.push(...page);
    fromSequenceNumber = page.at(-1)!.sequenceNumber!.add(1);
  }
}

/** Writes raw bytes to the peer and collects whatever it answers until it closes the socket. */
export function rawExchange(
  port: number,
  chunks: Buffer[],
  options: { hangUp?: boolean } = {},
): Promise<Buffer> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    const giveUp = setTimeout(() => socket.destroy(), 3_000);
    socket.on('data', (data) => received.push(data));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(giveUp);
      resolve(Buffer.concat(received));
    });
    socket.on('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
      if (options.hangUp) socket.end();
    });
  });
}
