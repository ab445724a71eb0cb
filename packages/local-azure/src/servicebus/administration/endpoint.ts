import type { IncomingMessage, ServerResponse } from 'node:http';

import { bounded, localListener } from '../../localHttp';
import { checkToken, covers, SAS_TOKEN_TYPE } from '../amqp/sas';
import type { Broker, Subscription, Topic } from '../broker';
import { checkRuleName, DEFAULT_RULE_NAME, type Rule, RuleError, type RuleFilter } from '../rules';
import {
  applyDescription,
  DESCRIPTION_OF,
  DescriptionError,
  type EntityKind,
  type EntityRecord,
  readDescription,
  SERVICEBUS_NAMESPACE,
  writeDescription,
} from './descriptions';
import { readRuleFilter, writeRule } from './ruleDescriptions';
import { childOf, escapeXml, readXml, textOf, type XmlElement, type XmlError } from './xml';

/**
 * Service Bus's administration endpoint, the ATOM management protocol that
 * ServiceBusAdministrationClient speaks (https://<namespace>/<path>?api-version=2021-05, a shared
 * access signature in the Authorization header), over the peer's model:
 *   GET    $namespaceinfo                                   the namespace (Standard)
 *   GET    $Resources/Queues, $Resources/Topics              lists, with $skip and $top (default 100)
 *   GET    <topic>/Subscriptions                             a topic's subscriptions, likewise
 *   GET    <queue or topic>, <topic>/Subscriptions/<sub>     the description with its runtime counts
 *   PUT    the same                                          create (409 when it exists), or with
 *                                                            If-Match update (404 when it does not)
 *   DELETE the same                                          delete, with its messages; the receivers'
 *                                                            links are detached (amqp:not-found)
 *   GET    <topic>/Subscriptions/<sub>/Rules                 a subscription's rules (rules.ts)
 *   GET, PUT, DELETE <topic>/Subscriptions/<sub>/Rules/<rule>  a rule: SQL (the model's subset),
 *                                                            correlation, true and false filters; no actions
 * A subscription created here gets the $Default rule with the true filter, or the filter of the
 * DefaultRuleDescription it was created with.
 * Errors as Service Bus writes them (<Error><Code/><Detail/></Error>), which the SDK turns into
 * RestError codes by status: 401 UnauthorizedRequestError, 404 MessageEntityNotFoundError, 409
 * MessageEntityAlreadyExistsError, 400 ServiceError, 413 for a body over 256 KB. Names are checked
 * as Service Bus checks them (queues and topics up to 260 characters, subscriptions 50; letters,
 * digits, '.', '-', '_'; no '/', which the peer's AMQP addresses cannot carry).
 * Not served: rule actions and SQL filter parameters (400), authorization rules (written as none),
 * forwarding (ForwardTo is only kept), changing RequiresSession on an update (it takes effect when
 * the entity is created), the namespace's other resources.
 */
export interface AdministrationOptions {
  /** `host:port` of the endpoint, for the ids and links of the entries it writes. */
  authority(): string;
  /** The interface it listens on: Host must name it or a loopback name (localHttp.ts). */
  listenHost: string;
  /** Told which entities were deleted, to detach the links on them. */
  removed(topics: readonly Topic[], subscriptions: readonly Subscription[]): void;
}

export const MAX_BODY_BYTES = 256 * 1024;
/** Past this, the peer stops reading the body and closes the connection. */
const MAX_DRAINED_BYTES = 16 * MAX_BODY_BYTES;
const MAX_PAGE = 100;
const API_VERSION = '2021-05';
const ATOM = 'http://www.w3.org/2005/Atom';
const ENTITY_NAME = /^[A-Za-z0-9][\w.-]{0,259}$/;
const SUBSCRIPTION_NAME = /^[A-Za-z0-9][\w.-]{0,49}$/;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

