import { badRequest, CosmosError } from './errors';
import { groupByQueryInfo, isGroupByQuery, runGroupBy } from './groupBy';
import { type CompiledQuery, compileSql, execute } from './sqlEngine';

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
  /** How many results of a GROUP BY query earlier pages held (they are computed whole each time). */
  offset?: number;
}

/**
 * A page of GROUP BY results. Its last page carries no continuation even when exactly full: the
 * SDKs' GROUP BY stage ends its merge on the first empty page, and @azure/cosmos then never reads
 * the end of the range (its iterator reports more results forever).
 */
function pageOf(
  results: unknown[],
  maxItemCount: number | undefined,
  continuation?: ContinuationToken,
): QueryPage {
  const offset = continuation?.offset ?? 0;
  const end = maxItemCount === undefined ? results.length : offset + maxItemCount;
  const next = end < results.length ? JSON.stringify({ token: '', offset: end }) : undefined;
  return { documents: results.slice(offset, end), ...(next === undefined ? {} : { continuation: next }) };
}

export function runQuery(
  items: readonly unknown[],
  spec: QuerySpec,
  page: { maxItemCount?: number; continuation?: string },
): QueryPage {
  const continuation = page.continuation === undefined ? undefined : parseContinuation(page.continuation);
  if (continuation?.drained === true) return { documents: [] };
  if (isGroupByQuery(spec.query)) {
    return pageOf(
      runGroupBy(spec.query, items as object[], spec.parameters ?? []),
      page.maxItemCount,
      continuation,
    );
  }
  const compiled = compile(spec.query);
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
 * through: no client-side ORDER BY, TOP, aggregates or DISTINCT, one range covering all keys. The
 * exception is GROUP BY, whose plan is Azure's (groupBy.ts): the SDKs then send the rewritten
 * query and merge the groups themselves. A query the server cannot compile is refused here, with
 * the reason, as it would be when run.
 */
export function queryPlan(spec: QuerySpec): Record<string, unknown> {
  const groupBy = isGroupByQuery(spec.query) ? groupByQueryInfo(spec.query) : undefined;
  if (groupBy === undefined) compile(spec.query);
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
      ...groupBy,
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

/**
 * Query features Cosmos DB has and the server does not, named in the refusal (a GROUP BY at the
 * top level is served by groupBy.ts; the engine knows none).
 */
const UNSUPPORTED: readonly [RegExp, string][] = [[/\bGROUP\s+BY\b/i, 'GROUP BY below the top level']];

function compile(text: string): CompiledQuery {
  const outsideStrings = text.replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, "''");
  for (const [pattern, feature] of UNSUPPORTED) {
    if (pattern.test(outsideStrings))
      throw badRequest(
        `The local server does not support ${feature} in queries (see packages/local-azure/README.md).`,
      );
  }
  return compileSql(text);
}

/**
 * Refuses a query the gateway would not run across partitions as it is, as Azure does: a 400 whose
 * `additionalErrorInfo` holds the query plan, on which the SDKs switch to the plan and send its
 * rewritten query to each partition key range. Only GROUP BY needs that here: the server answers
 * the other queries whole from its one range.
 */
export function assertServableAcrossPartitions(spec: QuerySpec): void {
  if (!isGroupByQuery(spec.query)) return;
  throw new CosmosError(
    400,
    'The provided cross partition query can not be directly served by the gateway. This is a first chance (internal) exception that all newer clients will know how to handle gracefully. This exception is traced, but unless you see it bubble up as an exception (which only happens on older SDK clients), then you can safely ignore this message.',
    undefined,
    JSON.stringify(queryPlan(spec)),
  );
}
