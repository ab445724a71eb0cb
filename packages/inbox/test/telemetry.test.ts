import {
  type DispatchReport,
  InboxTelemetry,
  METRIC_NAMES,
  type SweepReport,
} from '@idempotent-consumers/inbox/internal';
import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';

/**
 * What each instrument records, read back through an in-memory OpenTelemetry pipeline registered
 * as the global meter provider, as Azure Monitor's is in Azure: the names the alerts and the
 * workbook query, their units, their attributes and their values.
 */
const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
const provider = new MeterProvider({ readers: [reader] });

beforeAll(() => metrics.setGlobalMeterProvider(provider));
afterAll(async () => {
  await provider.shutdown();
  metrics.disable();
});

interface Exported {
  scope: string;
  description: string;
  unit: string;
  /** `value` for a counter or a gauge, `count/sum` for a histogram, by attributes. */
  points: Record<string, number | string>;
}

async function exported(): Promise<Map<string, Exported>> {
  exporter.reset();
  await reader.forceFlush();
  const found = new Map<string, Exported>();
  for (const scope of exporter.getMetrics().at(-1)?.scopeMetrics ?? []) {
    for (const metric of scope.metrics) {
      const points: Record<string, number | string> = {};
      for (const point of metric.dataPoints) {
        const value = point.value as number | { count: number; sum?: number };
        points[JSON.stringify(point.attributes)] =
          typeof value === 'number' ? value : `${value.count}/${value.sum}`;
      }
      found.set(metric.descriptor.name, {
        scope: scope.scope.name,
        description: metric.descriptor.description,
        unit: metric.descriptor.unit,
        points,
      });
    }
  }
  return found;
}

const dispatch = (sent: number, failedTopics: string[]): DispatchReport => ({
  sent,
  marked: sent,
  alreadyMarked: 0,
  unsendable: 0,
  setAside: [],
  failedTopics: failedTopics.map((topic) => ({
    topic,
    messages: 1,
    refused: false,
    error: 'e',
    cause: undefined,
  })),
  requestCharge: 1,
});