type Target =
  | { kind: 'namespace' }
  | { kind: 'list'; of: 'queue' | 'topic' }
  | { kind: 'subscriptions'; topic: string }
  | { kind: 'entity'; name: string }
  | { kind: 'subscription'; topic: string; name: string }
  | { kind: 'rules'; topic: string; subscription: string }
  | { kind: 'rule'; topic: string; subscription: string; name: string };

/** A request handler for an https.Server: the administration endpoint over `broker`. */
export function administrationEndpoint(
  broker: Broker,
  options: AdministrationOptions,
): (request: IncomingMessage, response: ServerResponse) => void {
  const records = new WeakMap<Topic | Subscription, EntityRecord>();
  const startedAt = new Date();
  const recordOf = (entity: Topic | Subscription): EntityRecord => {
    let record = records.get(entity);
    if (!record) {
      // Declared by start() or the topology: as old as the peer, sent nothing.
      record = { createdAt: startedAt, updatedAt: startedAt, sent: new Map() };
      records.set(entity, record);
    }
    return record;
  };

  const url = (path: string, query = ''): string =>
    `https://${options.authority()}/${path}?${query}api-version=${API_VERSION}`;

  const entry = (path: string, title: string, content: string, record?: EntityRecord): string => {
    const updated = (record?.updatedAt ?? new Date()).toISOString();
    return (
      `<entry xmlns="${ATOM}"><id>${escapeXml(url(path))}</id><title type="text">${escapeXml(title)}</title>` +
      `<published>${(record?.createdAt ?? startedAt).toISOString()}</published><updated>${updated}</updated>` +
      `<author><name>${escapeXml(options.authority())}</name></author>` +
      `<link rel="self" href="${escapeXml(url(path))}"/>` +
      `<content type="application/xml">${content}</content></entry>`
    );
  };

  const describe = (kind: EntityKind, topic: Topic, subscription?: Subscription): string => {
    const path = kind === 'subscription' ? `${topic.name}/Subscriptions/${subscription!.name}` : topic.name;
    const record = recordOf(kind === 'topic' ? topic : subscription!);
    const content = writeDescription(kind, subscription ? { topic, subscription } : { topic }, record);
    return entry(path, kind === 'subscription' ? subscription!.name : topic.name, content, record);
  };

  const feed = (path: string, title: string, entries: readonly string[], query: URLSearchParams): string => {
    const skip = pageNumber(query.get('$skip'), 0);
    const top = Math.min(pageNumber(query.get('$top'), MAX_PAGE), MAX_PAGE);
    const page = entries.slice(skip, skip + top);
    const next =
      skip + top < entries.length
        ? `<link rel="next" href="${escapeXml(url(path, `%24skip=${skip + top}&%24top=${top}&`))}"/>`
        : '';
    return (
      `<feed xmlns="${ATOM}"><title type="text">${title}</title><id>${escapeXml(url(path))}</id>` +
      `<updated>${new Date().toISOString()}</updated><link rel="self" href="${escapeXml(url(path))}"/>${next}` +
      `${page.join('')}</feed>`
    );
  };

  const findTopicOrQueue = (name: string): { kind: 'queue' | 'topic'; topic: Topic } | undefined => {
    for (const [kind, map] of [
      ['queue', broker.queues],
      ['topic', broker.topics],
    ] as const) {
      for (const [declared, topic] of map)
        if (declared.toLowerCase() === name.toLowerCase()) return { kind, topic };
    }
    return undefined;
  };
  const findTopic = (name: string): Topic => {
    const found = findTopicOrQueue(name);
    if (found?.kind !== 'topic') throw notFound(name);
    return found.topic;
  };
  const findSubscription = (topic: Topic, name: string): Subscription | undefined =>
    topic.subscriptions.find((s) => s.name.toLowerCase() === name.toLowerCase());

  const findSubscriptionOf = (target: { topic: string; subscription: string }): Subscription => {
    const subscription = findSubscription(findTopic(target.topic), target.subscription);
    if (!subscription) throw notFound(`${target.topic}/Subscriptions/${target.subscription}`);
    return subscription;
  };
  const describeRule = (subscription: Subscription, rule: Rule): string =>
    entry(
      `${subscription.topic}/Subscriptions/${subscription.name}/Rules/${rule.name}`,
      rule.name,
      writeRule(rule, new Date(rule.createdAt)),
    );

  const byName = <T extends { name: string }>(items: Iterable<T>): T[] =>
    [...items].sort((a, b) => a.name.toLowerCase().localeCompare(b.name.toLowerCase()));

  function read(target: Target, query: URLSearchParams): { status: number; body: string } {
    switch (target.kind) {
      case 'namespace':
        return { status: 200, body: entry('$namespaceinfo', options.authority(), namespaceInfo(startedAt)) };
      case 'list': {
        const map = target.of === 'queue' ? broker.queues : broker.topics;
        const entries = byName(map.values()).map((topic) =>
          describe(target.of, topic, queueOf(target.of, topic)),
        );
        return {
          status: 200,
          body: feed(
            `$Resources/${target.of === 'queue' ? 'Queues' : 'Topics'}`,
            target.of === 'queue' ? 'Queues' : 'Topics',
            entries,
            query,
          ),
        };
      }
      case 'subscriptions': {
        const topic = findTopic(target.topic);
        const entries = byName(topic.subscriptions).map((s) => describe('subscription', topic, s));
        return { status: 200, body: feed(`${topic.name}/Subscriptions`, 'Subscriptions', entries, query) };
      }
      case 'entity': {
        const found = findTopicOrQueue(target.name);
        if (!found) throw notFound(target.name);
        return { status: 200, body: describe(found.kind, found.topic, queueOf(found.kind, found.topic)) };
      }
      case 'subscription': {
        const topic = findTopic(target.topic);
        const subscription = findSubscription(topic, target.name);
        if (!subscription) throw notFound(`${target.topic}/Subscriptions/${target.name}`);
        return { status: 200, body: describe('subscription', topic, subscription) };
      }
      case 'rules': {
        const subscription = findSubscriptionOf(target);
        const entries = byName(subscription.rules).map((rule) => describeRule(subscription, rule));
        return {
          status: 200,
          body: feed(
            `${subscription.topic}/Subscriptions/${subscription.name}/Rules`,
            'Rules',
            entries,
            query,
          ),
        };
      }
      case 'rule': {
        const subscription = findSubscriptionOf(target);
        const rule = subscription.findRule(target.name);
        if (!rule) throw notFound(`${subscription.entity.path}/Rules/${target.name}`);
        return { status: 200, body: describeRule(subscription, rule) };
      }
    }
  }

  /** Creates a rule, or with `update` replaces the filter of one (its place among the rules may change). */
  function putRule(
    target: Extract<Target, { kind: 'rule' }>,
    body: string,
    update: boolean,
  ): { status: number; body: string } {
    const subscription = findSubscriptionOf(target);
    const filter = ruleFilterOf(readEntry(body, 'RuleDescription'));
    const existing = subscription.findRule(target.name);
    if (!update && existing) throw alreadyExists(`${subscription.entity.path}/Rules/${existing.name}`);
    if (update && !existing) throw notFound(`${subscription.entity.path}/Rules/${target.name}`);
    return ruleCall(() => {
      if (existing) subscription.removeRule(existing.name);
      const rule = subscription.addRule(existing?.name ?? target.name, filter);
      return { status: update ? 200 : 201, body: describeRule(subscription, rule) };
    });
  }

  function put(target: Target, body: string, update: boolean): { status: number; body: string } {
    if (target.kind === 'rule') return putRule(target, body, update);
    if (target.kind !== 'entity' && target.kind !== 'subscription')
      throw new HttpError(405, 'The resource cannot be created or updated.');
    const { kind, sent, description } = parseEntry(
      body,
      target.kind === 'subscription' ? ['subscription'] : ['queue', 'topic'],
    );
    const now = new Date();
    if (target.kind === 'entity') {
      const found = findTopicOrQueue(target.name);
      if (!update) {
        if (found) throw alreadyExists(found.topic.name);
        const sessions = { requiresSession: sent.get('RequiresSession') === 'true' };
        const topic =
          kind === 'queue' ? broker.addQueue(target.name, sessions) : broker.addTopic(target.name);
        const subscription = queueOf(kind, topic);
        applyDescription(kind, sent, subscription ? { topic, subscription } : { topic });
        records.set(kind === 'queue' ? subscription! : topic, { createdAt: now, updatedAt: now, sent });
        return { status: 201, body: describe(kind, topic, subscription) };
      }
      if (!found) throw notFound(target.name);
      if (found.kind !== kind)
        throw new HttpError(
          400,
          `The entity '${bounded(found.topic.name)}' is a ${found.kind}, not a ${kind}.`,
        );
      const subscription = queueOf(kind, found.topic);
      applyDescription(
        kind,
        sent,
        subscription ? { topic: found.topic, subscription } : { topic: found.topic },
      );
      const record = recordOf(subscription ?? found.topic);
      records.set(subscription ?? found.topic, { createdAt: record.createdAt, updatedAt: now, sent });
      return { status: 200, body: describe(kind, found.topic, subscription) };
    }
    const topic = findTopic(target.topic);
    const existing = findSubscription(topic, target.name);
    if (!update) {
      if (existing) throw alreadyExists(`${topic.name}/Subscriptions/${existing.name}`);
      // Checked before the subscription exists: a refused default rule creates nothing.
      const defaultRule = childOf(description, 'DefaultRuleDescription');
      const filter = defaultRule && ruleFilterOf(defaultRule);
      const ruleName =
        defaultRule && ruleCall(() => checkRuleName(textOf(defaultRule, 'Name') || DEFAULT_RULE_NAME));
      const subscription = broker.addSubscription(topic, target.name, {
        requiresSession: sent.get('RequiresSession') === 'true',
      });
      if (filter && ruleName) {
        subscription.removeRule(DEFAULT_RULE_NAME);
        subscription.addRule(ruleName, filter);
      }
      applyDescription('subscription', sent, { subscription });
      records.set(subscription, { createdAt: now, updatedAt: now, sent });
      return { status: 201, body: describe('subscription', topic, subscription) };
    }
    if (!existing) throw notFound(`${target.topic}/Subscriptions/${target.name}`);
    applyDescription('subscription', sent, { subscription: existing });
    records.set(existing, { createdAt: recordOf(existing).createdAt, updatedAt: now, sent });
    return { status: 200, body: describe('subscription', topic, existing) };
  }

  function remove(target: Target): { status: number; body: string } {
    if (target.kind === 'entity') {
      const found = findTopicOrQueue(target.name);
      if (!found) throw notFound(target.name);
      options.removed([found.topic], broker.remove(found.topic));
      return { status: 200, body: '' };
    }
    if (target.kind === 'subscription') {
      const topic = findTopic(target.topic);
      const subscription = findSubscription(topic, target.name);
      if (!subscription) throw notFound(`${target.topic}/Subscriptions/${target.name}`);
      broker.removeSubscription(topic, subscription);
      options.removed([], [subscription]);
      return { status: 200, body: '' };
    }
    if (target.kind === 'rule') {
      const subscription = findSubscriptionOf(target);
      ruleCall(() => subscription.removeRule(target.name));
      return { status: 200, body: '' };
    }
    throw new HttpError(405, 'The resource cannot be deleted.');
  }

  return localListener(
    {
      name: 'local Service Bus administration endpoint',
      listenHost: options.listenHost,
      refuse: (response, status, message) => answer(response, status, errorBody(status, message)),
    },
    (request, response) =>
      collectBody(request)
        .then((body) => {
          const requestUrl = URL.parse(request.url ?? '/', 'https://localhost');
          if (!requestUrl) throw new HttpError(400, 'The request path is not a URL.');
          authorise(request.headers.authorization, requestUrl.pathname);
          const target = parseTarget(requestUrl.pathname);
          switch (request.method) {
            case 'GET':
              return read(target, requestUrl.searchParams);
            case 'PUT':
              return put(target, body, request.headers['if-match'] !== undefined);
            case 'DELETE':
              return remove(target);
            default:
              throw new HttpError(405, `The method ${bounded(String(request.method))} is not served.`);
          }
        })
        .catch((error: unknown) => {
          // Anything else is the peer's own failure: the listener logs it and answers 500.
          if (!(error instanceof HttpError)) throw error;
          return { status: error.status, body: errorBody(error.status, error.message) };
        })
        .then(({ status, body }) => answer(response, status, body, status === 413)),
  );
}

