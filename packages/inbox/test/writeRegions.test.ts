import { CosmosClient } from '@azure/cosmos';
import { SettingsError } from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { assertWriteRegions, writeRegionsProblem } from '../src/writeRegions';

/**
 * The multi-region write guard (issue 25) on what the real @azure/cosmos SDK reads of the account
 * (`getDatabaseAccount()`), from the local Cosmos DB server in its single- and multi-region-write
 * modes.
 */
const stack = useLocalStack();

async function accountRead(): Promise<Parameters<typeof writeRegionsProblem>[0]> {
  // A client of its own: the SDK caches the account it read first.
  const client = new CosmosClient({ endpoint: stack.server.endpoint, key: stack.server.key });
  try {
    return (await client.getDatabaseAccount()).resource!;
  } finally {
    client.dispose();
  }
}

afterEach(() => stack.server.setWriteRegions(['local']));

it('lets the app run on an account with one write region, as the Bicep deploys it', async () => {
  const account = await accountRead();

  expect(account.writableLocations.map((location) => location.name)).toEqual(['local']);
  expect(writeRegionsProblem(account, false)).toBeUndefined();
});

it('refuses an account with two write regions, naming them and the way out', async () => {
  await stack.server.setWriteRegions(['westeurope', 'northeurope']);
  const account = await accountRead();

  expect(account.enableMultipleWritableLocations).toBe(true);
  expect(writeRegionsProblem(account, false)).toBe(
    'The Cosmos DB account accepts writes in 2 regions (westeurope, northeurope): the inbox needs one write ' +
      'region to arbitrate each marker, and with several a message can be applied once in each. Turn ' +
      'multi-region writes off (infra/modules/cosmos.bicep deploys enableMultipleWriteLocations: false), or, to ' +
      'run anyway and accept duplicate effects, set INBOX_ALLOW_MULTIPLE_WRITE_REGIONS=true.',
  );
  expect(() => assertWriteRegions(account, false)).toThrow(SettingsError);
  expect(() => assertWriteRegions(account, false)).toThrow(
    /^Invalid configuration:\n {2}- The Cosmos DB account accepts writes in 2 regions \(westeurope, northeurope\)/,
  );
  expect(() => assertWriteRegions(account, true)).not.toThrow();
});

it('runs on two write regions when the operator has accepted duplicate effects', async () => {
  await stack.server.setWriteRegions(['westeurope', 'northeurope']);

  expect(writeRegionsProblem(await accountRead(), true)).toBeUndefined();
});

it('refuses an account that says it writes in several regions even when it lists one', () => {
  expect(
    writeRegionsProblem({ enableMultipleWritableLocations: true, writableLocations: [{ name: 'a' }] }, false),
  ).toContain('accepts writes in 1 regions (a)');
  expect(
    writeRegionsProblem(
      { enableMultipleWritableLocations: false, writableLocations: [{ name: 'a' }, { name: 'b' }] },
      false,
    ),
  ).toContain('accepts writes in 2 regions (a, b)');
});

it('names ten regions whole, and says how many more there are beyond ten', () => {
  const regions = (count: number): { name: string }[] =>
    Array.from({ length: count }, (_, i) => ({ name: `r${i}` }));

  expect(
    writeRegionsProblem({ enableMultipleWritableLocations: true, writableLocations: regions(10) }, false),
  ).toContain('(r0, r1, r2, r3, r4, r5, r6, r7, r8, r9): ');
  expect(
    writeRegionsProblem({ enableMultipleWritableLocations: true, writableLocations: regions(11) }, false),
  ).toContain('(r0, r1, r2, r3, r4, r5, r6, r7, r8, r9 and 1 more): ');
});

it('names at most ten regions, bounded', () => {
  const many = Array.from({ length: 12 }, (_, i) => ({ name: `region-${i}-${'x'.repeat(100)}` }));

  const problem = writeRegionsProblem(
    { enableMultipleWritableLocations: true, writableLocations: many },
    false,
  );

  expect(problem).toContain('accepts writes in 12 regions');
  expect(problem).toContain(' and 2 more):');
  expect(problem).not.toContain('region-10-');
  expect(problem!.length).toBeLessThan(1500);
});
