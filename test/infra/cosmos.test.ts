// Cosmos DB as deployed: a serverless account with keys off, the app's database and container, and
// the app's data role on the database only; with provisioned capacity, autoscale throughput. The
// container's indexing policy is checked against the app's only query, the marker purge, read from
// src/inbox/purge.ts: its filter paths are indexed and nothing else is, and a composite index serves
// its equality and range filters together (equality first, range last).

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { appPrincipal, at, describeInfra, only, premiumProvisionedVariant, repoRoot, role } from './bicep';

/** The purge query as src/inbox/purge.ts writes it (string literals joined with +). */
function purgeQuery(): string {
  const source = readFileSync(path.join(repoRoot, 'src', 'inbox', 'purge.ts'), 'utf8');
  const statement = /const EXPIRED_QUERY =([^;]*);/.exec(source)?.[1] ?? '';
  return [...statement.matchAll(/'([^']*)'/g)].map((literal) => literal[1]).join('');
}

interface Filter {
  path: string;
  operator: string;
}

function filters(query: string): Filter[] {
  const where = query.slice(query.indexOf(' WHERE ') + ' WHERE '.length);
  return where.split(' AND ').map((condition) => {
    const parsed = /^c\.([A-Za-z_][A-Za-z0-9_]*) (=|<=|>=|<|>) @\w+$/.exec(condition.trim());
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

      it('creates database "app" and container "state" on /partitionKey (Hash v2) with TTL on and no default expiry', () => {
        const database = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases');
        const container = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers');

        expect(database.name.split('/')[1]).toBe('app');
        expect(container.name.split('/').slice(1)).toEqual(['app', 'state']);
        expect(at(container, 'properties.resource.partitionKey')).toEqual({
          paths: ['/partitionKey'],
          kind: 'Hash',
          version: 2,
        });
        expect(at(container, 'properties.resource.defaultTtl')).toBe(-1);
        expect(at(container, 'properties.options')).toEqual({});
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
        const container = only(
          evaluated('provisioned'),
          'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers',
        );

        expect(at(account, 'properties.capabilities')).toEqual([]);
        expect(at(container, 'properties.options')).toEqual({ autoscaleSettings: { maxThroughput: 4000 } });
      });
    });

    describe('indexing policy', () => {
      const policy = (): unknown =>
        at(
          only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers'),
          'properties.resource.indexingPolicy',
        );

      it('reads a purge query that filters on type (equality) and the expiry (range), with no ORDER BY', () => {
        expect(filters(purgeQuery())).toEqual([
          { path: '/type', operator: '=' },
          { path: '/expiresAtEpochSeconds', operator: '<=' },
        ]);
        expect(purgeQuery()).not.toMatch(/ORDER BY/i);
      });

      it("indexes exactly the purge query's filter paths, excludes everything else, and has one composite index for it", () => {
        const purge = filters(purgeQuery());
        const equalities = purge.filter((filter) => filter.operator === '=');
        const ranges = purge.filter((filter) => filter.operator !== '=');

        expect(policy()).toEqual({
          indexingMode: 'consistent',
          automatic: true,
          includedPaths: purge.map((filter) => ({ path: `${filter.path}/?` })),
          excludedPaths: [{ path: '/*' }],
          compositeIndexes: [
            [...equalities, ...ranges].map((filter) => ({ path: filter.path, order: 'ascending' })),
          ],
        });
      });
    });
  },
);
