// infra/workbook.json, the operations workbook azd deploys (modules/workbook.bicep): its queries must
// read the metrics, dimensions and outcomes the app emits (packages/inbox/src/telemetry.ts), aggregate them as
// the exporter sends them, reference only parameters it declares, and be the queries of
// infra/monitoring.md. Its deployment is checked in monitoring.test.ts.

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { DUPLICATE_CAUSES, METRIC_NAMES, OUTCOMES } from '@idempotent-consumers/inbox/internal';

interface Item {
  type: number;
  name: string;
  customWidth?: string;
  content: Record<string, unknown>;
}
interface Parameter {
  id: string;
  name: string;
  type: number;
  query?: string;
}
interface Workbook {
  version: string;
  items: Item[];
}

const infraDir = path.resolve(__dirname, '..', '..', 'infra');
const workbookText = readFileSync(path.join(infraDir, 'workbook.json'), 'utf8');
const workbook = JSON.parse(workbookText) as Workbook;
const monitoringGuide = readFileSync(path.join(infraDir, 'monitoring.md'), 'utf8');
const alertsBicep = readFileSync(path.join(infraDir, 'modules', 'alerts.bicep'), 'utf8');

const items = (list: Item[]): Item[] =>
  list.flatMap((item) => [item, ...(item.type === 12 ? items((item.content['items'] as Item[]) ?? []) : [])]);
const all = items(workbook.items);
const queryItems = all.filter((item) => item.type === 3);
const queries = queryItems.map((item) => String(item.content['query']));
const parameters = all
  .filter((item) => item.type === 9)
  .flatMap((item) => item.content['parameters'] as Parameter[]);
const queryOf = (name: string): string => {
  const item = queryItems.find((candidate) => candidate.name === name);
  if (!item) throw new Error(`the workbook has no query step '${name}'`);
  return String(item.content['query']);
};
/** What infra/monitoring.md shows: the workbook's queries with a fixed grain instead of the time range's. */
const pasteable = (query: string): string => query.replaceAll('{TimeRange:grain}', '5m');
const kustoBlocks = [...monitoringGuide.matchAll(/```kusto\n([\s\S]*?)\n```/g)].map((match) => match[1]);

