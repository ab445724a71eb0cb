import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, createServer, type Socket } from 'node:net';

import { type Connection, create_container, type EventContext, type Receiver, type Sender } from 'rhea';

import { localCertificate } from '../administration/certificate';
import { administrationEndpoint } from '../administration/endpoint';
import { LOCAL_NAMESPACE_RESOURCE_ID, resourceManagerEndpoint } from '../administration/resourceManager';
import {
  Broker,
  type BrokerObserver,
  type BrokerOptions,
  type BrokerTopology,
  type Entity,
  type Topic,
} from '../broker';
import { type Clock, MAX_TIMEOUT_MS, scaledClock } from '../clock';
import {
  findEntity,
  findQueue,
  findSubscription,
  findTopic,
  type NodeAddress,
  parseAddress,
} from './addresses';
import { asPeerError, closeOnFailure, CONDITIONS, PeerError } from './errors';
import { handleManagementRequest, handleTopicRequest, TOPIC_OPERATIONS } from './management';
import { keepEncodedMessages } from './messageCodec';
import { MAX_MESSAGE_SIZE_BYTES, servePublishLink } from './publishLink';
import { serveReceiveLink } from './receiveLink';
import { serveRequestLink, STATUS_KEYS } from './requestResponse';
import { handleRuleRequest, isRuleOperation } from './ruleManagement';
import { checkToken, covers, type Grant, LOCAL_KEY, unauthorized } from './sas';
import { serveSessionLink, sessionRequestOf } from './sessionLink';

