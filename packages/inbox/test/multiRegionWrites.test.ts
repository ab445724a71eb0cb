import { type Container, CosmosClient } from '@azure/cosmos';
import { processDelivery, type ProcessResult } from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { delivery, dependencies, testConsumer, type TestMessage } from '../src/testing';

/**
 * Why the app refuses an account with several write regions (issue 25; the guard is
 * packages/inbox/src/writeRegions.ts, checked at start in src/app.ts): the local Cosmos DB server's
 * multi-region-write mode, through the real SDK, each client writing in the region it prefers as
 * an app deployed in that region would. Each region arbitrates its own 409s, so a message
 * delivered once to each region is applied in both, and last-writer-wins replication then keeps
 * one version of each document: one application of the same message is counted twice, and
 * another message's effect can vanish while its marker stays.
 */
const stack = useLocalStack();
const clients: CosmosClient[] = [];

/** The app's container, written in `region` (the SDK's preferred location). */
function containerIn(region: string): Container {
  const client = new CosmosClient({
    endpoint: stack.server.endpoint,
    key: stack.server.key,
    connectionPolicy: { preferredLocations: [region] },
  });
  clients.push(client);
  return client.database('app').container('state');
}

afterEach(async () => {
  for (const client of clients.splice(0)) client.dispose();
  await stack.server.setWriteRegions(['local']);
});

/** Adds the message's amount to the account's balance: one document, patched. */
const consumer = testConsumer((message, tx) =>
  tx.patch('balance', [{ op: 'incr', path: '/amount', value: message.amount }]),
);

async function apply(container: Container, messageId: string, message: TestMessage): Promise<ProcessResult> {
  return processDelivery(consumer, delivery(message, { messageId }), dependencies(container));
}

async function balance(container: Container, accountId: string): Promise<number | undefined> {
  const { resource } = await container.item('balance', `account:${accountId}`).read<{ amount: number }>();
  return resource?.amount;
}

async function openAccount(accountId: string): Promise<void> {
  await stack.container.items.create({ id: 'balance', partitionKey: `account:${accountId}`, amount: 100 });
}

it('with one write region, a message delivered twice is applied once', async () => {
  await openAccount('one-region');
  const message = { accountId: 'one-region', amount: 5 };

  const first = await apply(stack.container, 'payment-1', message);
  const second = await apply(stack.container, 'payment-1', message);

  expect([first.outcome, second.outcome]).toEqual(['processed', 'duplicate']);
  expect(await balance(stack.container, 'one-region')).toBe(105);
});

it('with two write regions, a message delivered once to each region is applied in both', async () => {
  await openAccount('two-regions');
  await stack.server.setWriteRegions(['westeurope', 'northeurope']);
  const west = containerIn('westeurope');
  const north = containerIn('northeurope');
  const message = { accountId: 'two-regions', amount: 5 };

  // A redelivery (an expired lock, say) reaches an instance that writes in the other region before
  // the first region's batch has replicated there: neither region sees the other's marker.
  const inWest = await apply(west, 'payment-2', message);
  const inNorth = await apply(north, 'payment-2', message);

  expect([inWest.outcome, inNorth.outcome]).toEqual(['processed', 'processed']);
  expect([await balance(west, 'two-regions'), await balance(north, 'two-regions')]).toEqual([105, 105]);
  // Replication finds the marker and the balance written in both regions, and keeps one of each.
  expect(stack.server.replicate()).toBe(2);
  expect(await balance(west, 'two-regions')).toBe(105);
  expect(await balance(north, 'two-regions')).toBe(105);
  // From now on both regions see the marker: a third delivery is a duplicate in either.
  expect((await apply(north, 'payment-2', message)).outcome).toBe('duplicate');
});

it('with two write regions, two messages applied in different regions keep both markers and lose an effect', async () => {
  await openAccount('lost-update');
  await stack.server.setWriteRegions(['westeurope', 'northeurope']);
  const west = containerIn('westeurope');
  const north = containerIn('northeurope');

  await apply(west, 'payment-3', { accountId: 'lost-update', amount: 5 });
  await apply(north, 'payment-4', { accountId: 'lost-update', amount: 7 });
  stack.server.replicate();

  // 100 + 5 + 7 with one write region; last-writer-wins keeps one region's balance instead.
  const after = await balance(west, 'lost-update');
  expect(after).not.toBe(112);
  expect([105, 107]).toContain(after);
  expect(await balance(north, 'lost-update')).toBe(after);
  // Both markers replicated, so neither message is ever applied again: the lost effect stays lost.
  expect((await apply(west, 'payment-3', { accountId: 'lost-update', amount: 5 })).outcome).toBe('duplicate');
  expect((await apply(west, 'payment-4', { accountId: 'lost-update', amount: 7 })).outcome).toBe('duplicate');
});

it('replicates a write made in one region to the other, and a delete over a concurrent write', async () => {
  await stack.server.setWriteRegions(['westeurope', 'northeurope']);
  const west = containerIn('westeurope');
  const north = containerIn('northeurope');
  await west.items.create({ id: 'note', partitionKey: 'replication', text: 'west' });

  expect((await north.item('note', 'replication').read()).statusCode).toBe(404);
  expect(stack.server.replicate()).toBe(0);
  expect((await north.item('note', 'replication').read()).resource).toMatchObject({ text: 'west' });

  await west.item('note', 'replication').delete();
  await north.item('note', 'replication').replace({ id: 'note', partitionKey: 'replication', text: 'north' });
  expect(stack.server.replicate()).toBe(1);
  expect((await west.item('note', 'replication').read()).statusCode).toBe(404);
  expect((await north.item('note', 'replication').read()).statusCode).toBe(404);
});
