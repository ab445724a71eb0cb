import type { InvocationContext, Timer } from '@azure/functions';

import { type BreakerClock, type CircuitBreaker, CircuitOpenError } from './breaker';
import type { Consumer } from './consumer';
import {
  asOriginal,
  type DelayedRetryBinding,
  resolvedPolicy,
  type ResolvedRetryPolicy,
  retryCopy,
  retryDecision,
  type RetryScheduler,
} from './delayedRetry';
import { type Delivery, toDelivery } from './delivery';
import { type DeployedEntities, type Drift, entityDrift, unsafeDriftProblem } from './entityDrift';
import { bounded, PoisonMessageError, TransientStoreError } from './errors';
import { failureNote } from './failureNote';
import { processDelivery, type ProcessDependencies } from './process';
import { runPurge } from './purge';
import {
  type DispatchReport,
  type OutboxPublisher,
  type RelayDependencies,
  relayOutbox,
  sweepOutbox,
} from './relay';
import type { Settings } from './settings';
import type { InboxTelemetry, Outcome } from './telemetry';
import { carrierOf, deliveryParent, inSpan, messagingAttributes, SpanKind } from './tracing';

/**
 * What the Azure Functions adapters need, built once per process (see src/app.ts): what processing
 * a delivery needs (the container, the clock, ...), with all the settings, the metrics and the breaker.
 */
export interface InboxRuntime extends ProcessDependencies {
  settings: Settings;
  telemetry: InboxTelemetry;
  /** One per instance: holds deliveries while Cosmos DB is failing (see breaker.ts). */
  breaker: CircuitBreaker;
  /** Sends what the outbox holds (see relay.ts). */
  publisher: OutboxPublisher;
  /**
   * Reads the deployed Service Bus entities the consumers read from (entityDrift.ts); undefined when
   * the app has no SERVICEBUS_RESOURCE_ID. The purge timer checks them before each run.
   */
  deployedEntities?: () => Promise<DeployedEntities>;
  /** Schedules delayed-retry copies (delayedRetry.ts); a consumer with delayed retry needs it. */
  retryScheduler?: RetryScheduler;
  /**
   * The timers of the deadlines the app sets on its Cosmos DB requests (a relay's mark): real
   * timers when unset, as in Azure. A deterministic simulation, where requests take model time,
   * sets its model clock; a scaled clock must not, since its requests take real time.
   */
  requestDeadlines?: Pick<BreakerClock, 'after'>;
}

export type ServiceBusHandler = (message: unknown, context: InvocationContext) => Promise<void>;
export type TimerHandler = (timer: Timer, context: InvocationContext) => Promise<void>;
export type CosmosDBHandler = (documents: unknown[], context: InvocationContext) => Promise<void>;

/**
 * The Service Bus trigger handler for a consumer. Returning completes the message; throwing
 * abandons it (Service Bus redelivers it, and dead-letters it after maxDeliveryCount). With
 * `delayedRetry`, a failed delivery past the policy's immediate retries schedules a copy of the
 * message for later and completes (delayedRetry.ts); a delayed copy is processed as its original.
 */
