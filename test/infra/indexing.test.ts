// The indexing policy of the Cosmos DB container against the app's only query, the marker purge,
// read from src/inbox/purge.ts: its filter paths are indexed and nothing else is, and a composite
// index serves its equality and range filters together (equality first, range last).

import { readFileSync } from 'node:fs';
import path from 'node:path';

import {
  at,
  azdEnvironment,
  azdParameters,
  describeWithBicep,
  evaluateVariants,
  locateBicep,
  only,
  repoRoot,
} from './bicep';

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

const bicep = locateBicep();

describeWithBicep(bicep)('the Cosmos DB indexing policy', () => {
  const { evaluated } = evaluateVariants(bicep, (template) => ({
    defaults: { parameters: azdParameters(template, azdEnvironment) },
  }));
  const policy = (): unknown =>
    at(
      only(evaluated('defaults'), 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers'),
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
