import {
  type Attributes,
  type Counter,
  type Gauge,
  type Histogram,
  type Meter,
  metrics,
} from '@opentelemetry/api';

import type { DeliveryCause } from './duplicateCause';
import type { Drift } from './entityDrift';
import type { PurgeReport } from './purge';
import type { DispatchReport, SweepReport } from './relay';

/**
 * Metrics, through the OpenTelemetry API. In Azure, applicationinsights (Azure Monitor) registers the
 * global meter provider and exports them to the `customMetrics` table; with no connection string no
 * provider is registered and every instrument is a no-op. Tests register an in-memory reader.
 */
export const OUTCOMES = [
  'processed',
  'alternative',
  'duplicate',
  'payload_mismatch',
  'poison',
  'retried',
] as const;
/**
 * processed        the effect was applied (batch committed)
 * alternative      the handler's alternative was applied instead (for example a backorder), once
 * duplicate        this consumer had already applied this message (or a newer version): nothing written
 * payload_mismatch a duplicate MessageId with a different body: nothing written, a producer bug
 * poison           the message can never succeed: nothing written, it will be dead-lettered
 * retried          a transient failure: the delivery is given back for redelivery, or completed
 *                  with a delayed copy scheduled (inbox.delayed_retries counts those)
 */
export type Outcome = (typeof OUTCOMES)[number];

export const METRIC_NAMES = {
  messages: 'inbox.messages',
  etagRetries: 'inbox.etag_retries',
  requestCharge: 'inbox.batch_request_charge',
  duration: 'inbox.processing_duration',
  purgedMarkers: 'inbox.purged_markers',
  expiredMarkers: 'inbox.expired_markers_remaining',
  markers: 'inbox.markers',
  purgeThrottled: 'inbox.purge_throttled_requests',
  breakerTransitions: 'inbox.breaker_transitions',
  breakerOpen: 'inbox.breaker_open',
  outboxSent: 'outbox.sent',
  outboxPending: 'outbox.pending',
  outboxOldestPendingAge: 'outbox.oldest_pending_age',
  outboxSendFailures: 'outbox.send_failures',
  outboxUnsendable: 'outbox.unsendable',
  entityDrift: 'inbox.entity_drift',
  driftChecks: 'inbox.drift_checks',
  delayedRetries: 'inbox.delayed_retries',
} as const;

/**
 * What a drift check came to: `checked` (the entities were read and compared), `unreadable` (the
 * read failed or was refused: a wrong SERVICEBUS_RESOURCE_ID, no Reader role, Resource Manager
 * down), `off` (no SERVICEBUS_RESOURCE_ID: no guard).
 */
export type DriftCheckResult = 'checked' | 'unreadable' | 'off';

export class InboxTelemetry {
  private readonly messages: Counter;
  private readonly etagRetries: Counter;
  private readonly delayedRetries: Counter;
  private readonly requestCharge: Histogram;
  private readonly duration: Histogram;
  private readonly purgedMarkers: Counter;
  private readonly expiredMarkers: Gauge;
  private readonly markers: Gauge;
  private readonly purgeThrottled: Counter;
  private readonly breakerTransitions: Counter;
  private readonly outboxSent: Counter;
  private readonly outboxPending: Gauge;
  private readonly outboxOldestPendingAge: Gauge;
  private readonly outboxSendFailures: Counter;
  private readonly outboxUnsendable: Gauge;
  private readonly entityDrifts: Counter;
  private readonly driftChecks: Counter;
  // Stryker disable next-line ArrowFunction: equivalent: undefined observes as 0, as false does
  private breakerIsOpen: () => boolean = () => false;

