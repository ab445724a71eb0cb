import { availableParallelism } from 'node:os';

import type { ServiceBusClient, ServiceBusReceivedMessage, ServiceBusReceiver } from '@azure/service-bus';

import { timeSpanSeconds } from '../durations';
import {
  invokeServiceBus,
  loggedField,
  loggedOutcome,
  type LogLine,
  type ServiceBusDelivery,
  type ServiceBusFunction,
} from './worker';

/**
 * The Functions host's Service Bus triggers, run over AMQP with the real `@azure/service-bus`
 * receiver, as `npm start` needs them: per function, one peek-lock receiver on its subscription,
 * at most `maxConcurrentCalls` invocations at once, each lock renewed while it runs (up to
 * `maxAutoLockRenewalDuration`), the message completed when the function returns (if
 * `autoCompleteMessages`) and abandoned when it throws or outlasts `functionTimeout` (whatever
 * `autoCompleteMessages` says, as the extension's processor does). Each invocation goes through
 * the worker path (packages/local-azure/src/host/worker.ts). `prefetchCount` adds receiver credit: up to that
 * many more messages wait locked for a free slot, as a prefetch buffer does (here their locks are
 * renewed from receipt; the extension's prefetched messages are not renewed until they run).
 *
 * The host model in packages/local-azure/src/host/brokerHost.ts does the same on a model clock, with faults, for the
 * demo and the scenario tests; this one runs in real time against the local peer, or any namespace
 * the client reaches.
 */
export interface TriggerSettings {
  maxConcurrentCalls: number;
  prefetchCount: number;
  autoCompleteMessages: boolean;
  maxAutoLockRenewalMs: number;
  functionTimeoutMs: number;
}

/** host.json's settings, with the Service Bus extension's defaults for what it leaves out. */
export function triggerSettings(hostJson: unknown): TriggerSettings {
  const json = (hostJson ?? {}) as {
    functionTimeout?: unknown;
    extensions?: { serviceBus?: Record<string, unknown> };
  };
  const serviceBus = json.extensions?.serviceBus ?? {};
  const count = (name: string, fallback: number, min: number): number => {
    const value = serviceBus[name] ?? fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
      throw new Error(`host.json extensions.serviceBus.${name} must be a whole number from ${min}.`);
    }
    return value;
  };
  const span = (path: string, value: unknown, fallback: string): number => {
    const seconds = timeSpanSeconds(typeof value === 'string' ? value : fallback);
    if (seconds === undefined) throw new Error(`host.json ${path} must be a time span (hh:mm:ss).`);
    return seconds * 1000;
  };
  const autoComplete = serviceBus.autoCompleteMessages ?? true;
  if (typeof autoComplete !== 'boolean') {
    throw new Error('host.json extensions.serviceBus.autoCompleteMessages must be true or false.');
  }
  return {
    // The extension's default is 16 per processor.
    maxConcurrentCalls: count('maxConcurrentCalls', 16 * availableParallelism(), 1),
    prefetchCount: count('prefetchCount', 0, 0),
    autoCompleteMessages: autoComplete,
    maxAutoLockRenewalMs: span(
      'extensions.serviceBus.maxAutoLockRenewalDuration',
      serviceBus.maxAutoLockRenewalDuration,
      '00:05:00',
    ),
    functionTimeoutMs: span('functionTimeout', json.functionTimeout, '00:30:00'),
  };
}

export type Settlement =
  | 'completed'
  | 'abandoned'
  | 'left-locked'
  | 'lock-lost'
  | 'timed-out'
  /** The broker did not take the settlement (the link was lost, for one): the lock runs out. */
  | 'settle-failed';

/** One delivery, as `npm start` prints it. */
export interface TriggerDelivery {
  function: string;
  messageId: string | undefined;
  /** 1 on the first delivery, as the trigger's DeliveryCount. */
  deliveryCount: number;
  sequenceNumber: number;
  /** What the consumer logged (`processed`, `duplicate`, `poison`, ...), when it logged one. */
  outcome: string | undefined;
  /** The handler's alternative effect, for the outcome `alternative`. */
  alternative?: string;
  /** A duplicate's cause, as the consumer logged it (packages/inbox/src/duplicateCause.ts). */
  cause?: string;
  subject?: string;
  /** The body as the host hands it to the worker: for the console, which shows it only on request. */
  body?: Buffer | string;
  settlement: Settlement;
  error?: Error;
  handlerMs: number;
  /** The trace the delivery ran in (its invocation's trace context): an `operation_Id` in Application Insights. */
  traceId?: string;
  /** The invocation's log lines, when it returned. */
  logs?: readonly LogLine[];
}

export class ServiceBusTriggers {
  private readonly receivers: ServiceBusReceiver[] = [];
  private readonly subscriptions: { close(): Promise<void> }[] = [];
  private readonly running = new Set<Promise<void>>();
  private stopping = false;

  constructor(
    private readonly client: ServiceBusClient,
    private readonly functions: readonly ServiceBusFunction[],
    private readonly settings: TriggerSettings,
    private readonly report: (delivery: TriggerDelivery) => void,
    private readonly onError: (functionName: string, error: Error) => void,
  ) {}