export function serviceBusHandler(
  consumer: Consumer,
  runtime: () => InboxRuntime,
  delayedRetry?: DelayedRetryBinding,
): ServiceBusHandler {
  const policy = delayedRetry === undefined ? undefined : resolvedPolicy(delayedRetry.policy);
  return async (message, context) => {
    const inbox = runtime();
    const { settings, telemetry, breaker } = inbox;
    const delivery = asOriginal(toDelivery(message, context));
    const started = performance.now();
    const breakerStarted = breaker.now();
    const fields = {
      consumer: consumer.name,
      messageId: delivery.messageId === undefined ? null : bounded(delivery.messageId),
      deliveryCount: delivery.deliveryCount,
      subject: delivery.subject === undefined ? null : bounded(delivery.subject),
      // A delayed copy's own MessageId and which copy it is; left out of the JSON otherwise.
      retry:
        delivery.retry === undefined
          ? undefined
          : { copyMessageId: bounded(delivery.retry.copyMessageId), attempt: delivery.retry.attempt },
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
      // The delivery's span continues the trace it was delivered with; tx.publish stores its
      // context with each outbox document, so what the relay sends joins this trace.
      const { parent, links } = deliveryParent(context.traceContext, delivery.applicationProperties);
      const result = await inSpan(
        `process ${consumer.name}`,
        {
          kind: SpanKind.CONSUMER,
          parent,
          links,
          attributes: messagingAttributes('process', consumer.name, {
            'messaging.message.id': fields.messageId ?? '',
            'messaging.servicebus.message.delivery_count': delivery.deliveryCount,
          }),
        },
        (_span, ctx) => processDelivery(consumer, delivery, inbox, carrierOf(ctx)),
      );
      breaker.succeeded();
      logBreakerTransitions(context, breaker);
      const elapsedMs = performance.now() - started;
      telemetry.delivery(
        consumer.name,
        result.outcome,
        elapsedMs,
        result.requestCharge,
        result.duplicateCause,
      );
      const summary = {
        ...fields,
        outcome: result.outcome,
        cause: result.duplicateCause, // a duplicate's only; left out of the JSON otherwise
        alternative: result.alternative, // left out of the JSON when undefined
        attempts: result.attempts,
        requestCharge: result.requestCharge,
        durationMs: Math.round(elapsedMs),
      };
      const suspected = result.suspectedProducerDuplicate;
      if (suspected !== undefined) {
        // The event key is message content: its length and a hash prefix only.
        log(
          context,
          'warn',
          suspected.handling === 'absorbed'
            ? 'Suspected producer duplicate: this event was applied under another MessageId; completed without applying it'
            : 'Suspected producer duplicate: this event was applied under another MessageId; applied anyway (eventKey onConflict: flag)',
          { ...summary, firstMessageId: bounded(suspected.firstMessageId), eventKey: suspected.eventKey },
        );
      } else if (result.outcome === 'payload_mismatch') {
        log(
          context,
          'warn',
          'Duplicate MessageId with a different body: completed without applying it (producer bug?)',
          summary,
        );
      } else {
        log(context, 'info', messageFor(result.outcome), summary);
      }
      // Which business documents changed: business ids, so at debug level, which host.json's
      // Information keeps out of Application Insights; npm start shows it.
      if (result.wrote !== undefined) {
        log(context, 'debug', 'Wrote', {
          consumer: consumer.name,
          partitionKey: bounded(result.wrote.partitionKey),
          documents: result.wrote.documents.slice(0, 10).map(({ kind, id }) => `${kind} ${bounded(id)}`),
          count: result.wrote.documents.length,
        });
      }
    } catch (error) {
      await breaker.failed(error, breakerStarted);
      logBreakerTransitions(context, breaker);
      if (
        policy !== undefined &&
        (await delayRetry(context, consumer, delayedRetry!, policy, delivery, error, inbox, started))
      )
        return;
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
        // Not after a failure of Cosmos DB itself: the note would fail the same way.
        if (!(error instanceof TransientStoreError))
          await noteFailure(context, consumer, delivery, error, inbox);
      }
      throw error;
    }
  };
}

