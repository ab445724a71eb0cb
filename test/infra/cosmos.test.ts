// Cosmos DB as deployed: a serverless account with keys off, the app's database, its container and
// the outbox relay's lease container, and the app's data role on the database only (which covers
// both); with provisioned capacity, autoscale throughput. The container's indexing policy is checked
// against the app's queries, the marker purge, read from packages/inbox/src/purge.ts, and the outbox sweeper's:
// their filter paths are indexed and nothing else is, and one composite index per query serves its
// equality and range filters together (equality first, range last).

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import {
  appPrincipal,
  at,
  describeInfra,
  only,
  type PredictedResource,
  premiumProvisionedVariant,
  resources,
  role,
  type Snapshot,
} from '@idempotent-consumers/devkit/internal/testing/bicep';

/** The purge query as packages/inbox/src/purge.ts writes it (string literals joined with +). */
function purgeQuery(): string {
  const source = readFileSync(path.join(PROJECT_ROOT, 'packages', 'inbox', 'src', 'purge.ts'), 'utf8');
  const statement = /const EXPIRED_QUERY =([^;]*);/.exec(source)?.[1] ?? '';
  return [...statement.matchAll(/'([^']*)'/g)].map((literal) => literal[1]).join('');
}

interface Filter {
  path: string;
  operator: string;
}

/**
 * The outbox sweeper's queries as packages/inbox/src/relay.ts writes them (the pending count, the oldest
 * pending time, the ones due) share one filter, PENDING_FILTER, with the outbox type inlined.
 */
function sweepQuery(name: 'PENDING_FILTER' | 'UNSENDABLE_FILTER' = 'PENDING_FILTER'): string {
  const filter = new RegExp(`const ${name} = \`([^\`]*)\`;`).exec(relaySource())?.[1] ?? '';
  const type = /export const OUTBOX_TYPE = '([^']*)';/.exec(
    readFileSync(path.join(PROJECT_ROOT, 'packages', 'inbox', 'src', 'outbox.ts'), 'utf8'),
  )?.[1];
  return `SELECT * FROM c WHERE ${filter.replace('${OUTBOX_TYPE}', String(type))}`;
}

const relaySource = (): string =>
  readFileSync(path.join(PROJECT_ROOT, 'packages', 'inbox', 'src', 'relay.ts'), 'utf8');

/** The path the sweeper's query filters on to leave out the topics that failed in its run. */
function skippedTopicPath(): string {
  const clause = /function skipTopics\([^)]*\): string \{\s*return `([^`]*)`/.exec(relaySource())?.[1] ?? '';
  const parsed = /^ AND NOT \(c\.([A-Za-z_]+) IN /.exec(clause);
  if (!parsed) throw new Error(`cannot read the sweeper's topic clause '${clause}'`);
  return `/${parsed[1]}`;
}

const CONTAINER = 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers';

/** The container of this name, of database "app". */
function containerNamed(from: Snapshot, name: string): PredictedResource | undefined {
  return resources(from, CONTAINER).find((container) => container.name.endsWith(`/app/${name}`));
}

function filters(query: string): Filter[] {
  const where = query.slice(query.indexOf(' WHERE ') + ' WHERE '.length);
  return where.split(' AND ').map((condition) => {
    // `c.type IN (@a, @b)` is an equality filter for the index, as `=` is.
    const list = /^c\.([A-Za-z_][A-Za-z0-9_]*) IN \((?:@\w+|'[^']*')(?:, (?:@\w+|'[^']*'))*\)$/.exec(
      condition.trim(),
    );
    if (list) return { path: `/${list[1]}`, operator: '=' };
    const parsed = /^c\.([A-Za-z_][A-Za-z0-9_]*) (=|<=|>=|<|>) (?:@\w+|'[^']*')$/.exec(condition.trim());
    if (!parsed) {
      throw new Error(`cannot read the purge query's condition '${condition}'`);
    }
    return { path: `/${parsed[1]}`, operator: String(parsed[2]) };
  });
}