function queueOf(kind: EntityKind, topic: Topic): Subscription | undefined {
  return kind === 'queue' ? topic.subscriptions[0] : undefined;
}

/** The body as text, at most MAX_BODY_BYTES of it (more is a 413, once the rest is drained). */
function collectBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    request.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length <= MAX_BODY_BYTES) chunks.push(chunk);
      else if (length > MAX_DRAINED_BYTES) request.socket.destroy();
    });
    // The client went away mid-body: nobody reads the answer, and it is not the peer's failure.
    request.on('error', () => reject(new HttpError(400, 'The request ended before its body did.')));
    request.on('end', () => {
      if (length > MAX_BODY_BYTES)
        reject(new HttpError(413, `The request body is larger than ${MAX_BODY_BYTES} bytes.`));
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
  });
}

/** The SAS token of the Authorization header must be valid and cover the path (the query aside). */
function authorise(header: string | undefined, pathname: string): void {
  let grant;
  try {
    grant = checkToken(SAS_TOKEN_TYPE, header, Date.now());
  } catch (error) {
    throw new HttpError(401, (error as Error).message);
  }
  // The SDK signs the request's URL as it sends it (encoded, lower case): compare it so.
  const path = grant.path.split('?')[0]!.replace(/\/+$/, '');
  if (!covers([{ path, expiresAt: grant.expiresAt }], pathname, Date.now()))
    throw new HttpError(401, `The token's resource does not cover '${bounded(pathname)}'.`);
}

