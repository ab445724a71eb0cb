import { createHmac } from 'node:crypto';
import { once } from 'node:events';

import {
  type Connection,
  create_container,
  type Delivery,
  type EventContext,
  type Message,
  type Receiver,
} from 'rhea';

import type { LocalServiceBus } from '../../../src/servicebus/amqp';

/**
 * A plain AMQP 1.0 client (rhea) on the local peer, for what neither Service Bus SDK sends on
 * request: a chosen outcome on a delivery, a receiver's credit granted by hand. It authorises the
 * connection as both SDKs do, with a shared access signature for the whole namespace on $cbs.
 */
export interface RheaClient {
  connection: Connection;
  /** A peek-lock receiver on `address` (receiver-settle-mode second), with no credit until `add_credit`. */
  receiver(address: string): Receiver;
  /** The next delivery `receiver` gets, with its message. */
  next(receiver: Receiver): Promise<{ delivery: Delivery; message: Message }>;
  /** What the connection was closed with by the peer, once it is. */
  closed: Promise<{ condition?: string; description?: string } | undefined>;
  close(): Promise<void>;
}

/** `tokenLifetimeMs`: how long the token put on $cbs is valid (default an hour, as the SDKs put it). */
export async function connectRhea(peer: LocalServiceBus, tokenLifetimeMs = 3_600_000): Promise<RheaClient> {
  const container = create_container({ id: 'rhea-test-client' });
  const connection = container.connect({ host: peer.host, port: peer.port, reconnect: false });
  const closed = new Promise<{ condition?: string; description?: string } | undefined>((resolve) => {
    connection.on('connection_error', (context: EventContext) =>
      resolve(context.connection.error as { condition?: string; description?: string }),
    );
    connection.on('connection_close', () => resolve(undefined));
    connection.on('disconnected', () => resolve(undefined));
  });
  await once(connection, 'connection_open');
  await putToken(connection, peer, tokenLifetimeMs);
  return {
    connection,
    receiver: (address) =>
      connection.open_receiver({
        source: { address },
        autoaccept: false,
        credit_window: 0,
        rcv_settle_mode: 1,
      }),
    next: (receiver) =>
      new Promise((resolve) =>
        receiver.once('message', (context: EventContext) =>
          resolve({ delivery: context.delivery!, message: context.message! }),
        ),
      ),
    closed,
    close: async () => {
      if (!connection.is_open()) return;
      connection.close();
      await Promise.race([once(connection, 'connection_close'), once(connection, 'disconnected')]);
    },
  };
}

/** put-token on $cbs, answered on a reply link, as @azure/service-bus does it. */
async function putToken(connection: Connection, peer: LocalServiceBus, lifetimeMs: number): Promise<void> {
  const resource = encodeURIComponent(`sb://${peer.host}:${peer.port}/`);
  const expiry = Math.round((Date.now() + lifetimeMs) / 1000);
  const signature = createHmac('sha256', 'SAS_KEY_VALUE').update(`${resource}\n${expiry}`).digest('base64');
  const token = `SharedAccessSignature sr=${resource}&sig=${encodeURIComponent(signature)}&se=${expiry}&skn=RootManageSharedAccessKey`;
  const replies = connection.open_receiver({ source: { address: '$cbs' }, target: { address: 'cbs-reply' } });
  const requests = connection.open_sender({ target: { address: '$cbs' } });
  await Promise.all([once(replies, 'receiver_open'), once(requests, 'sendable')]);
  const answered = once(replies, 'message') as Promise<[EventContext]>;
  requests.send({
    message_id: 'put-token-1',
    reply_to: 'cbs-reply',
    application_properties: {
      operation: 'put-token',
      type: 'servicebus.windows.net:sastoken',
      name: decodeURIComponent(resource),
    },
    body: token,
  });
  const [{ message }] = await answered;
  const status = (message?.application_properties as Record<string, unknown> | undefined)?.['status-code'];
  if (status !== 202) throw new Error(`put-token was answered ${String(status)}`);
}