describeInfra(
  'Cosmos DB',
  (azd) => ({
    provisioned: premiumProvisionedVariant(azd),
    leaseContainerNamed: { parameters: { ...azd(), cosmosLeaseContainerName: 'relay-leases' } },
    backup30Days: { parameters: azd({ COSMOS_BACKUP_TIER: 'Continuous30Days' }) },
  }),
  ({ defaults, evaluated }) => {
    describe('with the defaults of main.parameters.json', () => {
      it('is a serverless account with keys off and Session consistency', () => {
        const account = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts');

        expect(account.properties).toMatchObject({
          disableLocalAuth: true,
          consistencyPolicy: { defaultConsistencyLevel: 'Session' },
          capabilities: [{ name: 'EnableServerless' }],
        });
      });

      it('keeps continuous backup for 7 days (point-in-time restore, no backup charge) and one write region', () => {
        const account = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts');

        expect(account.properties).toMatchObject({
          backupPolicy: { type: 'Continuous', continuousModeProperties: { tier: 'Continuous7Days' } },
          enableMultipleWriteLocations: false,
        });
        expect(
          at(
            only(evaluated('backup30Days'), 'Microsoft.DocumentDB/databaseAccounts'),
            'properties.backupPolicy',
          ),
        ).toEqual({ type: 'Continuous', continuousModeProperties: { tier: 'Continuous30Days' } });
      });

      it('creates database "app" and container "state" on /partitionKey (Hash v2) with TTL on and no default expiry', () => {
        const database = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases');
        const container = containerNamed(defaults(), 'state');

        expect(database.name.split('/')[1]).toBe('app');
        expect(at(container, 'properties.resource.partitionKey')).toEqual({
          paths: ['/partitionKey'],
          kind: 'Hash',
          version: 2,
        });
        expect(at(container, 'properties.resource.defaultTtl')).toBe(-1);
        expect(at(container, 'properties.options')).toEqual({});
      });

      it('creates the lease container "leases" of the outbox relay next to it, partitioned on /id as the Cosmos DB trigger requires', () => {
        const leases = containerNamed(defaults(), 'leases');

        expect(
          resources(defaults(), CONTAINER)
            .map((container) => container.name.split('/').slice(1))
            .sort(),
        ).toEqual([
          ['app', 'leases'],
          ['app', 'state'],
        ]);
        expect(at(leases, 'properties.resource')).toEqual({
          id: 'leases',
          partitionKey: { paths: ['/id'], kind: 'Hash', version: 2 },
        });
        expect(at(leases, 'properties.options')).toEqual({});
      });

      it("covers the lease container with the app's one data role, scoped to the database that holds both containers", () => {
        const account = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts');
        const assignment = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments');
        const containerScopes = resources(defaults(), CONTAINER).map(
          (container) => `${account.id}/dbs/${container.name.split('/').slice(1).join('/colls/')}`,
        );

        expect(containerScopes.sort()).toEqual([
          `${account.id}/dbs/app/colls/leases`,
          `${account.id}/dbs/app/colls/state`,
        ]);
        for (const scope of containerScopes) {
          expect(scope.startsWith(`${String(at(assignment, 'properties.scope'))}/`)).toBe(true);
        }
      });

      it('names the lease container after cosmosLeaseContainerName', () => {
        expect(
          at(containerNamed(evaluated('leaseContainerNamed'), 'relay-leases'), 'properties.resource.id'),
        ).toBe('relay-leases');
        expect(containerNamed(evaluated('leaseContainerNamed'), 'leases')).toBeUndefined();
      });

      it('makes the app a Built-in Data Contributor on the database only, named guid(scope, principal, role)', () => {
        const account = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts');
        const assignment = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments');
        const scope = `${account.id}/dbs/app`;
        const definition = `${account.id}/sqlRoleDefinitions/${role.cosmosBuiltInDataContributor}`;
        const principal = String(at(assignment, 'properties.principalId'));

        expect(principal).toMatch(appPrincipal);
        expect(assignment.properties).toMatchObject({ scope, roleDefinitionId: definition });
        expect(assignment.name).toBe(
          `[format('{0}/{1}', '${account.name}', guid('${scope}', ${principal.slice(1, -1)}, '${definition}'))]`,
        );
      });
    });

    describe('with provisioned capacity', () => {
      it('drops the serverless capability and gives the container autoscale throughput', () => {
        const account = only(evaluated('provisioned'), 'Microsoft.DocumentDB/databaseAccounts');

        expect(at(account, 'properties.capabilities')).toEqual([]);
        expect(at(containerNamed(evaluated('provisioned'), 'state'), 'properties.options')).toEqual({
          autoscaleSettings: { maxThroughput: 4000 },
        });
      });

      it('gives the lease container the smallest autoscale throughput of its own (100 to 1,000 RU/s)', () => {
        expect(at(containerNamed(evaluated('provisioned'), 'leases'), 'properties.options')).toEqual({
          autoscaleSettings: { maxThroughput: 1000 },
        });
      });
    });

    describe('indexing policy', () => {
      const policy = (): unknown =>
        at(containerNamed(defaults(), 'state'), 'properties.resource.indexingPolicy');

      it('reads a purge query that filters on type (equality) and the expiry (range), with no ORDER BY', () => {
        expect(filters(purgeQuery())).toEqual([
          { path: '/type', operator: '=' },
          { path: '/expiresAtEpochSeconds', operator: '<=' },
        ]);
        expect(purgeQuery()).not.toMatch(/ORDER BY/i);
      });

      it('reads an outbox sweep that filters on type (equality) and the pending time (range)', () => {
        expect(filters(sweepQuery())).toEqual([
          { path: '/type', operator: '=' },
          { path: '/pendingSinceEpochSeconds', operator: '<=' },
        ]);
      });

      it('reads an unsendable count that filters on type (equality) and the time set aside (range)', () => {
        expect(filters(sweepQuery('UNSENDABLE_FILTER'))).toEqual([
          { path: '/type', operator: '=' },
          { path: '/unsendableSinceEpochSeconds', operator: '<=' },
        ]);
        expect(skippedTopicPath()).toBe('/topic');
      });

      it("indexes exactly the purge's and the sweeper's filter paths, excludes everything else, and has one composite index for each range", () => {
        const queries = [
          filters(purgeQuery()),
          filters(sweepQuery()),
          filters(sweepQuery('UNSENDABLE_FILTER')),
        ];
        const paths = [...new Set([...queries.flat().map((filter) => filter.path), skippedTopicPath()])];

        expect(policy()).toEqual({
          indexingMode: 'consistent',
          automatic: true,
          includedPaths: paths.map((indexed) => ({ path: `${indexed}/?` })),
          excludedPaths: [{ path: '/*' }],
          compositeIndexes: queries.map((query) =>
            [
              ...query.filter((filter) => filter.operator === '='),
              ...query.filter((filter) => filter.operator !== '='),
            ].map((filter) => ({ path: filter.path, order: 'ascending' })),
          ),
        });
      });
    });
  },
);