function parseTarget(pathname: string): Target {
  const parts = pathname
    .replace(/^\/+|\/+$/g, '')
    .split('/')
    .map(safeDecode);
  const [first, second, third, fourth, fifth, ...rest] = parts;
  const lower = parts.map((part) => part.toLowerCase());
  if (parts.length === 1 && lower[0] === '$namespaceinfo') return { kind: 'namespace' };
  if (parts.length === 2 && lower[0] === '$resources') {
    if (lower[1] === 'queues') return { kind: 'list', of: 'queue' };
    if (lower[1] === 'topics') return { kind: 'list', of: 'topic' };
  }
  if (first === undefined || first === '' || rest.length > 0 || first.startsWith('$'))
    throw new HttpError(404, `The local peer serves no resource at '${bounded(pathname)}'.`);
  checkName(first, ENTITY_NAME, 'queue or topic', 260);
  if (second === undefined) return { kind: 'entity', name: first };
  if (lower[1] !== 'subscriptions')
    throw new HttpError(
      400,
      `'${bounded(pathname)}' is not a Service Bus entity path ('/' is not served in names).`,
    );
  if (third === undefined) return { kind: 'subscriptions', topic: first };
  checkName(third, SUBSCRIPTION_NAME, 'subscription', 50);
  if (fourth === undefined) return { kind: 'subscription', topic: first, name: third };
  if (lower[3] !== 'rules')
    throw new HttpError(404, `The local peer serves no resource at '${bounded(pathname)}'.`);
  const subscription = { topic: first, subscription: third };
  if (fifth === undefined) return { kind: 'rules', ...subscription };
  ruleCall(() => checkRuleName(fifth));
  return { kind: 'rule', ...subscription, name: fifth };
}

