/**
 * The library's testing entry (`@idempotent-consumers/inbox/testing`): what tests of consumers and
 * of the library itself build on. A delivery with defaults, the process's dependencies on a
 * container, a consumer defined in the test, every document of a partition, and what a delivery
 * ended in. It imports zod (an optional peer dependency: a consumer's app has it).
 *
 * Proving a consumer exactly-once under faults (`npm run verify`) is the dev kit's `verifyConsumers`
 * (`@idempotent-consumers/devkit`), not this entry's: it runs on local Azure, which the library,
 * deployed with the app, does not depend on.
 *
 * @packageDocumentation
 */
import type { Container } from '@azure/cosmos';
import { z } from 'zod';

import type { InboxConsumer } from './consumer';
import type { Delivery } from './delivery';
import { PoisonMessageError, TransientStoreError } from './errors';
import type { ProcessDependencies, ProcessResult } from './process';

/** The outbox settings the relay and sweeper tests run with: the app's defaults (packages/inbox/src/settings.ts). */
export const OUTBOX_SETTINGS = {
  outbox: {
    sweepAgeSeconds: 300,
    sweepIntervalSeconds: 60,
    sweepMaxItems: 500,
    dispatchedRetentionSeconds: 86_400,
  },
};

/** A consumer defined in the test, outside src/topology.json: the same shape defineInboxConsumer returns. */
export function testConsumer(
  handle: InboxConsumer<TestMessage>['handle'],
  overrides: Partial<InboxConsumer<TestMessage>> = {},
): InboxConsumer<TestMessage> {
  return {
    kind: 'inbox',
    name: 'test.consumer',
    schema: TestMessage,
    partitionKey: (message) => `account:${message.accountId}`,
    handle,
    ...overrides,
  };
}

export const TestMessage = z.object({ accountId: z.string().min(1), amount: z.number() });
export type TestMessage = z.infer<typeof TestMessage>;

export function dependencies(
  container: Container,
  overrides: Partial<ProcessDependencies> = {},
): ProcessDependencies {
  return {
    container,
    settings: { inbox: { retentionSeconds: 30 * 86_400, ttlBackstopSeconds: 7 * 86_400, maxAttempts: 5 } },
    now: () => new Date(),
    sleep: () => Promise.resolve(),
    random: () => 0.5,
    ...overrides,
  };
}

export function delivery(body: unknown, overrides: Partial<Delivery> = {}): Delivery {
  return {
    body,
    messageId: 'message-1',
    messageIdIsLossy: false,
    deliveryCount: 1,
    enqueuedTimeUtc: new Date(),
    subject: 'Test',
    correlationId: undefined,
    applicationProperties: {},
    ...overrides,
  };
}

/** Every document in a logical partition, markers included. */
export async function documentsIn(
  container: Container,
  partitionKey: string,
): Promise<Record<string, unknown>[]> {
  const { resources } = await container.items
    .query<Record<string, unknown>>('SELECT * FROM c', { partitionKey })
    .fetchAll();
  return resources;
}

/** What a delivery ended in: its outcome, or the error's kind with its reason or status. */
export async function ending(work: Promise<ProcessResult>): Promise<string> {
  try {
    return (await work).outcome;
  } catch (error) {
    if (error instanceof PoisonMessageError) return `poison ${error.reason}`;
    if (error instanceof TransientStoreError) return `transient ${error.statusCode ?? 'no status'}`;
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
}