/**
 * A local AMQP 1.0 peer that serves the Service Bus model (broker.ts) to the real @azure/service-bus
 * client, and to the .NET client the Functions host's extension runs (Azure.Messaging.ServiceBus:
 * packages/local-azure/test/engines/serviceBus.test.ts), over plain TCP with a `UseDevelopmentEmulator=true` connection
 * string, in real time.
 *
 * Implements, as far as @azure/service-bus 7.9 and the .NET client's send, receive, peek, renew,
 * abandon, dead-letter and processor use it:
 *   - SASL ANONYMOUS (JavaScript), MSSBCBS (.NET) or no SASL; $cbs put-token with a shared access
 *     signature checked against the emulator's key (sas.ts: a wrong key, a bad signature or an
 *     expired token is answered 401, amqp:unauthorized-access; status codes are AMQP ints, as
 *     Service Bus sends them), and a link to an entity no token covers is refused the same way;
 *     a link is detached the same way once the last token that covered it has expired unrenewed
 *   - queues, when start() is given their names: a send to the queue and a receive from it (and from
 *     its $DeadLetterQueue), its $management as a subscription's plus scheduling as a topic's
 *   - message sessions on a queue declared with requiresSession, or a subscription created with it
 *     (Broker.addSubscription; sessionLink.ts, ../sessions.ts): a send without a SessionId to the
 *     queue refused (amqp:not-allowed, Service Bus's words; the subscription dead-letters its copy
 *     with 'Session id is null.'); a receiver attached with the source filter
 *     com.microsoft:session-filter (a session id, or null for the next available session, waited
 *     for up to the link's com.microsoft:timeout) gets the session's messages in order, the session id in its attach's filter and com.microsoft:locked-until-utc
 *     (.NET ticks); com.microsoft:session-cannot-be-locked for a session another receiver holds,
 *     com.microsoft:timeout when no session came; com.microsoft:session-lock-lost once the session
 *     lock ran out (what was not settled is available again, counted); on $management
 *     com.microsoft:renew-session-lock, get-session-state and set-session-state, and peek,
 *     receive-by-sequence-number and update-disposition within the session named by session-id; a
 *     plain receiver on a session queue and a session receiver on another entity refused
 *     (amqp:not-allowed)
 *   - sending to a topic: single messages and batches (message-format 0x80013700) up to the Standard
 *     tier's 256 KB (larger: amqp:link:message-size-exceeded); duplicate
 *     detection by MessageId and the Subject correlation filters are the broker model's;
 *     application properties of string, number, boolean or timestamp (Date)
 *   - receiveAndDelete receiving (a message is gone once it is sent, settled), and
 *     peek-lock receiving from a subscription and from its $DeadLetterQueue: credit, drain, a message
 *     locked only as it is handed out within the receiver's credit (competing receivers share a
 *     backlog; what a receiver did not take stays receivable), the lock token as delivery tag,
 *     settlement by accepted (complete), released (available again, not counted), modified
 *     (abandon, counted, with the properties to modify merged into the application properties),
 *     modified undeliverable-here (defer) and rejected
 *     com.microsoft:dead-letter (with DeadLetterReason/DeadLetterErrorDescription)
 *   - $management: com.microsoft:peek-message, com.microsoft:renew-lock (expirations: an AMQP array
 *     of timestamps), com.microsoft:update-disposition, com.microsoft:receive-by-sequence-number
 *     (deferred messages); on a topic, com.microsoft:schedule-message and
 *     com.microsoft:cancel-scheduled-message (a message sent with x-opt-scheduled-enqueue-time is
 *     scheduled too; the topic holds it until its time); on a subscription, com.microsoft:add-rule,
 *     remove-rule and enumerate-rules (ruleManagement.ts); errors carry their condition as a symbol
 *   - errors as AMQP errors: unknown node → amqp:not-found on the link, lock lost →
 *     com.microsoft:message-lock-lost, unreadable frame → close with amqp:decode-error, bytes that
 *     are not AMQP → the AMQP protocol header, then close; a failure of the peer's own (handing a
 *     message out, accepting a session, a token's expiry) → close with amqp:internal-error
 *     (errors.ts closeOnFailure); other connections are unaffected
 *   - on the same port, HTTPS for ServiceBusAdministrationClient (a connection whose first byte is a
 *     TLS handshake goes to ../administration/endpoint.ts; anything else is AMQP): the ATOM
 *     management protocol over the same model, with a self-signed certificate made at start
 *     (`certificate`, `administrationClientOptions`); deleting an entity there detaches the links
 *     on it with amqp:not-found
 * Does not implement: TLS for AMQP, WebSockets, Azure AD tokens (refused), closing links when their token
 * expires (a token is checked when it is put and when a link attaches), a session setting in
 * src/topology.json, com.microsoft:get-message-sessions,
 * rule actions and SQL filters beyond rules.ts's subset,
 * transactions, auto-forwarding, message annotations the model does not keep, and bodies other
 * than one data section.
 * Application properties go back as they came (typed: an Int32 stays an Int32, and the .NET
 * client's DateTimeOffset, TimeSpan, Guid, Uri and bytes pass through); the model itself keeps
 * only those of JavaScript's types (string, number, boolean, Date).
 */
export interface LocalServiceBusOptions {
  /** TCP port; default 0, a free one (the CLI defaults to 5672, the emulator's). */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** The topics and subscriptions to serve: the app's declared topology (src/topology.json), as data. */
  topology: BrokerTopology;
  /** How delayed copies are told apart (broker.ts BrokerOptions.retryCopies); required when a subscription declares delayedRetry. */
  retryCopies?: BrokerOptions['retryCopies'];
  /**
   * Default real time: scaledClock(1). The client's own timers (lock renewal, lockedUntilUtc) run on
   * the wall clock, so keep the scale at 1; a test passes its own to jump with `advance`.
   */
  clock?: Clock;
  /** Duplicate detection window, ms; default one hour (PT1H, as the Bicep sets it). */
  duplicateWindowMs?: number;
  /** Lock duration, ms; default one minute (PT1M). */
  lockDurationMs?: number;
  /** Default 10. */
  maxDeliveryCount?: number;
  /** Default subscription message TTL, ms; default 14 days. */
  messageTimeToLiveMs?: number;
  observer?: BrokerObserver;
  /** Queues to serve besides the topology's topics (broker.ts BrokerOptions.queues); default none. */
  queues?: BrokerOptions['queues'];
}