/** A rule model's refusal, as Service Bus answers it over HTTP. */
function ruleCall<T>(call: () => T): T {
  try {
    return call();
  } catch (error) {
    if (!(error instanceof RuleError)) throw error;
    const status = { invalid: 400, unsupported: 400, exists: 409, 'not-found': 404, quota: 403 }[error.code];
    throw new HttpError(status, error.message);
  }
}

function ruleFilterOf(description: XmlElement): RuleFilter {
  try {
    return readRuleFilter(description);
  } catch (error) {
    if (error instanceof DescriptionError) throw new HttpError(400, error.message);
    throw error;
  }
}

function checkName(name: string, pattern: RegExp, what: string, limit: number): void {
  if (!pattern.test(name))
    throw new HttpError(
      400,
      `The ${what} name '${bounded(name)}' is invalid: at most ${limit} characters, starting with a letter or digit, ` +
        "then letters, digits, '.', '-' or '_'.",
    );
}

/** The description in a PUT's ATOM entry (the root element of its content), if it is one of `names`. */
function readEntry(body: string, ...names: string[]): XmlElement {
  let root;
  try {
    root = readXml(body);
  } catch (error) {
    throw new HttpError(400, `The request body is not an ATOM entry: ${(error as XmlError).message}`);
  }
  const description = childOf(root, 'content')?.children[0];
  if (root.name !== 'entry' || !description || !names.includes(description.name))
    throw new HttpError(
      400,
      `The request body is not an ATOM entry whose content is a ${names.join(' or ')}.`,
    );
  return description;
}

