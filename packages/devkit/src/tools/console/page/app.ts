/**
 * The console's page: plain DOM, no framework. Every value it shows goes in as text
 * (textContent, setAttribute), never as HTML, so nothing the server echoes can become markup; the
 * server's Content-Security-Policy allows this script and the style sheet only.
 */
import type {
  ActionResult,
  BodyView,
  ConsumerView,
  DeadLetterPage,
  DeadLetterRowView,
  DocumentView,
  FeedEvent,
  FeedPage,
  Overview,
  PartitionView,
  PlanView,
  SendForm,
  SendPlanView,
  SendRequest,
  SendResult,
  SubscriptionView,
} from '../types';
import { type FeedGroup, feedGroups, shortId } from './feedGroups';

// ---- the token and the API -------------------------------------------------------------------

/** The per-run token: in the fragment of the address the console printed, then in this tab only. */
const token = ((): string => {
  const fromFragment = new URLSearchParams(location.hash.slice(1)).get('token');
  if (fromFragment) {
    sessionStorage.setItem('console-token', fromFragment);
    history.replaceState(null, '', location.pathname);
  }
  return sessionStorage.getItem('console-token') ?? '';
})();

class ApiError extends Error {}

async function api<T>(path: string, body?: unknown): Promise<T> {
  const response = await fetch(`/api/${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      'x-console-token': token,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const value = (await response.json()) as T & { error?: string };
  if (!response.ok) throw new ApiError(value.error ?? `HTTP ${response.status}`);
  return value;
}

const enc = encodeURIComponent;

// ---- building the DOM from text ---------------------------------------------------------------

type Child = Node | string | number | undefined | null | false;
type Attributes = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

function h(tag: string, attributes: Attributes = {}, ...children: Child[]): HTMLElement {
  const element = document.createElement(tag);
  apply(element, attributes, children);
  return element;
}

function s(tag: string, attributes: Attributes = {}, ...children: Child[]): SVGElement {
  const element = document.createElementNS('http://www.w3.org/2000/svg', tag);
  apply(element, attributes, children);
  return element;
}

function apply(element: Element, attributes: Attributes, children: Child[]): void {
  for (const [name, value] of Object.entries(attributes)) {
    if (typeof value === 'function') element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, '');
    else if (value !== undefined && value !== false) element.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    element.append(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

function byId(id: string): HTMLElement {
  return document.getElementById(id)!;
}

function status(text: string, kind: 'ok' | 'error' = 'ok'): void {
  const element = byId('status');
  element.textContent = text;
  element.className = kind;
}

function time(iso: string | undefined): string {
  return iso === undefined ? '' : iso.slice(11, 19);
}

/** An ISO time as a table shows it: the time of day, with the date when it is not today (UTC). */
function shortTime(iso: string | undefined): string {
  if (iso === undefined) return '';
  const today = new Date().toISOString().slice(0, 10);
  return iso.startsWith(today) ? `${iso.slice(11, 19)} UTC` : `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

function facts(rows: [string, Child][]): HTMLElement {
  return h(
    'dl',
    {},
    ...rows.flatMap(([name, value]) =>
      value === undefined || value === '' ? [] : [h('dt', {}, name), h('dd', {}, value)],
    ),
  );
}

// ---- the pipeline ----------------------------------------------------------------------------

let overview: Overview | undefined;

async function refreshOverview(): Promise<void> {
  overview = await api<Overview>('overview');
  byId('target').textContent = overview.target;
  const mode = byId('mode');
  mode.textContent = overview.actions ? 'actions on' : 'read-only';
  mode.className = overview.actions ? 'actions' : 'read-only';
  byId('problems').replaceChildren(...overview.problems.map((text) => h('p', { class: 'problem' }, text)));
  byId('topology').replaceChildren(
    overview.topics.length === 0
      ? h(
          'p',
          { id: 'no-consumers' },
          'No consumer yet: src/topology.json declares no topic. Add one with ',
          h('code', {}, 'npm run new:consumer -- --name <area.consumer> --topic <topic> --subject <Subject>'),
          '; npm start (in watch mode) shows it here once its files are saved.',
        )
      : topologyPicture(overview),
  );
  byId('others').replaceChildren(
    h(
      'ul',
      {},
      ...overview.others.map((other) =>
        h('li', {}, h('strong', {}, other.name), ` (${other.kind}) ${other.detail}`),
      ),
    ),
  );
  const select = byId('filter-consumer') as HTMLSelectElement;
  const chosen = select.value;
  select.replaceChildren(
    h('option', { value: '' }, 'all'),
    ...subscriptions().map((sub) => h('option', { value: sub.name }, sub.name)),
  );
  select.value = chosen;
}

function subscriptions(): SubscriptionView[] {
  return overview?.topics.flatMap((topic) => topic.subscriptions) ?? [];
}

/** A subscription's row: its box, and its counts on the line under it. */
const ROW = 72;
const WIDTH = 1100;
const COLUMNS = { source: 10, topic: 200, subscription: 600, consumer: 870 };
const BOX = { width: 220, height: 42 };

/**
 * Topics in the middle, each subscription to its right with its filter and its live counts under
 * it, the function that consumes it at the far right; on the left, who sends to each topic:
 * `npm run send` (any producer) and the outbox relay for the consumers that publish there (under
 * the topic). Each label has a column of its own, so that none sits on another (the browser test
 * checks it at three widths).
 */
function topologyPicture(view: Overview): SVGElement {
  const rows = view.topics.reduce((sum, topic) => sum + Math.max(1, topic.subscriptions.length), 0);
  const height = rows * ROW + 30;
  const picture = s('svg', {
    viewBox: `0 0 ${WIDTH} ${height}`,
    width: '100%',
    class: 'picture',
    role: 'img',
    'aria-label': 'Topics, subscriptions and consumers',
  });
  picture.append(
    box(COLUMNS.source, height / 2 - BOX.height / 2, 'producers', 'npm run send, other apps', 'source', 170),
  );
  let row = 0;
  for (const topic of view.topics) {
    const span = Math.max(1, topic.subscriptions.length);
    const topicY = 10 + (row + span / 2) * ROW - BOX.height / 2;
    picture.append(edge(COLUMNS.source + 170, height / 2, COLUMNS.topic, topicY + BOX.height / 2));
    picture.append(box(COLUMNS.topic, topicY, topic.name, 'topic', 'topic'));
    if (topic.publishers.length > 0) {
      picture.append(
        s(
          'text',
          { x: COLUMNS.topic, y: topicY + BOX.height + 13, class: 'publishers' },
          `+ outbox relay: ${topic.publishers.join(', ')}`,
        ),
      );
    }
    if (topic.subscriptions.length === 0) {
      picture.append(
        s(
          'text',
          { x: COLUMNS.subscription, y: topicY + BOX.height / 2 + 4, class: 'note' },
          `no subscription here; published for others: ${topic.unsubscribedSubjects.join(', ')}`,
        ),
      );
    }
    topic.subscriptions.forEach((sub, index) => {
      const y = 10 + (row + index) * ROW + (ROW - BOX.height) / 2;
      picture.append(
        edge(COLUMNS.topic + BOX.width, topicY + BOX.height / 2, COLUMNS.subscription, y + BOX.height / 2),
      );
      picture.append(countsLabel(COLUMNS.subscription + 2, y + BOX.height + 13, sub));
      const node = box(COLUMNS.subscription, y, sub.name, `[${sub.subjects.join(', ')}]`, 'subscription');
      node.setAttribute('data-subscription', sub.name);
      node.setAttribute('tabindex', '0');
      node.addEventListener('click', () => void showConsumer(sub.name));
      picture.append(node);
      picture.append(
        edge(COLUMNS.subscription + BOX.width, y + BOX.height / 2, COLUMNS.consumer, y + BOX.height / 2),
      );
      picture.append(
        box(
          COLUMNS.consumer,
          y,
          sub.function ?? '(no function)',
          sub.delayedRetry ? 'consumer, delayed retry' : 'consumer',
          'consumer',
        ),
      );
    });
    row += span;
  }
  return picture;
}

/** The counts on a subscription's edge: active (waiting or locked), in flight (locked), dead-lettered. */
function countsLabel(x: number, y: number, sub: SubscriptionView): SVGElement {
  const counts = sub.counts;
  if (counts === undefined) return s('text', { x, y, class: 'counts' }, 'counts unknown');
  return s(
    'text',
    { x, y, class: 'counts', 'data-counts': sub.name },
    s('tspan', { class: 'active' }, `${counts.active} active`),
    ` · ${counts.inFlight ?? '?'} in flight · `,
    s(
      'tspan',
      { class: counts.deadLettered > 0 ? 'dead bad' : 'dead' },
      `${counts.deadLettered} dead-lettered`,
    ),
  );
}

function box(
  x: number,
  y: number,
  title: string,
  subtitle: string,
  kind: string,
  width = BOX.width,
): SVGElement {
  return s(
    'g',
    { class: `node ${kind}` },
    s('rect', { x, y, width, height: BOX.height, rx: 6 }),
    s('text', { x: x + 8, y: y + 18, class: 'title' }, title),
    s('text', { x: x + 8, y: y + 35, class: 'subtitle' }, subtitle),
  );
}

function edge(x1: number, y1: number, x2: number, y2: number): SVGElement {
  const middle = (x1 + x2) / 2;
  return s('path', { class: 'edge', d: `M${x1},${y1} C${middle},${y1} ${middle},${y2} ${x2},${y2}` });
}

// ---- the live feed ---------------------------------------------------------------------------

const feedEvents: FeedEvent[] = [];
const SHOWN_EVENTS = 500;

async function followFeed(): Promise<void> {
  let after = 0;
  for (;;) {
    try {
      const page = await api<FeedPage>(`feed?after=${after}`);
      after = page.last;
      if (page.events.length > 0) {
        feedEvents.push(...page.events);
        feedEvents.splice(0, Math.max(0, feedEvents.length - SHOWN_EVENTS));
        renderFeed();
        void refreshOverview().catch(() => undefined);
      }
    } catch (error) {
      status(`Feed: ${(error as Error).message}`, 'error');
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

/** The feed's rows open to their deliveries: the keys of the rows opened. */
const openedRows = new Set<number>();

function renderFeed(): void {
  const consumer = (byId('filter-consumer') as HTMLSelectElement).value;
  const messageId = (byId('filter-message') as HTMLInputElement).value.trim();
  const shown = feedGroups(
    feedEvents
      .filter((event) => consumer === '' || event.subscription === consumer)
      .filter((event) => messageId === '' || (event.messageId ?? '').includes(messageId)),
  ).reverse();
  byId('feed-rows').replaceChildren(...shown.flatMap(groupRows));
}

/** A copy's row (its last event), and under it, once opened, a row per event. */
function groupRows(group: FeedGroup): HTMLElement[] {
  const last = group.shown;
  const deliveries = group.events.filter((event) => event.kind === 'delivery').length;
  const opened = openedRows.has(group.key);
  const row = feedRow(last, {
    outcome: `${last.outcome}${deliveries > 1 ? ` after ${deliveries} deliveries` : last.deliveryCount === undefined ? '' : ` (delivery ${last.deliveryCount})`}`,
    onclick: () => {
      if (group.events.length > 1) {
        if (opened) openedRows.delete(group.key);
        else openedRows.add(group.key);
        renderFeed();
      }
      showEvent(last);
    },
    marker: group.events.length === 1 ? '' : opened ? '▾ ' : '▸ ',
  });
  row.setAttribute('data-events', String(group.events.length));
  if (!opened || group.events.length === 1) return [row];
  return [
    row,
    ...group.events.map((event) => {
      const sub = feedRow(event, {
        outcome: `${event.outcome}${event.deliveryCount === undefined ? '' : ` (delivery ${event.deliveryCount})`}`,
        onclick: () => showEvent(event),
        marker: '',
        delivery: true,
      });
      return sub;
    }),
  ];
}

function feedRow(
  event: FeedEvent,
  {
    outcome,
    onclick,
    marker,
    delivery = false,
  }: { outcome: string; onclick: () => void; marker: string; delivery?: boolean },
): HTMLElement {
  return h(
    'tr',
    {
      class: `outcome-${event.outcome.replace(/[^a-z-]/g, '')}${delivery ? ' delivery' : ''}`,
      // A copy's row carries its outcome; the rows of its deliveries, opened under it, their own.
      [delivery ? 'data-delivery-outcome' : 'data-outcome']: event.outcome,
      'data-message-id': event.messageId ?? '',
      tabindex: 0,
      onclick,
    },
    h('td', { class: 'time' }, time(event.at)),
    h('td', {}, event.subscription ?? event.topic ?? ''),
    h('td', { class: 'id', title: event.messageId ?? '' }, marker, shortId(event.messageId)),
    h('td', {}, outcome),
    h('td', { class: 'detail' }, event.detail ?? ''),
  );
}

function showEvent(event: FeedEvent): void {
  const body = h('div', { class: 'body' });
  detail(
    `Message ${event.messageId ?? '(no MessageId)'}`,
    facts([
      ['what', event.kind],
      ['outcome', event.outcome],
      ['detail', event.detail],
      ['topic', event.topic],
      ['subscription', event.subscription],
      ['function', event.function],
      ['subject', event.subject],
      ['sequence number', event.sequenceNumber],
      ['delivery', event.deliveryCount],
      ['settled', event.settlement],
      ['handler', event.handlerMs === undefined ? undefined : `${event.handlerMs} ms`],
      ['trace id (operation_Id)', event.traceId],
      ['body', `${event.bodyBytes ?? '?'} bytes, sha256 ${event.bodySha256 ?? '?'}`],
    ]),
    event.wrote === undefined
      ? undefined
      : h(
          'div',
          { class: 'wrote' },
          h('h3', {}, `Wrote partition ${event.wrote.partitionKey}`),
          h(
            'ul',
            {},
            ...event.wrote.documents.map((written) => {
              const id = written.slice(written.indexOf(' ') + 1);
              return h(
                'li',
                {},
                h(
                  'button',
                  {
                    type: 'button',
                    class: 'link',
                    onclick: () => void showDocument(event.wrote!.partitionKey, id),
                  },
                  written,
                ),
              );
            }),
          ),
          h(
            'button',
            { type: 'button', onclick: () => void showPartition(event.wrote!.partitionKey) },
            'Browse the partition',
          ),
        ),
    h(
      'button',
      {
        type: 'button',
        id: 'show-body',
        onclick: () => void showBody(body, `feed/${event.seq}/body`),
      },
      'Show the body',
    ),
    body,
  );
}

// ---- consumers, partitions, documents --------------------------------------------------------

async function showConsumer(name: string): Promise<void> {
  const view = await api<ConsumerView>(`consumers/${enc(name)}`);
  const sub = subscriptions().find((candidate) => candidate.name === name);
  detail(
    `Consumer ${view.consumer}`,
    ...view.problems.map((text) => h('p', { class: 'problem' }, text)),
    facts([
      ['subscription', sub === undefined ? undefined : `${sub.topic}/Subscriptions/${sub.name}`],
      ['filter', sub?.subjects.join(', ')],
      ['inbox markers', view.inbox?.markers],
      ['oldest marker', view.inbox?.oldestProcessedAt ?? (view.inbox ? 'none' : undefined)],
      ['next purge', view.nextPurge],
      ['outbox pending', view.outbox?.pending],
      ['oldest pending', view.outbox?.oldestPendingSince],
      ['dead-lettered', sub?.counts?.deadLettered],
    ]),
    h(
      'button',
      { type: 'button', id: 'open-dead-letters', onclick: () => void showDeadLetters(name) },
      'Dead-letter queue',
    ),
    h('h3', {}, 'Partitions it wrote most recently'),
    view.recentPartitions.length === 0
      ? h('p', {}, 'None yet.')
      : h(
          'ul',
          { class: 'partitions' },
          ...view.recentPartitions.map((partition) =>
            h(
              'li',
              {},
              h(
                'button',
                { type: 'button', class: 'link', onclick: () => void showPartition(partition.partitionKey) },
                partition.partitionKey,
              ),
              ` for ${partition.messageId} at ${partition.processedAt}`,
            ),
          ),
        ),
  );
}

async function showPartition(partitionKey: string, continuation?: string): Promise<void> {
  const view = await api<PartitionView>(
    `partitions/${enc(partitionKey)}${continuation === undefined ? '' : `?continuation=${enc(continuation)}`}`,
  );
  detail(
    `Partition ${view.partitionKey}`,
    h(
      'p',
      {},
      'Business documents, inbox markers and outbox messages: what one transactional batch writes together.',
    ),
    h(
      'ul',
      { class: 'documents' },
      ...view.documents.map((document) =>
        h(
          'li',
          {},
          h(
            'button',
            { type: 'button', class: 'link', onclick: () => void showDocument(partitionKey, document.id) },
            document.id,
          ),
          ` ${document.type ?? ''}`,
        ),
      ),
    ),
    view.continuation === undefined
      ? undefined
      : h(
          'button',
          { type: 'button', onclick: () => void showPartition(partitionKey, view.continuation) },
          'Next page',
        ),
  );
}

async function showDocument(partitionKey: string, id: string): Promise<void> {
  const view = await api<DocumentView>(`documents/${enc(partitionKey)}/${enc(id)}`);
  detail(
    `Document ${view.id}`,
    h('p', {}, `In partition ${view.partitionKey}${view.truncated ? ' (cut at 64 KB)' : ''}.`),
    h('pre', { class: 'document' }, view.json),
    h(
      'button',
      { type: 'button', onclick: () => void showPartition(partitionKey) },
      'The rest of the partition',
    ),
  );
}

// ---- dead letters ----------------------------------------------------------------------------

async function showDeadLetters(subscription: string, from?: string): Promise<void> {
  const page = await api<DeadLetterPage>(
    `dead-letters/${enc(subscription)}${from === undefined ? '' : `?from=${enc(from)}`}`,
  );
  const families = page.rows.some((row) => row.family !== undefined);
  const checks = new Map<string, HTMLInputElement>();
  const force = h('input', { type: 'checkbox', id: 'dl-force' }) as HTMLInputElement;
  const poison = h('input', { type: 'checkbox', id: 'dl-include-poison' }) as HTMLInputElement;
  const chosen = (): string[] => [...checks].filter(([, box]) => box.checked).map(([sequence]) => sequence);
  const action = (name: 'resubmit' | 'discard', label: string): HTMLElement =>
    h(
      'button',
      {
        type: 'button',
        id: `dl-${name}`,
        disabled: overview?.actions !== true,
        title: overview?.actions === true ? undefined : 'read-only: the console was started without actions',
        onclick: () =>
          void planAndAct(subscription, {
            action: name,
            sequences: chosen(),
            force: force.checked,
            includePoison: poison.checked,
          }),
      },
      label,
    );
  wideDetail(
    `Dead letters of ${page.subscription}`,
    h('p', {}, `${page.queue}. ${page.inboxNote}`),
    page.rows.length === 0
      ? h('p', {}, 'The dead-letter queue is empty.')
      : h(
          'table',
          { class: 'dead-letters' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ...[
                '',
                'seq',
                'messageId',
                'subject',
                ...(families ? ['delayed retry'] : []),
                'reason',
                'description',
                'deliveries',
                'enqueued',
                'inbox',
                'resubmittable from',
              ].map((name) => h('th', {}, name)),
            ),
          ),
          h(
            'tbody',
            {},
            ...page.rows.map((row) => {
              const box = h('input', {
                type: 'checkbox',
                'aria-label': `select ${row.sequence}`,
              }) as HTMLInputElement;
              checks.set(row.sequence, box);
              return h(
                'tr',
                { 'data-sequence': row.sequence, 'data-message-id': row.messageId ?? '' },
                h('td', {}, box),
                h('td', {}, row.sequence),
                h(
                  'td',
                  { class: 'id' },
                  h(
                    'button',
                    { type: 'button', class: 'link', onclick: () => showDeadLetter(subscription, row) },
                    row.messageId ?? '(none)',
                  ),
                ),
                h('td', {}, row.subject ?? ''),
                families ? h('td', {}, row.family ?? '') : undefined,
                h('td', {}, row.reason),
                h('td', {}, row.description),
                h('td', {}, row.deliveries),
                h('td', { class: 'time', title: row.enqueuedAt }, shortTime(row.enqueuedAt)),
                h('td', { class: 'inbox', title: row.inbox?.meaning }, row.inbox?.text ?? ''),
                h(
                  'td',
                  { class: 'resubmittable', title: row.resubmittableFrom, 'data-at': row.resubmittableFrom },
                  row.never === undefined ? shortTime(row.resubmittableFrom) : `never: ${row.never}`,
                ),
              );
            }),
          ),
        ),
    h(
      'div',
      { class: 'actions' },
      action('resubmit', 'Resubmit selected…'),
      action('discard', 'Discard selected…'),
      h('label', {}, force, ' force (unknown inbox state, payload mismatch; discard: not applied)'),
      h('label', {}, poison, ' include poison'),
    ),
    page.next === undefined
      ? undefined
      : h(
          'button',
          { type: 'button', onclick: () => void showDeadLetters(subscription, page.next) },
          'Next page',
        ),
    h('ul', { class: 'legend' }, ...page.legend.map((line) => h('li', {}, line))),
    h('div', { id: 'action-result' }),
  );
}

function showDeadLetter(subscription: string, row: DeadLetterRowView): void {
  const body = h('div', { class: 'body' });
  detail(
    `Dead letter #${row.sequence}`,
    facts([
      ['messageId', row.messageId],
      ['subject', row.subject],
      ['delayed retry', row.family],
      ['reason', row.reason],
      ['description', row.description],
      ['deliveries', row.deliveries],
      ['enqueued', row.enqueuedAt],
      ['inbox', row.inbox === undefined ? undefined : `${row.inbox.text}: ${row.inbox.meaning}`],
      ['resubmittable from', row.never === undefined ? row.resubmittableFrom : `never: ${row.never}`],
      ['body', `${row.bodyBytes} bytes, sha256 ${row.bodySha256}`],
    ]),
    h(
      'button',
      {
        type: 'button',
        id: 'show-body',
        onclick: () => void showBody(body, `dead-letters/${enc(subscription)}/${enc(row.sequence)}/body`),
      },
      'Show the body',
    ),
    body,
    h('button', { type: 'button', onclick: () => void showDeadLetters(subscription) }, 'Back to the queue'),
  );
}

/** A body, on request: as text, or base64 when it is not UTF-8; a long one cut at 64 KB, and said so. */
async function showBody(holder: HTMLElement, path: string): Promise<void> {
  try {
    const body = await api<BodyView>(path);
    holder.replaceChildren(
      h(
        'p',
        {},
        `${body.bytes} bytes${body.encoding === 'base64' ? ', not UTF-8: base64' : ''}` +
          (body.truncated ? '; the first 64 KB' : ''),
      ),
      h('pre', {}, body.text),
    );
  } catch (error) {
    holder.replaceChildren(h('p', { class: 'problem' }, (error as Error).message));
  }
}

interface ActionChoice {
  action: 'resubmit' | 'discard';
  sequences: string[];
  force: boolean;
  includePoison: boolean;
}

/** Asks the server what the action would do, shows it, and acts only once the user confirms. */
async function planAndAct(subscription: string, choice: ActionChoice): Promise<void> {
  if (choice.sequences.length === 0) {
    status('Select one or more dead letters first.', 'error');
    return;
  }
  const buttons = ['dl-resubmit', 'dl-discard'].map((id) => byId(id) as HTMLButtonElement);
  for (const button of buttons) button.disabled = true;
  try {
    const plan = await api<PlanView>(`dead-letters/${enc(subscription)}/plan`, choice);
    const confirmed = await confirmDialog(
      `${choice.action === 'resubmit' ? 'Resubmit' : 'Discard'} ${choice.sequences.length} dead letter(s) of ${subscription}?`,
      plan.lines.map((line) => line.text),
      plan.acting === 0
        ? 'Nothing would be done.'
        : choice.action === 'resubmit'
          ? `Confirm to do as above with ${plan.acting} message(s): send each, or complete one already applied.`
          : `Confirm to remove ${plan.acting} message(s) for good.`,
      plan.acting > 0,
    );
    if (!confirmed) {
      status('Cancelled: nothing was done.');
      return;
    }
    await act(subscription, { ...choice, fingerprint: plan.fingerprint });
  } finally {
    for (const button of buttons) button.disabled = overview?.actions !== true;
  }
}

/** Carries out the confirmed plan; the server refuses (409) when the queue no longer matches it. */
async function act(subscription: string, choice: ActionChoice & { fingerprint: string }): Promise<void> {
  let result: ActionResult;
  try {
    result = await api<ActionResult>(`dead-letters/${enc(subscription)}/act`, choice);
  } catch (error) {
    await showDeadLetters(subscription);
    byId('action-result').replaceChildren(h('p', { class: 'problem' }, (error as Error).message));
    status((error as Error).message, 'error');
    return;
  }
  await showDeadLetters(subscription);
  byId('action-result').replaceChildren(
    h('h3', {}, result.ok ? 'Done' : 'Done, with problems'),
    h('ul', {}, ...result.lines.map((line) => h('li', {}, line))),
    h('p', { class: result.ok ? 'summary' : 'problem' }, result.summary),
  );
  status(result.summary, result.ok ? 'ok' : 'error');
}

function confirmDialog(title: string, lines: string[], question: string, allowed: boolean): Promise<boolean> {
  const dialog = byId('confirm') as HTMLDialogElement;
  byId('confirm-title').textContent = title;
  byId('confirm-lines').replaceChildren(...lines.map((line) => h('li', {}, line)));
  byId('confirm-question').textContent = question;
  const ok = byId('confirm-ok') as HTMLButtonElement;
  ok.disabled = !allowed;
  dialog.showModal();
  return new Promise((resolve) => {
    const answer = (value: boolean) => (): void => {
      ok.onclick = null;
      byId('confirm-cancel').onclick = null;
      dialog.close();
      resolve(value);
    };
    ok.onclick = answer(true);
    byId('confirm-cancel').onclick = answer(false);
    dialog.oncancel = answer(false);
  });
}

// ---- sending ---------------------------------------------------------------------------------

let sendForm: SendForm | undefined;

async function showSendForm(): Promise<void> {
  sendForm ??= await api<SendForm>('send-form');
  const subjects = sendForm.subjects;
  if (subjects.length === 0) {
    detail('Send an event', h('p', {}, 'No consumer reads any subject yet.'));
    return;
  }
  const subject = h(
    'select',
    { id: 'send-subject' },
    ...subjects.map((entry) => h('option', { value: entry.subject }, entry.subject)),
  ) as HTMLSelectElement;
  const fields = h('div', { id: 'send-fields' });
  const raw = h('textarea', {
    id: 'send-raw',
    rows: 3,
    placeholder: 'a raw body instead of the fields: sent as it is',
  }) as HTMLTextAreaElement;
  const messageId = h('input', {
    id: 'send-message-id',
    maxlength: 128,
    placeholder: 'derived from the event',
  }) as HTMLInputElement;
  const allowInvalid = h('input', { type: 'checkbox', id: 'send-allow-invalid' }) as HTMLInputElement;
  const result = h('div', { id: 'send-result' });
  let read: () => unknown = () => ({});
  const render = (): void => {
    const entry = subjects.find((candidate) => candidate.subject === subject.value)!;
    const form = schemaFields(entry.schema);
    read = form.read;
    fields.replaceChildren(
      h('p', {}, `To ${entry.topic}, read by ${entry.consumers.join(', ')}.`),
      form.element,
    );
  };
  subject.addEventListener('change', render);
  render();
  const submit = async (): Promise<void> => {
    result.replaceChildren();
    const button = byId('send') as HTMLButtonElement;
    button.disabled = true;
    try {
      await planAndSend(result, {
        subject: subject.value,
        ...(raw.value !== '' ? { rawBody: raw.value } : { body: read() }),
        ...(messageId.value.trim() === '' ? {} : { messageId: messageId.value.trim() }),
        allowInvalid: allowInvalid.checked,
      });
    } catch (error) {
      result.replaceChildren(h('pre', { class: 'problem' }, (error as Error).message));
    } finally {
      button.disabled = overview?.actions !== true;
    }
  };
  detail(
    'Send an event',
    h('label', {}, 'Subject ', subject),
    fields,
    h(
      'details',
      { id: 'send-form-more' },
      h('summary', {}, 'Raw body, MessageId, poison'),
      h('label', {}, 'Raw body ', raw),
      h('label', {}, 'MessageId ', messageId),
      h('label', {}, allowInvalid, ' send it even if its consumers refuse it (a poison message)'),
    ),
    h(
      'button',
      { type: 'button', id: 'send', disabled: overview?.actions !== true, onclick: () => void submit() },
      'Send…',
    ),
    result,
  );
}

/**
 * Asks the server what the send would do (npm run send -- --dry-run's lines), shows it, and sends
 * only once the user confirms; the server refuses (409) when what it would send is no longer that.
 */
async function planAndSend(result: HTMLElement, request: SendRequest): Promise<void> {
  const plan = await api<SendPlanView>('send/plan', request);
  const confirmed = await confirmDialog(
    `Send ${plan.subject} to ${plan.topic}?`,
    plan.lines,
    plan.poison !== undefined
      ? 'Confirm to send it although its consumers refuse it: a poison message, which ends in the dead-letter queue.'
      : plan.subscriptions.length === 0
        ? 'Confirm to send it anyway: no subscription takes it, so Service Bus drops it.'
        : 'Confirm to send it.',
    true,
  );
  if (!confirmed) {
    status('Cancelled: nothing was sent.');
    return;
  }
  const sent = await api<SendResult>('send', { ...request, fingerprint: plan.fingerprint });
  result.replaceChildren(h('ul', {}, ...sent.lines.map((line) => h('li', {}, line))));
  status(`Sent ${sent.messageId}.`);
}

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  description?: string;
  minimum?: number;
}

/**
 * Inputs for a body schema: one per property of an object (text, number, a choice for an enum or a
 * constant, JSON for anything nested), a choice of variant for a union. What the fields hold is
 * only read into a body: the server validates it with the consumers' own schemas.
 */
function schemaFields(schema: unknown): { element: HTMLElement; read: () => unknown } {
  const root = (schema ?? {}) as JsonSchema;
  const variants = root.anyOf ?? root.oneOf;
  if (variants !== undefined) {
    const choice = h(
      'select',
      { class: 'variant' },
      ...variants.map((variant, index) => h('option', { value: index }, variantName(variant, index))),
    ) as HTMLSelectElement;
    const holder = h('div');
    let current = schemaFields(variants[0]);
    const render = (): void => {
      current = schemaFields(variants[Number(choice.value)]);
      holder.replaceChildren(current.element);
    };
    choice.addEventListener('change', render);
    render();
    return { element: h('div', {}, h('label', {}, 'Variant ', choice), holder), read: () => current.read() };
  }
  if (root.properties === undefined) {
    const text = h('textarea', { rows: 4, class: 'json' }, '{}') as HTMLTextAreaElement;
    return { element: h('label', {}, 'Body (JSON) ', text), read: () => parseOr(text.value) };
  }
  const readers: [string, () => unknown][] = [];
  const element = h('div', { class: 'fields' });
  for (const [name, property] of Object.entries(root.properties)) {
    const required = root.required?.includes(name) === true;
    const type = Array.isArray(property.type) ? property.type[0] : property.type;
    let input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
    let read: () => unknown;
    const choices = property.enum ?? (property.const === undefined ? undefined : [property.const]);
    if (choices !== undefined) {
      input = h(
        'select',
        { name },
        ...choices.map((value, index) => h('option', { value: index }, String(value))),
      ) as HTMLSelectElement;
      const select = input;
      read = () => choices[Number(select.value)];
    } else if (type === 'number' || type === 'integer') {
      input = h('input', { name, type: 'number', step: type === 'integer' ? 1 : 'any' }) as HTMLInputElement;
      const field = input;
      read = () => (field.value === '' ? undefined : Number(field.value));
    } else if (type === 'boolean') {
      input = h('input', { name, type: 'checkbox' }) as HTMLInputElement;
      const field = input;
      read = () => field.checked;
    } else if (type === 'string' || type === undefined) {
      input = h('input', { name, type: 'text' }) as HTMLInputElement;
      const field = input;
      read = () => (field.value === '' ? undefined : field.value);
    } else {
      input = h('textarea', { name, rows: 2, class: 'json' }) as HTMLTextAreaElement;
      const field = input;
      read = () => (field.value === '' ? undefined : parseOr(field.value));
    }
    readers.push([name, read]);
    element.append(
      h(
        'label',
        {},
        `${name}${required ? ' *' : ''} `,
        input,
        property.description ? h('small', {}, property.description) : undefined,
      ),
    );
  }
  return {
    element,
    read: (): Record<string, unknown> =>
      Object.fromEntries(
        readers
          .map(([name, read]): [string, unknown] => [name, read()])
          .filter(([, value]) => value !== undefined),
      ),
  };
}

function variantName(variant: JsonSchema, index: number): string {
  const constant = Object.entries(variant.properties ?? {}).find(
    ([, property]) => property.const !== undefined,
  );
  return constant === undefined ? `variant ${index + 1}` : `${constant[0]}: ${String(constant[1].const)}`;
}

/** JSON when it parses; otherwise the text, which the server's validation then refuses with its reason. */
function parseOr(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

// ---- the detail panel ------------------------------------------------------------------------

/** Shows a view in the detail panel; a wide one (a table) takes the page's whole width. */
function detail(title: string, ...children: Child[]): void {
  showIn(false, title, children);
}

function wideDetail(title: string, ...children: Child[]): void {
  showIn(true, title, children);
}

function showIn(wide: boolean, title: string, children: Child[]): void {
  document.querySelector('main')!.classList.toggle('wide-detail', wide);
  byId('detail').replaceChildren(h('div', {}, h('h2', {}, title), ...children));
}

// ---- start -----------------------------------------------------------------------------------

async function start(): Promise<void> {
  if (token === '') {
    status('No token: open the address the console printed (with its #token).', 'error');
    return;
  }
  byId('filter-consumer').addEventListener('change', renderFeed);
  byId('filter-message').addEventListener('input', renderFeed);
  byId('open-send').addEventListener('click', () => void showSendForm());
  await refreshOverview();
  status('Connected.');
  // Every 5 s after the last answer: a slow read never piles up.
  const refresh = (): void => {
    setTimeout(() => {
      refreshOverview()
        .catch((error: Error) => status(error.message, 'error'))
        .finally(refresh);
    }, 5000);
  };
  refresh();
  if (overview?.feed === true) {
    void followFeed();
  } else {
    byId('feed').replaceChildren(
      h('h2', {}, 'Live feed'),
      h(
        'p',
        {},
        "The live feed is npm start's. Against a deployment, follow each event in Application Insights by its trace id (docs/monitor.md, Follow an event).",
      ),
    );
  }
}

window.addEventListener('unhandledrejection', (event) => {
  status(String((event.reason as Error)?.message ?? event.reason), 'error');
});

void start().catch((error: Error) => status(error.message, 'error'));