export interface LocalServiceBus {
  /**
   * For ServiceBusClient: plain AMQP on the port, with the emulator's key, which the peer checks; and
   * for ServiceBusAdministrationClient, which sends HTTPS to the same host and port (give it
   * `administrationClientOptions`, so that it trusts the peer's certificate).
   */
  readonly connectionString: string;
  /** The administration endpoint's self-signed certificate (PEM; 127.0.0.1, ::1, localhost), for a client to trust. */
  readonly certificate: string;
  /** `new ServiceBusAdministrationClient(connectionString, administrationClientOptions)`: trusts `certificate`. */
  readonly administrationClientOptions: { tlsOptions: { ca: string } };
  /**
   * Azure Resource Manager's reads of the topics and subscriptions (administration/resourceManager.ts),
   * plain HTTP on a port of its own: AZURE_RESOURCE_MANAGER_ENDPOINT and SERVICEBUS_RESOURCE_ID for the app.
   */
  readonly resourceManager: { endpoint: string; namespaceResourceId: string };
  readonly host: string;
  readonly port: number;
  readonly broker: Broker;
  readonly clock: Clock;
  stop(): Promise<void>;
}

const MAX_GRANTS = 1000;

/** The connection string of a peer on `host`:`port`, in the Service Bus emulator's format, with the emulator's key. */
export function connectionStringFor(host: string, port: number): string {
  return `Endpoint=sb://${host}:${port};SharedAccessKeyName=${LOCAL_KEY.name};SharedAccessKey=${LOCAL_KEY.value};UseDevelopmentEmulator=true;`;
}

/** "AMQP", protocol id 0, version 1.0.0. */
const AMQP_PROTOCOL_HEADER = Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 1, 0, 0]);
/** The first byte of a TLS record that carries a handshake (a ClientHello, first thing a TLS client sends). */
const TLS_HANDSHAKE = 0x16;

/**
 * The links attached to each node (an entity received from, a topic or queue sent to), so that
 * deleting the node over the administration endpoint detaches them, as Service Bus does.
 */
class AttachedLinks {
  private readonly byNode = new Map<Entity | Topic, Set<Sender | Receiver>>();

  add(node: Entity | Topic, link: Sender | Receiver): void {
    let attached = this.byNode.get(node);
    if (!attached) this.byNode.set(node, (attached = new Set()));
    attached.add(link);
    const forget = (): void => {
      attached.delete(link);
      if (attached.size === 0 && this.byNode.get(node) === attached) this.byNode.delete(node);
    };
    link.once('sender_close', forget);
    link.once('receiver_close', forget);
  }

  detach(node: Entity | Topic, path: string): void {
    const attached = this.byNode.get(node);
    this.byNode.delete(node);
    for (const link of attached ?? []) {
      link.close(
        // In Service Bus's words, which the SDK matches to say MessagingEntityNotFound.
        new PeerError(
          CONDITIONS.notFound,
          `The messaging entity '${path}' could not be found: it was deleted.`,
        ).toAmqp(),
      );
    }
  }
}