/** The timer handler that deletes expired markers, a bounded amount per run. */
// Stryker disable next-line BlockStatement: static: runs when the function files load (registration), where a mutant cannot be switched on; test/functions/adapters.test.ts runs the timer
export function purgeTimerHandler(runtime: () => InboxRuntime): TimerHandler {
  return async (_timer, context) => {
    const { container, settings, telemetry, now, deployedEntities } = runtime();
    if (deployedEntities === undefined) {
      telemetry.driftCheck('purge', 'off');
    } else {
      let drifts: Drift[];
      try {
        drifts = entityDrift(settings, await deployedEntities());
      } catch (error) {
        // Not drift, but no proof against it either: the start-up check may have been refused the
        // same way. Markers are kept (safe; the TTL backstop bounds them) until a read succeeds.
        telemetry.driftCheck('purge', 'unreadable');
        log(
          context,
          'error',
          'Purge paused: the drift guard could not read the deployed Service Bus entities (check SERVICEBUS_RESOURCE_ID and the Reader role)',
          { error: bounded(error instanceof Error ? error.message : String(error), 300) },
        );
        return;
      }
      telemetry.driftCheck('purge', 'checked');
      telemetry.entityDrift(drifts);
      const problem = unsafeDriftProblem(drifts);
      if (problem !== undefined) {
        // Markers are kept (safe, they cost storage) until the entities or the settings are fixed.
        log(context, 'error', `Purge skipped: ${problem}`, {
          unsafeDrifts: drifts.filter((d) => d.unsafe).length,
        });
        return;
      }
    }
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

/**
 * The outbox relay's Cosmos DB trigger handler: sends the pending outbox documents among a page of
 * changes, then marks them dispatched. A topic that refuses its messages leaves them pending for the
 * sweeper, and the page goes on; any other failure throws, and the trigger's retry policy runs the
 * page again. Once its retries are spent the checkpoint moves on, and the sweeper resends what is
 * still pending after OUTBOX_SWEEP_AGE.
 */
export function outboxRelayHandler(runtime: () => InboxRuntime): CosmosDBHandler {
  return async (documents, context) => {
    const { telemetry } = runtime();
    const started = performance.now();
    try {
      const retrying = (context.retryContext?.retryCount ?? 0) > 0;
      const report = await relayOutbox(documents, relayDependencies(runtime()), retrying);
      telemetry.outboxRelayed(report);
      logSetAside(context, report);
      for (const failure of report.failedTopics) {
        log(
          context,
          failure.refused ? 'error' : 'warn',
          failure.refused
            ? `Topic ${failure.topic} refused ${failure.messages} outbox messages: left pending for the sweeper, which tries again after OUTBOX_SWEEP_AGE; the other topics go on`
            : `Sending ${failure.messages} outbox messages to topic ${failure.topic} failed: the page will be retried`,
          { topic: failure.topic, messages: failure.messages, error: failure.error },
        );
      }
      if (report.retry) throw report.retry;
      if (report.sent === 0) return;
      log(context, 'info', `Relayed ${report.sent} outbox messages`, {
        changes: documents.length,
        ...countsOf(report),
        durationMs: Math.round(performance.now() - started),
      });
    } catch (error) {
      const retry = context.retryContext;
      log(
        context,
        'warn',
        retry && retry.maxRetryCount >= 0 && retry.retryCount >= retry.maxRetryCount
          ? 'Outbox relay failed and its retries are spent: the change feed moves on, and the sweeper resends what is still pending'
          : 'Outbox relay failed: the change feed page will be retried',
        {
          changes: documents.length,
          retryCount: retry?.retryCount ?? 0,
          maxRetryCount: retry?.maxRetryCount ?? 0,
          error: bounded(`${(error as Error).name}: ${(error as Error).message}`, 1000),
        },
      );
      throw error;
    }
  };
}

/** What the relay and the sweeper take from the runtime. */
function relayDependencies(runtime: InboxRuntime): RelayDependencies {
  const { container, publisher, now, settings, requestDeadlines } = runtime;
  return {
    container,
    publisher,
    now,
    settings,
    ...(requestDeadlines === undefined
      ? {}
      : { after: (ms: number, callback: () => void) => requestDeadlines.after(ms, callback) }),
  };
}

/**
 * The timer handler that resends outbox messages still pending after OUTBOX_SWEEP_AGE, a bounded
 * number per run, topic by topic. The run fails (after reporting its measurements) when a topic's
 * send or a Cosmos DB request failed, so that the function's failures show it too.
 */
export function outboxSweepHandler(runtime: () => InboxRuntime): TimerHandler {
  return async (_timer, context) => {
    const { telemetry } = runtime();
    const report = await sweepOutbox(relayDependencies(runtime()));
    telemetry.outboxSweep(report);
    logSetAside(context, report);
    const { failure, failedTopics } = report;
    const fields = {
      ...countsOf(report),
      pending: report.pending,
      oldestPendingAgeSeconds: report.oldestPendingAgeSeconds,
      unsendableKept: report.unsendableKept,
      capped: report.capped,
    };
    for (const topic of failedTopics) {
      log(
        context,
        'error',
        `Outbox sweeper: topic ${topic.topic} ${topic.refused ? 'refused' : 'failed'} its messages; they wait, pending, for the next run, and the other topics go on`,
        { topic: topic.topic, messages: topic.messages, error: topic.error },
      );
    }
    if (report.unsendableKept > 0) {
      log(
        context,
        'error',
        `Outbox: ${report.unsendableKept} messages are set aside as unsendable and wait for an operator (npm run outbox -- list --unsendable)`,
        { unsendableKept: report.unsendableKept },
      );
    }
    if (failure !== undefined) {
      log(
        context,
        'warn',
        `Outbox sweeper could not finish: ${report.pending} messages wait, pending, for the next run`,
        { ...fields, error: bounded(`${failure.name}: ${failure.message}`, 1000) },
      );
      throw failure;
    }
    if (report.sent > 0) {
      log(
        context,
        'warn',
        `Resent ${report.sent} outbox messages pending longer than OUTBOX_SWEEP_AGE${report.capped ? '; more remain for the next run' : ''}`,
        fields,
      );
    } else {
      log(context, 'info', `Outbox: ${report.pending} pending`, fields);
    }
    const first = failedTopics[0];
    if (first !== undefined) throw first.cause instanceof Error ? first.cause : new Error(first.error);
  };
}

/** A dispatch's counts for a log line. */
function countsOf(report: DispatchReport): object {
  return {
    sent: report.sent,
    marked: report.marked,
    alreadyMarked: report.alreadyMarked,
    unsendable: report.unsendable,
    failedTopics: report.failedTopics.map((failure) => failure.topic),
    requestCharge: Math.round(report.requestCharge * 100) / 100,
  };
}

/** Documents the relay or the sweeper set aside, with what was wrong with each (never the body). */
function logSetAside(context: InvocationContext, report: DispatchReport): void {
  if (report.unsendable === 0) return;
  log(
    context,
    'error',
    `${report.unsendable} outbox documents set aside as unsendable, kept for an operator (npm run outbox -- list --unsendable; resend or discard)`,
    { unsendable: report.unsendable, documents: report.setAside },
  );
}

/**
 * A failed delivery of a consumer with delayed retry: schedules the next copy and returns true (the
 * delivery then completes), or returns false for the usual redelivery: the failure is not one a
 * delay helps, the immediate retries are not spent, the last copy failed too, or the copy could not
 * be scheduled (then nothing is lost: the delivery is given back).
 */
async function delayRetry(
  context: InvocationContext,
  consumer: Consumer,
  binding: DelayedRetryBinding,
  policy: ResolvedRetryPolicy,
  delivery: Delivery,
  error: unknown,
  inbox: InboxRuntime,
  started: number,
): Promise<boolean> {
  const decision = retryDecision(policy, delivery, error, inbox.random());
  if (decision.kind === 'redeliver') return false;
  const fields = {
    consumer: consumer.name,
    messageId: bounded(delivery.messageId!),
    deliveryCount: delivery.deliveryCount,
    error: bounded(`${(error as Error).name}: ${(error as Error).message}`, 1000),
  };
  if (decision.kind === 'spent') {
    inbox.telemetry.delayedRetry(consumer.name, 'spent', decision.attempts);
    log(
      context,
      'error',
      `Delayed retries spent: the last of ${decision.attempts} copies failed too; giving it back, and Service Bus dead-letters it once its deliveries run out`,
      { ...fields, attempts: decision.attempts },
    );
    return false;
  }
  const copy = retryCopy(delivery, binding.topic, binding.subscription, decision.attempt);
  const enqueueAt = new Date(inbox.now().getTime() + Math.round(decision.delaySeconds * 1000));
  try {
    if (inbox.retryScheduler === undefined) throw new Error('the app has no retry scheduler');
    await inbox.retryScheduler.schedule(binding.topic, copy, enqueueAt);
  } catch (scheduleError) {
    inbox.telemetry.delayedRetry(consumer.name, 'failed', decision.attempt);
    log(context, 'warn', 'Could not schedule a delayed retry: giving the message back for redelivery', {
      ...fields,
      attempt: decision.attempt,
      scheduleError: bounded(`${(scheduleError as Error).name}: ${(scheduleError as Error).message}`, 300),
    });
    return false;
  }
  inbox.telemetry.delayedRetry(consumer.name, 'scheduled', decision.attempt);
  inbox.telemetry.delivery(consumer.name, 'retried', performance.now() - started, 0);
  log(
    context,
    'warn',
    `Delayed retry ${decision.attempt} of ${policy.attempts} scheduled in ${Math.round(decision.delaySeconds)} s: this delivery completes, and the copy comes back as this message`,
    {
      ...fields,
      outcome: 'retried',
      attempt: decision.attempt,
      copyMessageId: bounded(copy.messageId),
      enqueueAt: enqueueAt.toISOString(),
    },
  );
  return true;
}

/**
 * Keeps why the last delivery failed, for the dead-letter tool (packages/inbox/src/failureNote.ts). Best
 * effort: a note that cannot be written is logged, and the delivery fails as it would have.
 */
async function noteFailure(
  context: InvocationContext,
  consumer: Consumer,
  delivery: Delivery,
  error: unknown,
  inbox: InboxRuntime,
): Promise<void> {
  try {
    const note = failureNote(consumer, delivery, error, inbox);
    if (note === undefined) return;
    await inbox.container.items.upsert(note);
    log(context, 'info', 'Noted why the last delivery failed, for npm run dead-letters', {
      consumer: consumer.name,
      note: note.id,
      reason: note.reason,
    });
  } catch (noteError) {
    log(context, 'warn', 'Could not note why the last delivery failed; the dead-letter tool will not know', {
      consumer: consumer.name,
      error: bounded(`${(noteError as Error).name}: ${(noteError as Error).message}`, 300),
    });
  }
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
    // Stryker disable next-line ConditionalExpression: equivalent: every outcome logged here has its case (payload_mismatch has its own line)
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
  level: 'debug' | 'info' | 'warn' | 'error',
  message: string,
  fields: object,
): void {
  context[level](`${message} ${JSON.stringify(fields)}`);
}