  start(): void {
    for (const registration of this.functions) {
      const { topicName, subscriptionName } = registration;
      if (topicName === undefined || subscriptionName === undefined) {
        throw new Error(`Function "${registration.name}" reads a queue; the local stack has topics only.`);
      }
      const receiver = this.client.createReceiver(topicName, subscriptionName, {
        receiveMode: 'peekLock',
        maxAutoLockRenewalDurationInMs: this.settings.maxAutoLockRenewalMs,
        // The host hands the worker the body's bytes, not the SDK's JSON decoding of them.
        skipParsingBodyAsJson: true,
      });
      this.receivers.push(receiver);
      const slots = new Slots(this.settings.maxConcurrentCalls);
      this.subscriptions.push(
        receiver.subscribe(
          {
            processMessage: async (message) => {
              // Tracked from receipt, so that stop() waits for a prefetched message too.
              const delivered = (async () => {
                await slots.acquire();
                try {
                  // Stopping: a message still waiting for a slot goes back untouched.
                  if (this.stopping) await receiver.abandonMessage(message).catch(() => undefined);
                  else await this.deliver(receiver, registration.name, message);
                } finally {
                  slots.release();
                }
              })();
              this.running.add(delivered);
              await delivered.finally(() => this.running.delete(delivered));
            },
            processError: ({ error }) => {
              if (!this.stopping) this.onError(registration.name, error);
              return Promise.resolve();
            },
          } satisfies Parameters<ServiceBusReceiver['subscribe']>[0],
          {
            autoCompleteMessages: false,
            maxConcurrentCalls: this.settings.maxConcurrentCalls + this.settings.prefetchCount,
          },
        ),
      );
    }
  }

  /** Stops receiving, waits for the invocations running, and closes the receivers. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.subscriptions.map((subscription) => subscription.close()));
    await Promise.allSettled([...this.running]);
    await Promise.all(this.receivers.map((receiver) => receiver.close()));
  }

  private async deliver(
    receiver: ServiceBusReceiver,
    name: string,
    message: ServiceBusReceivedMessage,
  ): Promise<void> {
    const started = performance.now();
    const received = toDelivery(message);
    const invocation = invokeServiceBus(name, received);
    const result = await withTimeout(invocation, this.settings.functionTimeoutMs);
    const handlerMs = performance.now() - started;
    const delivery = {
      function: name,
      messageId: message.messageId === undefined ? undefined : String(message.messageId),
      deliveryCount: (message.deliveryCount ?? 0) + 1,
      sequenceNumber: Number(message.sequenceNumber ?? 0),
      ...(message.subject === undefined ? {} : { subject: message.subject }),
      body: received.body,
      handlerMs,
      ...(result !== 'timed-out' && result.traceId !== undefined ? { traceId: result.traceId } : {}),
    };
    if (result === 'timed-out') {
      // Given up, still running (in Azure the host would restart the worker): stop() waits for it.
      const orphan = invocation.then(() => undefined);
      this.running.add(orphan);
      void orphan.finally(() => this.running.delete(orphan));
      const settled = await settle(() => receiver.abandonMessage(message), 'timed-out');
      this.report({ ...delivery, outcome: undefined, settlement: settled });
      return;
    }
    const outcome = loggedOutcome(result.logs);
    const alternative = loggedField(result.logs, 'alternative');
    const cause = loggedField(result.logs, 'cause');
    if (result.error !== undefined) {
      const settled = await settle(() => receiver.abandonMessage(message), 'abandoned');
      this.report({ ...delivery, outcome, settlement: settled, error: result.error });
      return;
    }
    if (!this.settings.autoCompleteMessages) {
      this.report({ ...delivery, outcome, settlement: 'left-locked' });
      return;
    }
    this.report({
      ...delivery,
      outcome,
      ...(alternative === undefined ? {} : { alternative }),
      ...(cause === undefined ? {} : { cause }),
      settlement: await settle(() => receiver.completeMessage(message), 'completed'),
      logs: result.logs,
    });
  }
}

/** What the host's binding data says about a received message (packages/local-azure/src/host/toRpcServiceBus.ts builds the rest). */
function toDelivery(message: ServiceBusReceivedMessage): ServiceBusDelivery {
  const body = message.body as unknown;
  const optional = <K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> =>
    value === undefined || value === null ? {} : ({ [key]: value } as Record<K, V>);
  return {
    // A data section arrives as bytes (skipParsingBodyAsJson); anything else as the SDK decoded it.
    body: Buffer.isBuffer(body) ? body : typeof body === 'string' ? body : JSON.stringify(body ?? null),
    deliveryCount: (message.deliveryCount ?? 0) + 1,
    ...optional('messageId', message.messageId === undefined ? undefined : String(message.messageId)),
    ...optional('subject', message.subject),
    ...optional(
      'correlationId',
      message.correlationId === undefined ? undefined : String(message.correlationId),
    ),
    ...optional('contentType', message.contentType),
    ...optional(
      'applicationProperties',
      message.applicationProperties as ServiceBusDelivery['applicationProperties'],
    ),
    ...optional('enqueuedTimeUtc', message.enqueuedTimeUtc),
    ...optional('expiresAtUtc', message.expiresAtUtc),
    ...optional('sequenceNumber', message.sequenceNumber?.toNumber()),
    ...optional('lockToken', message.lockToken),
  };
}

/**
 * Settles, noting a lock that was lost meanwhile (the broker owns the message again) or a
 * settlement that failed: either way the message comes back when its lock runs out.
 */
async function settle<S extends Settlement>(
  action: () => Promise<void>,
  done: S,
): Promise<S | 'lock-lost' | 'settle-failed'> {
  try {
    await action();
    return done;
  } catch (error) {
    return (error as { code?: string }).code === 'MessageLockLost' ? 'lock-lost' : 'settle-failed';
  }
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T | 'timed-out'> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timed-out'>((resolve) => {
    timer = setTimeout(() => resolve('timed-out'), ms);
  });
  return Promise.race([work, timedOut]).finally(() => clearTimeout(timer));
}

/** A counting semaphore: at most `size` holders. */
class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    this.free = size;
  }

  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}