export async function start(options: LocalServiceBusOptions): Promise<LocalServiceBus> {
  const host = options.host ?? '127.0.0.1';
  const clock = options.clock ?? scaledClock(1);
  const brokerOptions: BrokerOptions = {
    topology: options.topology,
    clock,
    ...(options.duplicateWindowMs === undefined ? {} : { duplicateWindowMs: options.duplicateWindowMs }),
    ...(options.lockDurationMs === undefined ? {} : { lockDurationMs: options.lockDurationMs }),
    ...(options.maxDeliveryCount === undefined ? {} : { maxDeliveryCount: options.maxDeliveryCount }),
    ...(options.messageTimeToLiveMs === undefined
      ? {}
      : { messageTimeToLiveMs: options.messageTimeToLiveMs }),
    ...(options.observer === undefined ? {} : { observer: options.observer }),
    ...(options.queues === undefined ? {} : { queues: options.queues }),
    ...(options.retryCopies === undefined ? {} : { retryCopies: options.retryCopies }),
  };
  const broker = new Broker(brokerOptions);
  keepEncodedMessages();
  const container = create_container({ id: 'local-servicebus' });
  offerSaslMechanisms(container.sasl_server_mechanisms as SaslMechanisms);
  // Whatever a connection does wrong ends that connection, never the process.
  container.on('error', () => undefined);

  const sockets = new Set<Socket>();
  const stops = new Set<() => void>();
  const links = new AttachedLinks();
  let port = options.port ?? 0;
  const certificate = await localCertificate();
  const administration = createHttpsServer(
    { key: certificate.key, cert: certificate.cert },
    administrationEndpoint(broker, {
      authority: () => `${host}:${port}`,
      listenHost: host,
      removed: (topics, subscriptions) => {
        for (const topic of topics) links.detach(topic, topic.name);
        for (const subscription of subscriptions)
          for (const entity of [subscription.entity, subscription.deadLetterQueue])
            links.detach(entity, entity.path);
      },
    }),
  );
  administration.on('clientError', (_error, socket) => socket.destroy());
  const resourceManager = createHttpServer(resourceManagerEndpoint(broker, host));
  resourceManager.on('clientError', (_error, socket) => socket.destroy());
  const serveAmqp = (socket: Socket): void => {
    const connection = container.create_connection({
      id: `local-servicebus-${sockets.size}`,
      sender_options: { treat_modified_as_released: false },
      receiver_options: { autoaccept: false, max_message_size: MAX_MESSAGE_SIZE_BYTES },
    } as unknown as Parameters<typeof container.create_connection>[0]);
    serveConnection(connection, socket, broker, stops, links);
    (connection as unknown as { accept(socket: Socket): void }).accept(socket);
  };
  // One port for both, as Service Bus's host name serves both: a TLS handshake (its first byte
  // 0x16) is the administration client's HTTPS; anything else is AMQP, which the client opens
  // with its protocol header. The first bytes go back to the socket for whoever reads it.
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.once('error', () => undefined);
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      if (first[0] === TLS_HANDSHAKE) {
        administration.emit('connection', socket);
        return;
      }
      serveAmqp(socket);
      socket.resume();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  port = typeof address === 'object' && address ? address.port : port;
  // Azure Resource Manager is another host than the namespace: here, another port.
  await new Promise<void>((resolve, reject) => {
    resourceManager.once('error', reject);
    resourceManager.listen(0, host, () => resolve());
  });
  const resourceManagerPort = (resourceManager.address() as AddressInfo).port;

  return {
    connectionString: connectionStringFor(host, port),
    certificate: certificate.cert,
    administrationClientOptions: { tlsOptions: { ca: certificate.cert } },
    resourceManager: {
      endpoint: `http://${host}:${resourceManagerPort}/`,
      namespaceResourceId: LOCAL_NAMESPACE_RESOURCE_ID,
    },
    host,
    port,
    broker,
    clock,
    stop: async () => {
      for (const stop of stops) stop();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      resourceManager.closeAllConnections();
      await Promise.all([closed, new Promise<void>((resolve) => resourceManager.close(() => resolve()))]);
    },
  };
}

/** rhea keeps the attach it will send; a sender whose own settle mode is settled pre-settles each transfer. */
interface SettleModes {
  local: { attach: { snd_settle_mode?: number; rcv_settle_mode?: number } };
}

/** rhea's table of SASL mechanisms a server offers: each name, a factory of its server side. */
type SaslMechanisms = Record<string, () => SaslServerMechanism> & { enable_anonymous(): void };
interface SaslServerMechanism {
  outcome: boolean | undefined;
  username: string | undefined;
  start(response?: Buffer): void;
}

