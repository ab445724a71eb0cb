import { type Attributes, metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';

/**
 * An in-memory OpenTelemetry pipeline registered as the global meter provider, as Azure Monitor's
 * would be in Azure. Register it before the app's runtime is built (before the first delivery).
 */
export class MetricsSink {
  private readonly exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  private readonly reader = new PeriodicExportingMetricReader({
    exporter: this.exporter,
    exportIntervalMillis: 3_600_000,
  });
  private readonly provider = new MeterProvider({ readers: [this.reader] });

  static register(): MetricsSink {
    const sink = new MetricsSink();
    metrics.setGlobalMeterProvider(sink.provider);
    return sink;
  }

  /** The value of a counter or gauge (or a histogram's count) for points whose attributes include `match`. */
  async value(name: string, match: Attributes = {}): Promise<number> {
    await this.reader.forceFlush();
    const batches = this.exporter.getMetrics();
    const latest = batches.at(-1);
    let total = 0;
    for (const scope of latest?.scopeMetrics ?? []) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name !== name) continue;
        for (const point of metric.dataPoints) {
          if (!Object.entries(match).every(([key, value]) => point.attributes[key] === value)) continue;
          const value = point.value as number | { count: number };
          total += typeof value === 'number' ? value : value.count;
        }
      }
    }
    return total;
  }

  /** The sum a histogram recorded for points whose attributes include `match`. */
  async sum(name: string, match: Attributes = {}): Promise<number> {
    await this.reader.forceFlush();
    let total = 0;
    for (const scope of this.exporter.getMetrics().at(-1)?.scopeMetrics ?? []) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name !== name) continue;
        for (const point of metric.dataPoints) {
          if (!Object.entries(match).every(([key, value]) => point.attributes[key] === value)) continue;
          total += (point.value as { sum?: number }).sum ?? 0;
        }
      }
    }
    return total;
  }

  async stop(): Promise<void> {
    await this.provider.shutdown();
    metrics.disable();
  }
}