/** The entity description in a PUT's ATOM entry, which kind it is, and its settable properties. */
function parseEntry(
  body: string,
  kinds: readonly EntityKind[],
): { kind: EntityKind; sent: Map<string, string>; description: XmlElement } {
  const description = readEntry(body, ...kinds.map((k) => DESCRIPTION_OF[k]));
  const kind = kinds.find((candidate) => DESCRIPTION_OF[candidate] === description.name)!;
  try {
    return { kind, sent: readDescription(kind, description), description };
  } catch (error) {
    if (error instanceof DescriptionError) throw new HttpError(400, error.message);
    throw error;
  }
}

function namespaceInfo(createdAt: Date): string {
  return (
    `<NamespaceInfo xmlns="${SERVICEBUS_NAMESPACE}" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
    `<CreatedTime>${createdAt.toISOString()}</CreatedTime><MessagingSKU>Standard</MessagingSKU>` +
    `<ModifiedTime>${createdAt.toISOString()}</ModifiedTime><Name>local-servicebus</Name>` +
    '<NamespaceType>Messaging</NamespaceType></NamespaceInfo>'
  );
}

function answer(response: ServerResponse, status: number, body: string, close = false): void {
  if (response.headersSent) return;
  response.writeHead(status, {
    'content-type':
      status < 300 ? 'application/atom+xml;type=entry;charset=utf-8' : 'application/xml; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    ...(close ? { connection: 'close' } : {}),
  });
  response.end(body);
}

function errorBody(status: number, detail: string): string {
  return `<Error><Code>${status}</Code><Detail>${escapeXml(detail)}</Detail></Error>`;
}

function notFound(path: string): HttpError {
  return new HttpError(
    404,
    `The messaging entity '${bounded(path)}' could not be found. To know more visit https://aka.ms/sbResourceMgrExceptions.`,
  );
}

function alreadyExists(path: string): HttpError {
  return new HttpError(
    409,
    `The messaging entity '${bounded(path)}' already exists. To know more visit https://aka.ms/sbResourceMgrExceptions.`,
  );
}

function pageNumber(value: string | null, fallback: number): number {
  if (value === null) return fallback;
  if (!/^\d{1,9}$/.test(value))
    throw new HttpError(400, 'The values of $skip and $top must be whole numbers.');
  return Number(value);
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw new HttpError(400, 'The path is not URL-encoded.');
  }
}