/**
 * ANONYMOUS (what @azure/service-bus asks for) and MSSBCBS (what the .NET client,
 * Azure.Messaging.ServiceBus, asks for: Service Bus's "claims-based security" mechanism, which
 * carries no credential; the client then puts a token on $cbs). Both succeed at once: the token put
 * on $cbs is what authorises a link.
 */
function offerSaslMechanisms(mechanisms: SaslMechanisms): void {
  mechanisms.enable_anonymous();
  mechanisms.MSSBCBS = () => ({
    outcome: undefined,
    username: undefined,
    start() {
      this.outcome = true;
      this.username = '$cbs';
    },
  });
}

function serveConnection(
  connection: Connection,
  socket: Socket,
  broker: Broker,
  stops: Set<() => void>,
  links: AttachedLinks,
): void {
  /** Links the client receives on, by the address it asked answers to be sent to (reply-to). */
  const replyLinks = new Map<string, Sender>();
  /** What the connection's tokens authorise, by resource path; a renewed token replaces its grant. */
  const grants = new Map<string, Grant>();
  /**
   * The links a token authorised, by the path it had to cover. Service Bus detaches a link once no
   * unexpired token covers it (a client renews its token on $cbs before it expires): so does the
   * peer, at the expiry of the last grant that covered it.
   */
  const authorised = new Map<Sender | Receiver, string>();
  let expiryCheck: NodeJS.Timeout | undefined;
  const checkExpiries = (): void => {
    clearTimeout(expiryCheck);
    const now = Date.now();
    for (const [link, path] of authorised) {
      if (covers(grants.values(), path, now)) continue;
      authorised.delete(link);
      link.close(
        unauthorized(
          `ExpiredToken: The token for '${path}' expired, and no renewed token on $cbs covers the link.`,
        ).toAmqp(),
      );
    }
    if (authorised.size === 0) return;
    const next = Math.min(...[...grants.values()].map((g) => g.expiresAt).filter((at) => at > now));
    // A token may be valid for years: past setTimeout's limit, check again at the limit.
    if (Number.isFinite(next))
      expiryCheck = setTimeout(
        () => closeOnFailure(connection, checkExpiries),
        Math.min(next - now + 1, MAX_TIMEOUT_MS),
      ).unref();
  };
  const authorise = (link: Sender | Receiver, address: NodeAddress): void => {
    if (address.kind === 'cbs') return;
    const path = entityPath(address);
    if (!covers(grants.values(), path, Date.now()))
      throw unauthorized(
        `Unauthorized access to '${path}': put a shared access signature that covers it on $cbs first ` +
          `(signed with the key '${LOCAL_KEY.name}' of the connection string the peer prints).`,
      );
    authorised.set(link, path);
    const forget = (): void => void authorised.delete(link);
    link.once('sender_close', forget);
    link.once('receiver_close', forget);
    checkExpiries();
  };

  // rhea ends the socket right after these events. Before it does, tell the client why: a close
  // frame with amqp:decode-error, or, when the bytes were not even an AMQP protocol header, the
  // header the peer speaks (AMQP 1.0 §2.2: announce a supported version, then close).
  let refused = false;
  const refuse = (error: unknown): void => {
    if (refused) return;
    refused = true;
    const description = `The local peer could not read the frame: ${(error as Error).message}`;
    if (/protocol header/i.test(description)) {
      socket.write(AMQP_PROTOCOL_HEADER);
      return;
    }
    try {
      connection.close({ condition: CONDITIONS.decodeError, description });
      (connection as unknown as { _process(): void })._process();
    } catch {
      // The connection was not far enough along to carry a close frame; the socket just ends.
    }
  };
  connection.on('protocol_error', refuse);
  connection.on('error', refuse);
  connection.on('disconnected', () => clearTimeout(expiryCheck));

  connection.on('sender_open', (context: EventContext) => {
    const sender = context.sender as Sender;
    refuseOnError(sender, () => {
      const parsed = parseAddress(sender.source?.address);
      // Receiving from a bare name is receiving from the queue of that name, if there is one.
      const address: NodeAddress =
        parsed.kind === 'topic' && findQueue(broker, parsed.topic)
          ? { kind: 'queue', topic: parsed.topic, subscription: '', deadLetter: false }
          : parsed;
      authorise(sender, address);
      if (address.kind === 'cbs' || address.kind === 'management') {
        echoTermini(sender);
        // The SDK's reply-to is the link's target address ($management) or, for $cbs, its name.
        const target = (sender.target as { address?: unknown } | undefined)?.address;
        const names = [sender.name, ...(typeof target === 'string' ? [target] : [])];
        for (const name of names) replyLinks.set(name, sender);
        sender.on('sender_close', () => names.forEach((name) => replyLinks.delete(name)));
        return;
      }
      if (address.kind === 'topic') {
        // A name that is no topic (a queue's, say) is not found, as Service Bus answers it.
        const topic = findTopic(broker, address.topic);
        const names = topic.subscriptions
          .slice(0, 5)
          .map((s) => `'${address.topic}/Subscriptions/${s.name}'`);
        throw new PeerError(
          CONDITIONS.notAllowed,
          `'${address.topic}' is a topic: receive from one of its subscriptions (${names.join(', ') || 'it has none'}).`,
        );
      }
      if (address.kind !== 'queue') throw cannot('receive from', address);
      // The client's attach says how it receives: sender-settle-mode settled is receiveAndDelete
      // (the peer settles each transfer as it sends it), receiver-settle-mode second is peek-lock.
      const receiveAndDelete = sender.snd_settle_mode === 1;
      if (!receiveAndDelete && sender.rcv_settle_mode !== 1) {
        throw new PeerError(
          CONDITIONS.notImplemented,
          'The local peer serves peek-lock (receiver-settle-mode second) and receiveAndDelete (sender-settle-mode settled) receivers.',
        );
      }
      const entity = findEntity(broker, address);
      const session = sessionRequestOf(sender, entity);
      echoTermini(sender);
      const { stop } =
        session === undefined
          ? serveReceiveLink(sender, entity, receiveAndDelete)
          : serveSessionLink(sender, entity.sessions!, session, receiveAndDelete);
      links.add(entity, sender);
      stops.add(stop);
      sender.on('sender_close', () => {
        stop();
        stops.delete(stop);
      });
    });
  });

  connection.on('receiver_open', (context: EventContext) => {
    const receiver = context.receiver as Receiver;
    refuseOnError(receiver, () => {
      const address = parseAddress((receiver.target as { address?: unknown } | undefined)?.address);
      authorise(receiver, address);
      serveNode(receiver, address);
      echoTermini(receiver);
    });
  });

  function serveNode(receiver: Receiver, address: NodeAddress): void {
    switch (address.kind) {
      case 'cbs':
        return serveRequestLink(
          receiver,
          STATUS_KEYS.cbs,
          ({ operation, properties, value }) => {
            if (operation !== 'put-token')
              throw new PeerError(CONDITIONS.notImplemented, `$cbs does not implement '${operation}'.`);
            const grant = checkToken(properties.type, value, Date.now());
            grants.delete(grant.path);
            grants.set(grant.path, grant);
            // A client puts one token per entity and renews it; more than this is not a client.
            if (grants.size > MAX_GRANTS) grants.delete(grants.keys().next().value as string);
            checkExpiries();
            return { statusCode: 202, statusDescription: 'Accepted' };
          },
          (replyTo) => replyLinks.get(replyTo),
        );
      case 'management': {
        const queue = address.of.kind === 'topic' ? findQueue(broker, address.of.topic) : undefined;
        if (queue) {
          // A queue's $management: scheduling as a topic's, the rest as a subscription's.
          const entity = queue.subscriptions[0]!.entity;
          links.add(queue, receiver);
          return serveRequestLink(
            receiver,
            STATUS_KEYS.management,
            (request) =>
              Object.values<string | undefined>(TOPIC_OPERATIONS).includes(request.operation)
                ? handleTopicRequest(queue, request)
                : handleManagementRequest(entity, request),
            (replyTo) => replyLinks.get(replyTo),
          );
        }
        if (address.of.kind === 'topic') {
          const topic = findTopic(broker, address.of.topic);
          links.add(topic, receiver);
          return serveRequestLink(
            receiver,
            STATUS_KEYS.management,
            (request) => handleTopicRequest(topic, request),
            (replyTo) => replyLinks.get(replyTo),
          );
        }
        const entity = findEntity(broker, address.of);
        links.add(entity, receiver);
        // A subscription's own $management also manages its rules.
        const subscription = address.of.deadLetter ? undefined : findSubscription(broker, address.of);
        return serveRequestLink(
          receiver,
          STATUS_KEYS.management,
          (request) =>
            subscription && isRuleOperation(request.operation)
              ? handleRuleRequest(subscription, request)
              : handleManagementRequest(entity, request),
          (replyTo) => replyLinks.get(replyTo),
        );
      }
      case 'topic': {
        const topic = findTopic(broker, address.topic);
        links.add(topic, receiver);
        return servePublishLink(receiver, topic);
      }
      default:
        throw cannot('send to', address);
    }
  }
}

