import type { InvocationContext, Timer } from '@azure/functions';

import { type CircuitBreaker, CircuitOpenError } from './breaker';
import type { Consumer } from './consumer';
import { toDelivery } from './delivery';
import { bounded, PoisonMessageError, TransientStoreError } from './errors';
import { processDelivery, type ProcessDependencies } from './process';
import { runPurge } from './purge';
import type { Settings } from './settings';
import type { InboxTelemetry, Outcome } from './telemetry';

/**
 * What the Azure Functions adapters need, built once per process (see src/app.ts): what processing
 * a delivery needs (the container, the clock, ...), with all the settings, the metrics and the breaker.
 */
export interface InboxRuntime extends ProcessDependencies {
  settings: Settings;
  telemetry: InboxTelemetry;
  /** One per instance: holds deliveries while Cosmos DB is failing (see breaker.ts). */
  breaker: CircuitBreaker;
}

export type ServiceBusHandler = (message: unknown, context: InvocationContext) => Promise<void>;
export type TimerHandler = (timer: Timer, context: InvocationContext) => Promise<void>;

/**
 * The Service Bus trigger handler for a consumer. Returning completes the message; throwing
 * abandons it (Service Bus redelivers it, and dead-letters it after maxDeliveryCount).
 */
export function serviceBusHandler(consumer: Consumer, runtime: () => InboxRuntime): ServiceBusHandler {
  return async (message, context) => {
    const inbox = runtime();
    const { settings, telemetry, breaker } = inbox;
    const delivery = toDelivery(message, context);
    const started = performance.now();
    const breakerStarted = breaker.now();
    const fields = {
      consumer: consumer.name,
      messageId: delivery.messageId === undefined ? null : bounded(delivery.messageId),
      deliveryCount: delivery.deliveryCount,
      subject: delivery.subject === undefined ? null : bounded(delivery.subject),
    };
    if (delivery.messageIdIsLossy) {
      log(
        context,
        'warn',
        'MessageId arrived JSON-parsed (a number or JSON text, which several MessageIds map to); keying the marker by MessageId and payload hash. Use MessageIds that are not JSON, such as GUIDs.',
        fields,
      );
    }
    try {
      const result = await processDelivery(consumer, delivery, inbox);
      breaker.succeeded();
      logBreakerTransitions(context, breaker);
      const elapsedMs = performance.now() - started;
      telemetry.delivery(consumer.name, result.outcome, elapsedMs, result.requestCharge);
      const summary = {
        ...fields,
        outcome: result.outcome,
        alternative: result.alternative, // left out of the JSON when undefined
        attempts: result.attempts,
        requestCharge: result.requestCharge,
        durationMs: Math.round(elapsedMs),
      };
      if (result.outcome === 'payload_mismatch') {
        log(
          context,
          'warn',
          'Duplicate MessageId with a different body: completed without applying it (producer bug?)',
          summary,
        );
      } else {
        log(context, 'info', messageFor(result.outcome), summary);
      }
    } catch (error) {
      await breaker.failed(error, breakerStarted);
      logBreakerTransitions(context, breaker);
      const outcome: Outcome = error instanceof PoisonMessageError ? 'poison' : 'retried';
      telemetry.delivery(consumer.name, outcome, performance.now() - started, 0);
      const failure = {
        ...fields,
        outcome,
        reason: error instanceof PoisonMessageError ? error.reason : undefined,
        error: bounded(`${(error as Error).name}: ${(error as Error).message}`, 1000),
      };
      if (outcome === 'poison') {
        log(
          context,
          'error',
          'Poison message: nothing written; it will be dead-lettered once its deliveries run out',
          failure,
        );
      } else if (error instanceof CircuitOpenError) {
        log(
          context,
          'warn',
          'Held while the Cosmos DB circuit breaker was open: giving the message back before its lock renewal or the function timeout ends',
          failure,
        );
      } else if (error instanceof TransientStoreError) {
        log(context, 'warn', 'Cosmos DB failed transiently: giving the message back for redelivery', failure);
      } else {
        log(context, 'error', 'Delivery failed: giving the message back for redelivery', failure);
      }
      if (delivery.deliveryCount >= settings.redelivery.maxDeliveryCount) {
        log(
          context,
          'error',
          `This was delivery ${delivery.deliveryCount} of ${settings.redelivery.maxDeliveryCount}: Service Bus is about to move the message to the dead-letter queue`,
          failure,
        );
      }
      throw error;
    }
  };
}

/** The timer handler that deletes expired markers, a bounded amount per run. */
export function purgeTimerHandler(runtime: () => InboxRuntime): TimerHandler {
  return async (_timer, context) => {
    const { container, settings, telemetry, now } = runtime();
    const report = await runPurge(container, {
      now: now(),
      maxItems: settings.purge.maxItems,
      maxDurationMs: settings.purge.maxDurationSeconds * 1000,
      maxRequestUnitsPerSecond: settings.purge.maxRequestUnitsPerSecond,
    });
    telemetry.purge(report);
    log(
      context,
      report.expiredRemaining > 0 ? 'warn' : 'info',
      report.expiredRemaining > 0
        ? `Purged ${report.purged} expired markers; ${report.expiredRemaining} remain for the next run`
        : `Purged ${report.purged} expired markers`,
      { ...report, requestCharge: Math.round(report.requestCharge * 100) / 100 },
    );
  };
}

/** Breaker state changes, logged by the delivery that sees them first (bounded, no message content). */
function logBreakerTransitions(context: InvocationContext, breaker: CircuitBreaker): void {
  for (const transition of breaker.takeTransitions()) {
    if (transition.state === 'open') {
      log(
        context,
        'warn',
        'Cosmos DB circuit breaker opened: deliveries are held (nothing new is received) while a probe checks Cosmos DB',
        { breaker: transition },
      );
    } else {
      log(context, 'info', 'Cosmos DB circuit breaker closed: held deliveries go on', {
        breaker: transition,
      });
    }
  }
}

function messageFor(outcome: Outcome): string {
  switch (outcome) {
    case 'processed':
      return 'Processed: marker and effect committed in one batch';
    case 'alternative':
      return "Processed with the handler's alternative: marker and alternative committed in one batch";
    case 'duplicate':
      return 'Duplicate: this consumer already applied this message; completed without writing';
    default:
      return outcome;
  }
}

/**
 * One line per event, with its fields as JSON at the end, so Application Insights queries can
 * `parse_json(extract(@"(\{.*\})$", 1, message))` them.
 */
function log(
  context: InvocationContext,
  level: 'info' | 'warn' | 'error',
  message: string,
  fields: object,
): void {
  context[level](`${message} ${JSON.stringify(fields)}`);
}