describe('infra/workbook.json', () => {
  it('is a serialized workbook (Notebook/1.0) of steps with unique names', () => {
    expect(workbook.version).toBe('Notebook/1.0');
    expect(queryItems.length).toBeGreaterThanOrEqual(8);
    expect(new Set(all.map((item) => item.name)).size).toBe(all.length);
    expect(new Set(parameters.map((parameter) => parameter.id)).size).toBe(parameters.length);
  });

  it('charts every metric the app emits', () => {
    for (const metric of Object.values(METRIC_NAMES)) {
      expect({ metric, charted: queries.some((query) => query.includes(`'${metric}'`)) }).toEqual({
        metric,
        charted: true,
      });
    }
  });

  it('names only metrics, outcomes and dimensions the app emits', () => {
    const metricNames: string[] = Object.values(METRIC_NAMES);
    const outcomes: readonly string[] = OUTCOMES;
    for (const query of queries) {
      for (const [, metric] of query.matchAll(/'((?:inbox|outbox)\.[a-z_]+)'/g)) {
        expect(metricNames).toContain(metric);
      }
      for (const [, outcome] of query.matchAll(/outcome (?:==|!=) '([a-z_]+)'/g)) {
        expect(outcomes).toContain(outcome);
      }
      for (const [, list] of query.matchAll(/outcome in \(([^)]*)\)/g)) {
        for (const [, outcome] of (list ?? '').matchAll(/'([a-z_]+)'/g)) {
          expect(outcomes).toContain(outcome);
        }
      }
      for (const [, dimension] of query.matchAll(/customDimensions\.(\w+)/g)) {
        expect([
          'consumer',
          'outcome',
          'cause',
          'state',
          'source',
          'topic',
          'entity',
          'property',
          'unsafe',
          'result',
          'attempt',
          'when',
        ]).toContain(dimension);
      }
    }
  });

  it('adds up counters and histograms by valueSum and valueCount, as the exporter pre-aggregates them', () => {
    // Gauges report a value instead: the purge's inbox size, each instance's breaker, and what the
    // outbox sweeper finds pending or set aside.
    const gauges = [
      "'inbox.markers'",
      "'inbox.breaker_open'",
      "'outbox.pending'",
      "'outbox.oldest_pending_age'",
      "'outbox.unsendable'",
    ];
    for (const query of queries.filter((q) => !gauges.some((gauge) => q.includes(gauge)))) {
      expect(query).toMatch(/\bsum\(valueSum\)/);
      expect(query).not.toMatch(/\b(?:sum|avg|count)\(value\)|\|\s*count\b|summarize\s+\w+\s*=\s*count\(\)/);
    }
    expect(queryOf('inbox size')).toMatch(/max\(value\)/);
    expect(queryOf('breaker open')).toMatch(/max\(valueMax\)/);
    expect(queryOf('outbox pending')).toMatch(/max\(value\)/);
    expect(queryOf('outbox oldest pending age')).toMatch(/max\(value\)/);
  });

  it('defines the duplicate rate as the duplicate-share alert does', () => {
    const alertQuery = /var duplicateShareQuery = '''\n([\s\S]*?)'''/.exec(alertsBicep)?.[1] ?? '';

    for (const fragment of [
      "| where name == 'inbox.messages'",
      "| where outcome != 'retried'",
      "duplicates = sumif(valueSum, outcome in ('duplicate', 'payload_mismatch'))",
    ]) {
      expect(alertQuery).toContain(fragment);
      expect(queryOf('duplicate rate per consumer')).toContain(fragment);
      expect(queryOf('duplicate rate over time')).toContain(fragment);
    }
  });

  it('charts request units per message by consumer and outcome: the charge over the deliveries that ended so', () => {
    const query = queryOf('request charge per message');

    // Both counts summed per consumer, outcome and interval before dividing: a mean of the histogram
    // alone would leave out the outcomes that charge nothing (poison), which record no histogram.
    expect(query).toContain(`where name in ('${METRIC_NAMES.requestCharge}', '${METRIC_NAMES.messages}')`);
    expect(query).toContain(
      'summarize total = sum(valueSum) by name, consumer, outcome, timestamp = bin(timestamp, {TimeRange:grain})',
    );
    expect(query).toContain(
      `summarize ru = sumif(total, name == '${METRIC_NAMES.requestCharge}'), messages = sumif(total, name == '${METRIC_NAMES.messages}') by consumer, outcome, timestamp`,
    );
    expect(query).toContain('ruPerMessage = round(ru / messages, 2)');
    expect(
      queryItems.find((item) => item.name === 'request charge per message')?.content['visualization'],
    ).toBe('timechart');
  });

  it('charts duplicates by cause over time, the causes the app names (and none for older rows)', () => {
    const query = queryOf('duplicates by cause');

    expect(query).toContain(`where name == '${METRIC_NAMES.messages}'`);
    expect(query).toContain("where outcome == 'duplicate'");
    expect(query).toContain('cause = tostring(customDimensions.cause)');
    expect(query).toContain(
      "summarize duplicates = sum(valueSum) by timestamp = bin(timestamp, {TimeRange:grain}), cause = iff(isempty(cause), 'not classified', cause)",
    );
    expect(queryItems.find((item) => item.name === 'duplicates by cause')?.content['visualization']).toBe(
      'timechart',
    );
    // Every cause a query names is one the app emits.
    for (const q of queries) {
      for (const [, cause] of q.matchAll(/cause == '([a-z_]+)'/g)) expect(DUPLICATE_CAUSES).toContain(cause);
    }
  });

  it('queries the Application Insights component in the time range the reader picks', () => {
    for (const item of queryItems) {
      expect({ step: item.name, ...item.content }).toMatchObject({
        step: item.name,
        queryType: 0,
        resourceType: 'microsoft.insights/components',
        crossComponentResources: ['{AppInsights}'],
        timeContextFromParameter: 'TimeRange',
      });
    }
  });

  it('charts the Service Bus metric DeadletteredMessages per topic, on the namespace next to the component', () => {
    const metricItems = all.filter((item) => item.type === 10);
    const serviceBus = parameters.find((parameter) => parameter.name === 'ServiceBus');

    expect(metricItems).toHaveLength(1);
    expect(metricItems[0]?.content).toMatchObject({
      resourceType: 'microsoft.servicebus/namespaces',
      resourceIds: ['{ServiceBus}'],
      timeContextFromParameter: 'TimeRange',
      metrics: [
        {
          namespace: 'microsoft.servicebus/namespaces',
          metric: 'microsoft.servicebus/namespaces--DeadletteredMessages',
          splitBy: 'EntityName',
        },
      ],
    });
    expect(serviceBus?.type).toBe(5);
    expect(serviceBus?.query).toContain("where type =~ 'microsoft.servicebus/namespaces'");
    expect(serviceBus?.query).toContain("resourceGroup =~ '{AppInsights:resourcegroup}'");
  });

  it('uses only parameters it declares, and no hard-coded resource id', () => {
    const declared = parameters.map((parameter) => parameter.name);
    const used = [...workbookText.matchAll(/\{(\w+)(?::\w+)?\}/g)].map((match) => match[1]);

    expect(used.length).toBeGreaterThan(0);
    for (const name of new Set(used)) {
      expect(declared).toContain(name);
    }
    expect(workbookText).not.toMatch(/\/subscriptions\/[0-9a-f-]{36}/i);
  });

  it('is what infra/monitoring.md gives to paste into Logs, query for query', () => {
    for (const item of queryItems) {
      expect({
        step: item.name,
        inGuide: kustoBlocks.includes(pasteable(String(item.content['query']))),
      }).toEqual({ step: item.name, inGuide: true });
    }
  });
});

describe('infra/monitoring.md', () => {
  it('reads the log lines the way the app writes them: a message, then its fields as JSON', () => {
    const traceQueries = kustoBlocks.filter((block) => block?.includes('traces'));

    expect(traceQueries.length).toBeGreaterThanOrEqual(4);
    for (const query of traceQueries) {
      expect(query).toContain('extend f = parse_json(extract(@"(\\{.*\\})$", 1, message))');
    }
  });

  it('finds one message by its MessageId', () => {
    expect(kustoBlocks.some((block) => block?.includes('tostring(f.messageId) == messageId'))).toBe(true);
  });
});
