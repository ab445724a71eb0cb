import createQuery, { SyntaxError as QuerySyntaxError } from '@zeit/cosmosdb-query';

import { badRequest } from './errors';

/**
 * The SQL engine is @zeit/cosmosdb-query (it compiles a query to JavaScript). Compiled queries are
 * cached because the same few query texts (and patch conditions) arrive on every request.
 */
type CompiledQuery = ReturnType<typeof createQuery>;
const cache = new Map<string, CompiledQuery>();
const CACHE_SIZE = 500;

export interface QueryParameter {
  name: string;
  value: unknown;
}

export interface QuerySpec {
  query: string;
  parameters?: QueryParameter[];
}

export interface QueryPage {
  documents: unknown[];
  /** Opaque text for `x-ms-continuation`; absent on the last page. */
  continuation?: string;
}

export function parseQuerySpec(body: unknown): QuerySpec {
  const spec = (body ?? {}) as Partial<QuerySpec>;
  if (typeof spec.query !== 'string' || spec.query.trim() === '') {
    throw badRequest('The query body must be an object with a non-empty "query" string.');
  }
  if (spec.parameters !== undefined && !Array.isArray(spec.parameters)) {
    throw badRequest('The query "parameters" must be an array of { name, value }.');
  }
  for (const parameter of spec.parameters ?? []) {
    if (typeof parameter?.name !== 'string' || !parameter.name.startsWith('@')) {
      throw badRequest(`Query parameter names must start with '@'; got ${JSON.stringify(parameter?.name)}.`);
    }
  }
  return spec as QuerySpec;
}

/**
 * The continuation a full page ends with when nothing follows it. Cosmos DB stops a page when it
 * holds maxItemCount results, without looking further, so a page that is exactly full carries a
 * continuation and the next one comes back empty (Microsoft's query tests count that page). The
 * engine only hands out a continuation when more results exist, so this token stands for "past the
 * last result": it answers an empty page with no continuation.
 */
const DRAINED = { token: '', drained: true } as const;

interface ContinuationToken {
  token: string;
  drained?: boolean;
}

export function runQuery(
  items: readonly unknown[],
  spec: QuerySpec,
  page: { maxItemCount?: number; continuation?: string },
): QueryPage {
  const compiled = compile(spec.query);
  const continuation = page.continuation === undefined ? undefined : parseContinuation(page.continuation);
  if (continuation?.drained === true) return { documents: [] };
  const result = execute(
    () =>
      compiled.exec(items as object[], {
        parameters: (spec.parameters ?? []).map(({ name, value }) => ({ name, value })),
        ...(page.maxItemCount === undefined ? {} : { maxItemCount: page.maxItemCount }),
        ...(continuation === undefined ? {} : { continuation }),
      }) as { result: unknown[]; continuation: unknown },
  );
  const full = page.maxItemCount !== undefined && result.result.length === page.maxItemCount;
  const next = result.continuation ? result.continuation : full ? DRAINED : undefined;
  return {
    documents: result.result,
    ...(next === undefined ? {} : { continuation: JSON.stringify(next) }),
  };
}

function parseContinuation(text: string): ContinuationToken {
  // Azure's words (Microsoft's tests match on the first part); the token itself is not echoed
  // (it is the client's, of any length).
  const malformed = badRequest(
    'Invalid Continuation Token: The continuation token specified in the request is malformed. Re-run the query without it and iterate.',
  );
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw malformed;
  }
  if (typeof (parsed as { token?: unknown } | null)?.token !== 'string') throw malformed;
  return parsed as ContinuationToken;
}

/**
 * The query plan the gateway answers a query-plan request with (the .NET SDK asks for one before
 * every query; @azure/cosmos asks too, and uses it only when a query sent directly is refused).
 * The server has one partition key range and runs every query whole on it, so the plan is a pass
 * through: no client-side ORDER BY, TOP, aggregates or DISTINCT, one range covering all keys. A
 * query the server cannot compile is refused here, with the reason, as it would be when run.
 */
export function queryPlan(spec: QuerySpec): Record<string, unknown> {
  compile(spec.query);
  return {
    partitionedQueryExecutionInfoVersion: 2,
    queryInfo: {
      distinctType: 'None',
      top: null,
      offset: null,
      limit: null,
      orderBy: [],
      orderByExpressions: [],
      groupByExpressions: [],
      groupByAliases: [],
      aggregates: [],
      groupByAliasToAggregateType: {},
      rewrittenQuery: '',
      hasSelectValue: false,
      dCountInfo: null,
      hasNonStreamingOrderBy: false,
    },
    queryRanges: [{ min: '', max: 'FF', isMinInclusive: true, isMaxInclusive: false }],
  };
}

/** True when `from c where <predicate>` holds for the document (the patch condition form). */
export function conditionHolds(document: unknown, condition: string): boolean {
  if (!/^\s*from\s/i.test(condition)) {
    throw badRequest(`A patch condition must have the form "from c where ..."; got '${condition}'.`);
  }
  // Conditions embed their numbers (`c.stock >= 3`); compiling each variant costs milliseconds, so
  // the numbers become parameters and one compiled query serves every variant.
  const { text, parameters } = liftNumbers(`SELECT VALUE 1 ${condition}`);
  const compiled = compile(text);
  const { result } = execute(
    () => compiled.exec([document as object], { parameters }) as { result: unknown[] },
  );
  return result.length > 0;
}

const LITERALS =
  /("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?<![\w$@.[])(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w.])/g;

function liftNumbers(query: string): { text: string; parameters: QueryParameter[] } {
  const parameters: QueryParameter[] = [];
  const text = query.replace(LITERALS, (match, quoted: string | undefined, number: string | undefined) => {
    if (quoted !== undefined || number === undefined) return match;
    const name = `@__literal${parameters.length}`;
    parameters.push({ name, value: Number(number) });
    return name;
  });
  return { text, parameters };
}

/** Query features Cosmos DB has and the server does not, named in the refusal. */
const UNSUPPORTED: readonly [RegExp, string][] = [[/\bGROUP\s+BY\b/i, 'GROUP BY']];

function compile(text: string): CompiledQuery {
  let compiled = cache.get(text);
  if (compiled === undefined) {
    const outsideStrings = text.replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, "''");
    for (const [pattern, feature] of UNSUPPORTED) {
      if (pattern.test(outsideStrings))
        throw badRequest(`The local server does not support ${feature} in queries (see local/README.md).`);
    }
    try {
      compiled = createQuery(text);
      void compiled.code; // compile now, so syntax and semantic errors surface here
    } catch (error) {
      throw badRequest(`Syntax error in query '${text}': ${(error as Error).message}`);
    }
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    cache.set(text, compiled);
  }
  return compiled;
}

function execute<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof QuerySyntaxError) throw badRequest(`Syntax error: ${error.message}`);
    throw badRequest(`The query could not be executed: ${(error as Error).message}`);
  }
}