it('records what the app did on the instruments the alerts and the workbook read', async () => {
  const telemetry = new InboxTelemetry();
  let open = false;
  telemetry.observeBreaker(() => open);

  telemetry.delivery('billing.a', 'processed', 12, 3.5);
  telemetry.delivery('billing.a', 'processed', 8, 2);
  telemetry.delivery('billing.a', 'poison', 5, 0);
  telemetry.etagRetry('billing.a');
  telemetry.purge({
    purged: 3,
    skipped: 1,
    expiredRemaining: 2,
    markers: 10,
    stoppedBy: 'done',
    requestCharge: 9,
    throttled: 4,
    waitedMs: 0,
  });
  telemetry.outboxRelayed(dispatch(2, ['orders']));
  telemetry.outboxRelayed(dispatch(0, []));
  telemetry.outboxSweep({
    ...dispatch(1, ['orders', 'audit']),
    pending: 6,
    oldestPendingAgeSeconds: 30,
    unsendableKept: 1,
    capped: false,
  } satisfies SweepReport);
  telemetry.breakerTransition('open');
  telemetry.entityDrift([
    {
      entity: 'orders/a',
      property: 'lockDuration',
      setting: 'SERVICEBUS_LOCK_DURATION',
      expected: 'PT1M',
      deployed: 'PT2M',
      unsafe: false,
    },
  ]);
  telemetry.driftCheck('purge', 'unreadable');
  telemetry.driftCheck('start', 'checked');
  open = true;
  const metricsNow = await exported();

  const points = Object.fromEntries([...metricsNow].map(([name, metric]) => [name, metric.points]));
  const processed = JSON.stringify({ consumer: 'billing.a', outcome: 'processed' });
  const poison = JSON.stringify({ consumer: 'billing.a', outcome: 'poison' });
  expect(points).toEqual({
    [METRIC_NAMES.messages]: { [processed]: 2, [poison]: 1 },
    [METRIC_NAMES.duration]: { [processed]: '2/20', [poison]: '1/5' },
    // A delivery that cost nothing (poison: no request) records no charge.
    [METRIC_NAMES.requestCharge]: { [processed]: '2/5.5' },
    [METRIC_NAMES.etagRetries]: { [JSON.stringify({ consumer: 'billing.a' })]: 1 },
    [METRIC_NAMES.purgedMarkers]: { '{}': 3 },
    [METRIC_NAMES.expiredMarkers]: { '{}': 2 },
    [METRIC_NAMES.markers]: { '{}': 10 },
    [METRIC_NAMES.purgeThrottled]: { '{}': 4 },
    // A relay run that sent nothing adds no point.
    [METRIC_NAMES.outboxSent]: { '{"source":"relay"}': 2, '{"source":"sweeper"}': 1 },
    [METRIC_NAMES.outboxSendFailures]: {
      '{"topic":"orders","source":"relay"}': 1,
      '{"topic":"orders","source":"sweeper"}': 1,
      '{"topic":"audit","source":"sweeper"}': 1,
    },
    [METRIC_NAMES.outboxPending]: { '{}': 6 },
    [METRIC_NAMES.outboxOldestPendingAge]: { '{}': 30 },
    [METRIC_NAMES.outboxUnsendable]: { '{}': 1 },
    [METRIC_NAMES.breakerTransitions]: { '{"state":"open"}': 1 },
    [METRIC_NAMES.breakerOpen]: { '{}': 1 },
    [METRIC_NAMES.entityDrift]: { '{"entity":"orders/a","property":"lockDuration","unsafe":false}': 1 },
    [METRIC_NAMES.driftChecks]: {
      '{"when":"purge","result":"unreadable"}': 1,
      '{"when":"start","result":"checked"}': 1,
    },
  });
  expect(
    Object.fromEntries(
      [...metricsNow].filter(([, metric]) => metric.unit).map(([name, m]) => [name, m.unit]),
    ),
  ).toEqual({
    [METRIC_NAMES.requestCharge]: 'RU',
    [METRIC_NAMES.duration]: 'ms',
    [METRIC_NAMES.outboxOldestPendingAge]: 's',
  });
  // Every instrument says what it counts (Application Insights shows it), under the template's meter.
  expect([...metricsNow.values()].filter((metric) => metric.description.length < 20)).toEqual([]);
  expect(new Set([...metricsNow.values()].map((metric) => metric.scope))).toEqual(
    new Set(['idempotent-servicebus-consumers']),
  );
});

it("puts a duplicate's cause on inbox.messages only, and no cause dimension on other outcomes", async () => {
  const telemetry = new InboxTelemetry();

  telemetry.delivery('billing.causes', 'duplicate', 3, 1, 'redelivery');
  telemetry.delivery('billing.causes', 'processed', 3, 1);
  exporter.reset();
  await reader.forceFlush();

  const dimensions = (name: string): string[][] =>
    (exporter.getMetrics().at(-1)?.scopeMetrics ?? [])
      .flatMap((scope) => scope.metrics)
      .filter((metric) => metric.descriptor.name === name)
      .flatMap((metric) => metric.dataPoints.map((point) => point.attributes))
      .filter((attributes) => attributes.consumer === 'billing.causes')
      .map((attributes) => Object.keys(attributes).sort());
  expect(dimensions(METRIC_NAMES.messages).sort()).toEqual([
    ['cause', 'consumer', 'outcome'],
    ['consumer', 'outcome'],
  ]);
  expect(dimensions(METRIC_NAMES.duration)).toEqual([
    ['consumer', 'outcome'],
    ['consumer', 'outcome'],
  ]);
});

it('reports the breaker closed until told where to read it', async () => {
  const ownExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const ownReader = new PeriodicExportingMetricReader({
    exporter: ownExporter,
    exportIntervalMillis: 3_600_000,
  });
  const own = new MeterProvider({ readers: [ownReader] });
  new InboxTelemetry(own.getMeter('own'));

  await ownReader.forceFlush();
  const [metric] = ownExporter.getMetrics().at(-1)?.scopeMetrics[0]?.metrics ?? [];
  await own.shutdown();

  expect(metric?.descriptor.name).toBe(METRIC_NAMES.breakerOpen);
  expect(metric?.dataPoints.map((point) => point.value)).toEqual([0]);
});