  /** Create it after the meter provider is registered: the OpenTelemetry API does not proxy meters. */
  constructor(meter: Meter = metrics.getMeter('idempotent-servicebus-consumers')) {
    this.messages = meter.createCounter(METRIC_NAMES.messages, {
      description: 'Deliveries by consumer and outcome',
    });
    this.etagRetries = meter.createCounter(METRIC_NAMES.etagRetries, {
      description: 'Handler re-runs after an ETag conflict on a staged write',
    });
    this.requestCharge = meter.createHistogram(METRIC_NAMES.requestCharge, {
      description: 'Cosmos DB request units spent per delivery',
      unit: 'RU',
    });
    this.duration = meter.createHistogram(METRIC_NAMES.duration, {
      description: 'Time from delivery to outcome',
      unit: 'ms',
    });
    this.purgedMarkers = meter.createCounter(METRIC_NAMES.purgedMarkers, {
      description: 'Expired markers deleted',
    });
    this.expiredMarkers = meter.createGauge(METRIC_NAMES.expiredMarkers, {
      description: 'Expired markers left after a purge run',
    });
    this.markers = meter.createGauge(METRIC_NAMES.markers, { description: 'Inbox size: markers stored' });
    this.purgeThrottled = meter.createCounter(METRIC_NAMES.purgeThrottled, {
      description: "429 answers the purge met (Cosmos DB's throughput was spent); it waits and goes on",
    });
    this.breakerTransitions = meter.createCounter(METRIC_NAMES.breakerTransitions, {
      description: 'Cosmos DB circuit breaker state changes, by the state entered (open, closed)',
    });
    this.outboxSent = meter.createCounter(METRIC_NAMES.outboxSent, {
      description: 'Outbox messages sent to Service Bus, by source: relay (change feed) or sweeper (resend)',
    });
    this.outboxPending = meter.createGauge(METRIC_NAMES.outboxPending, {
      description: 'Outbox messages not yet marked dispatched, measured by each sweeper run',
    });
    this.outboxOldestPendingAge = meter.createGauge(METRIC_NAMES.outboxOldestPendingAge, {
      description: 'Age of the oldest pending outbox message (0 when none), measured by each sweeper run',
      unit: 's',
    });
    this.outboxSendFailures = meter.createCounter(METRIC_NAMES.outboxSendFailures, {
      description:
        'Outbox sends to a topic that failed, by topic and source (relay, sweeper): the messages stay pending',
    });
    this.outboxUnsendable = meter.createGauge(METRIC_NAMES.outboxUnsendable, {
      description:
        'Outbox messages set aside as unsendable, waiting for an operator (npm run outbox), measured by each sweeper run',
    });
    this.entityDrifts = meter.createCounter(METRIC_NAMES.entityDrift, {
      description:
        'Properties of the deployed Service Bus entities that differ from the settings (entityDrift.ts), at start and per purge run; unsafe=true breaks the guarantee',
    });
    this.driftChecks = meter.createCounter(METRIC_NAMES.driftChecks, {
      description:
        'Drift guard checks (entityDrift.ts), at start and per purge run: checked, unreadable (the entities could not be read: a purge run is paused) or off (no SERVICEBUS_RESOURCE_ID)',
    });
    this.delayedRetries = meter.createCounter(METRIC_NAMES.delayedRetries, {
      description:
        'Delayed retries (delayedRetry.ts): scheduled (a copy waits on the topic), spent (the last copy failed; dead-lettered after its deliveries) or failed (the copy could not be scheduled; redelivered)',
    });
    // Observed at every export, so an instance whose breaker stays open keeps reporting 1.
    meter
      .createObservableGauge(METRIC_NAMES.breakerOpen, {
        description: 'Cosmos DB circuit breaker of this instance: 1 open (deliveries held), 0 closed',
      })
      .addCallback((result) => result.observe(this.breakerIsOpen() ? 1 : 0));
  }

  /** Where inbox.breaker_open reads the breaker's state. */
  observeBreaker(isOpen: () => boolean): void {
    this.breakerIsOpen = isOpen;
  }

  breakerTransition(state: 'open' | 'closed'): void {
    this.breakerTransitions.add(1, { state });
  }

  /**
   * `cause`: a duplicate's (duplicateCause.ts), or `suspected_producer_duplicate` on a delivery whose
   * event key was applied under another MessageId; a dimension of inbox.messages only.
   */
  delivery(
    consumer: string,
    outcome: Outcome,
    durationMs: number,
    requestCharge: number,
    cause?: DeliveryCause,
  ): void {
    const attributes: Attributes = { consumer, outcome };
    this.messages.add(1, cause === undefined ? attributes : { ...attributes, cause });
    this.duration.record(durationMs, attributes);
    if (requestCharge > 0) this.requestCharge.record(requestCharge, attributes);
  }

  /** One count per drifted property, each time the entities are checked. */
  entityDrift(drifts: readonly Drift[]): void {
    for (const { entity, property, unsafe } of drifts) this.entityDrifts.add(1, { entity, property, unsafe });
  }

  /** One count per drift check: whether the guard could read the deployed entities, at start or before a purge run. */
  driftCheck(when: 'start' | 'purge', result: DriftCheckResult): void {
    this.driftChecks.add(1, { when, result });
  }

  /** One count per decision on a failed delivery of a consumer with delayed retry. */
  delayedRetry(consumer: string, result: 'scheduled' | 'spent' | 'failed', attempt: number): void {
    this.delayedRetries.add(1, { consumer, result, attempt });
  }

  etagRetry(consumer: string): void {
    this.etagRetries.add(1, { consumer });
  }

  purge(report: PurgeReport): void {
    this.purgedMarkers.add(report.purged);
    this.expiredMarkers.record(report.expiredRemaining);
    this.markers.record(report.markers);
    this.purgeThrottled.add(report.throttled);
  }

  outboxRelayed(report: DispatchReport): void {
    this.outboxDispatch('relay', report);
  }

  outboxSweep(report: SweepReport): void {
    this.outboxDispatch('sweeper', report);
    this.outboxPending.record(report.pending);
    this.outboxOldestPendingAge.record(report.oldestPendingAgeSeconds);
    this.outboxUnsendable.record(report.unsendableKept);
  }

  private outboxDispatch(source: 'relay' | 'sweeper', report: DispatchReport): void {
    if (report.sent > 0) this.outboxSent.add(report.sent, { source });
    for (const { topic } of report.failedTopics) this.outboxSendFailures.add(1, { topic, source });
  }
}