/**
 * Refusing a link, as Service Bus does: answer the attach with no terminus, then detach with the
 * error; the SDK turns amqp:not-found into MessagingEntityNotFound.
 */
function refuseOnError(link: Sender | Receiver, open: () => void): void {
  try {
    open();
  } catch (error) {
    link.close(asPeerError(error).toAmqp());
  }
}

/**
 * The peer's attach names the same source and target, and the same settle modes, as the client's.
 * The .NET client (Microsoft.Azure.Amqp) takes a sending link's settle mode from the answer: its
 * $management and $cbs requests go pre-settled, all with the same empty delivery tag, and answered
 * with rhea's default (mixed) it would track them as unsettled and fail on the second request sent
 * before the first was settled (ArgumentException: an item with the same key).
 */
function echoTermini(link: Sender | Receiver): void {
  const attach = (link as unknown as SettleModes).local.attach;
  if (link.snd_settle_mode !== undefined) attach.snd_settle_mode = link.snd_settle_mode;
  if (link.rcv_settle_mode !== undefined) attach.rcv_settle_mode = link.rcv_settle_mode;
  const source = (link.source as { address?: unknown } | undefined)?.address;
  const target = (link.target as { address?: unknown } | undefined)?.address;
  if (typeof source === 'string') link.set_source({ address: source });
  if (typeof target === 'string') link.set_target({ address: target });
}

/** The node a link works on, as a token's resource names it: topic[/subscriptions/sub[/$deadletterqueue]][/$management]. */
function entityPath(address: Exclude<NodeAddress, { kind: 'cbs' }>): string {
  switch (address.kind) {
    case 'management':
      // @azure/service-bus puts its token for <entity>/$management; one for the entity covers it too.
      return `${entityPath(address.of)}/$management`;
    case 'topic':
      return address.topic;
    default:
      if (address.subscription === '')
        return [address.topic].concat(address.deadLetter ? ['$deadletterqueue'] : []).join('/');
      return [address.topic, 'subscriptions', address.subscription]
        .concat(address.deadLetter ? ['$deadletterqueue'] : [])
        .join('/');
  }
}

function cannot(verb: string, address: NodeAddress): PeerError {
  return new PeerError(CONDITIONS.notAllowed, `A client cannot ${verb} a ${address.kind} node.`);
}
