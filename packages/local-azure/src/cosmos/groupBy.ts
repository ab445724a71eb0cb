import { badRequest } from './errors';
import { compileSql, type EngineParameter, evaluate } from './sqlEngine';
import {
  type AggregateCall,
  aggregateCallAt,
  type AggregateFunction,
  depthsOf,
  endsWord,
  findWord,
  firstAggregateCall,
  splitTopLevel,
  startsWord,
  topLevelKeywords,
} from './sqlText';

/**
 * GROUP BY, as Azure serves it to the SDKs. A cross-partition GROUP BY query sent as it is gets a
 * 400 carrying the query plan (query.ts); the plan holds a rewritten query that returns, per group,
 * `{ groupByItems: [{ item: key }...], payload: { alias: value | { item: partial aggregate } } }`,
 * which the SDK sends to each partition key range and merges client-side
 * (@azure/cosmos's GroupByEndpointComponent, the .NET SDK's GroupByQueryPipelineStage). A query
 * scoped to one partition key runs here whole and returns the final groups.
 *
 * Both shapes run through one executor: rows are grouped by their key values, each aggregate call
 * is computed by the engine over the group's rows, and the select list is then evaluated with the
 * keys and aggregates as parameters, so it can only see what the group defines. Served: one
 * container alias in FROM, WHERE, GROUP BY over any expressions, COUNT/SUM/MIN/MAX/AVG as whole
 * select items or inside the rewritten payload, `SELECT VALUE` of a key or one aggregate.
 */

/** The aggregate operators the query plan names (QueryInfo.aggregates, groupByAliasToAggregateType). */
const OPERATOR: Record<AggregateFunction, string> = {
  COUNT: 'Count',
  SUM: 'Sum',
  MIN: 'Min',
  MAX: 'Max',
  AVG: 'Average',
};

interface SelectItem {
  expression: string;
  alias: string;
  /** Set when the whole item is one aggregate call. */
  aggregate?: AggregateCall;
}

interface GroupByQuery {
  selectValue: boolean;
  items: SelectItem[];
  from: string;
  alias: string;
  where?: string;
  keys: string[];
}

const CLAUSES = ['SELECT', 'FROM', 'WHERE', 'GROUP BY', 'ORDER BY', 'OFFSET', 'LIMIT'] as const;

/** True when the query groups at its top level. */
export function isGroupByQuery(text: string): boolean {
  return topLevelKeywords(text, ['GROUP BY']).length > 0;
}

const unsupported = (what: string): Error =>
  badRequest(`The local server does not support ${what} (see packages/local-azure/README.md).`);

function parse(text: string): GroupByQuery {
  const clauses = topLevelKeywords(text, CLAUSES);
  const [first] = clauses;
  if (first?.keyword !== 'SELECT' || text.slice(0, first.start).trim() !== '') {
    throw badRequest(`Syntax error in query '${text}': a query must start with SELECT.`);
  }
  const body = new Map<string, string>();
  clauses.forEach((clause, index) => {
    if (body.has(clause.keyword))
      throw badRequest(`Syntax error in query '${text}': ${clause.keyword} appears twice.`);
    body.set(clause.keyword, text.slice(clause.end, clauses[index + 1]?.start ?? text.length).trim());
  });
  for (const clause of ['ORDER BY', 'OFFSET', 'LIMIT']) {
    if (body.has(clause)) throw unsupported(`${clause} together with GROUP BY`);
  }
  let select = body.get('SELECT') ?? '';
  for (const modifier of ['TOP', 'DISTINCT']) {
    if (new RegExp(`^${modifier}\\b`, 'i').test(select))
      throw unsupported(`${modifier} together with GROUP BY`);
  }
  const selectValue = /^VALUE\b/i.test(select);
  if (selectValue) select = select.slice('VALUE'.length).trim();
  if (select === '*') throw badRequest("'SELECT *' is not valid with GROUP BY.");
  const from = body.get('FROM');
  const source = from?.match(/^([A-Za-z_]\w*)(?:\s+(?:AS\s+)?([A-Za-z_]\w*))?$/i);
  if (from === undefined || !source || /^(JOIN|IN)$/i.test(source[2] ?? '')) {
    throw unsupported('GROUP BY over anything but one container alias (no JOIN, IN or subquery in FROM)');
  }
  const keys = splitTopLevel(body.get('GROUP BY') ?? '');
  if (keys.some((key) => key === ''))
    throw badRequest(`Syntax error in query '${text}': an empty GROUP BY expression.`);
  const where = body.get('WHERE');
  return {
    selectValue,
    items: selectValue ? [valueItem(select)] : selectItems(select),
    from,
    alias: source[2] ?? (source[1] as string),
    ...(where === undefined ? {} : { where }),
    keys,
  };
}

const OPERATOR_WORDS = /\b(AND|OR|NOT|IN|BETWEEN|LIKE|ESCAPE|VALUE)$/i;
const PROPERTY_PATH = /^[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*|\s*\[\s*(?:"[^"]*"|'[^']*')\s*\])+$/;
const LAST_PROPERTY = /(?:\.\s*([A-Za-z_]\w*)|\[\s*(?:"([^"]*)"|'([^']*)')\s*\])$/;

/** The select list's items with the names Cosmos DB gives them: the alias, the property, or $1, $2... */
function selectItems(select: string): SelectItem[] {
  let unnamed = 0;
  return splitTopLevel(select).map((text) => {
    const named = text.match(/^(.*\S)\s+AS\s+([A-Za-z_]\w*)$/is) ?? implicitAlias(text);
    const expression = named ? (named[1] as string).trim() : text;
    const property = PROPERTY_PATH.test(expression) ? expression.match(LAST_PROPERTY) : null;
    const alias =
      named?.[2] ?? (property ? (property[1] ?? property[2] ?? property[3]) : undefined) ?? `$${++unnamed}`;
    if (expression === '') throw badRequest('Syntax error: an empty item in the select list.');
    const call = wholeAggregate(expression);
    return { expression, alias, ...(call ? { aggregate: call } : {}) };
  });
}

/** `COUNT(1) n`: an alias without AS, when what precedes it can end an expression. */
function implicitAlias(text: string): RegExpMatchArray | null {
  const match = text.match(/^(.*[\w)\]}'"])\s+([A-Za-z_]\w*)$/s);
  return match && !OPERATOR_WORDS.test(match[1] as string) ? match : null;
}

function valueItem(expression: string): SelectItem {
  const call = wholeAggregate(expression);
  return { expression, alias: '', ...(call ? { aggregate: call } : {}) };
}

function wholeAggregate(expression: string): AggregateCall | undefined {
  const call = aggregateCallAt(expression, depthsOf(expression), 0);
  return call?.end === expression.length ? call : undefined;
}

/** What the gateway's query plan says about a GROUP BY query (QueryInfo), with its rewritten query. */
export function groupByQueryInfo(text: string): Record<string, unknown> {
  const query = parse(text);
  prepare(query); // refuses here what would be refused when run
  for (const item of query.items) {
    if (item.aggregate === undefined && firstAggregateCall(item.expression) !== undefined) {
      throw unsupported(`an aggregate inside a select list expression with GROUP BY ('${item.expression}')`);
    }
  }
  const groupByItems = `[${query.keys.map((key) => `{"item": ${key}}`).join(', ')}]`;
  const [valueItem] = query.items;
  const payload = query.selectValue
    ? valueItem?.aggregate
      ? `[${partialAggregate(valueItem.aggregate)}]`
      : (valueItem?.expression as string)
    : `{${query.items
        .map(
          (item) =>
            `${JSON.stringify(item.alias)}: ${item.aggregate ? partialAggregate(item.aggregate) : item.expression}`,
        )
        .join(', ')}}`;
  const rewrittenQuery =
    `SELECT ${groupByItems} AS groupByItems, ${payload} AS payload\nFROM ${query.from}` +
    `${query.where === undefined ? '' : `\nWHERE ${query.where}`}\nGROUP BY ${query.keys.join(', ')}`;
  return {
    groupByExpressions: query.keys,
    groupByAliases: query.selectValue ? [] : query.items.map((item) => item.alias),
    aggregates: query.selectValue && valueItem?.aggregate ? [OPERATOR[valueItem.aggregate.fn]] : [],
    groupByAliasToAggregateType: query.selectValue
      ? {}
      : Object.fromEntries(
          query.items.map((item) => [item.alias, item.aggregate ? OPERATOR[item.aggregate.fn] : null]),
        ),
    rewrittenQuery,
    hasSelectValue: query.selectValue,
  };
}

/**
 * A partition's part of an aggregate, in the shape the SDKs merge: a count or sum as it is, an
 * average as its sum and count, a MIN/MAX with the count that tells "no values" from a value.
 */
function partialAggregate({ fn, argument }: AggregateCall): string {
  switch (fn) {
    case 'COUNT':
    case 'SUM':
      return `{"item": ${fn}(${argument})}`;
    case 'AVG':
      return `{"item": {"sum": SUM(${argument}), "count": COUNT(${argument})}}`;
    case 'MIN':
    case 'MAX': {
      const field = fn.toLowerCase();
      return `{"item": ${fn}(${argument}), "item2": {"${field}": ${fn}(${argument}), "count": COUNT(${argument})}}`;
    }
  }
}

interface Prepared {
  /** Each row as `{ keys: [{ item }...], row }`, after WHERE. */
  rows: string;
  /** Every aggregate of the select list over one group's rows, as `{ a0, a1... }`. */
  aggregates?: string;
  /** The select list with keys and aggregates as parameters. */
  projection: string;
  items: SelectItem[];
  selectValue: boolean;
}

function prepare(query: GroupByQuery): Prepared {
  const keysByLength = query.keys
    .map((key, index) => ({ key, index }))
    .sort((a, b) => b.key.length - a.key.length);
  const calls: AggregateCall[] = [];
  const bound = query.items.map((item) => bindGroup(item.expression, keysByLength, calls));
  for (const text of bound) {
    const at = findWord(text, query.alias);
    if (at !== -1) {
      const reference = text.slice(at).match(/^[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*|\s*\[[^\]]*\])*/)?.[0];
      throw badRequest(
        `Property reference '${reference}' is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause.`,
      );
    }
  }
  for (const call of calls) {
    if (firstAggregateCall(call.argument) !== undefined) {
      throw badRequest(
        `Cannot perform an aggregate function on an expression containing an aggregate: '${call.fn}(${call.argument})'.`,
      );
    }
  }
  const keyItems = query.keys.map((key) => `{"item": ${key}}`).join(', ');
  const prepared: Prepared = {
    rows: `SELECT VALUE {"keys": [${keyItems}], "row": ${query.alias}} FROM ${query.from}${query.where === undefined ? '' : ` WHERE ${query.where}`}`,
    ...(calls.length === 0
      ? {}
      : {
          aggregates: `SELECT ${calls.map((call, i) => `${call.fn}(${call.argument}) AS a${i}`).join(', ')} FROM ${query.from}`,
        }),
    projection: query.selectValue
      ? `SELECT VALUE ${bound[0] as string}`
      : `SELECT VALUE {${bound.map((text, i) => `"i${i}": ${text}`).join(', ')}}`,
    items: query.items,
    selectValue: query.selectValue,
  };
  // Compile now, so a query the engine cannot run is refused before any row is read.
  for (const derived of [prepared.rows, prepared.aggregates, prepared.projection]) {
    if (derived !== undefined) compileSql(derived);
  }
  return prepared;
}

/**
 * The expression with each aggregate call replaced by `@__aggN` (collected in `calls`) and each
 * GROUP BY expression by `@__keyN`: what is left may only combine those and constants.
 */
function bindGroup(text: string, keys: { key: string; index: number }[], calls: AggregateCall[]): string {
  const depths = depthsOf(text);
  let bound = '';
  let i = 0;
  next: while (i < text.length) {
    if (depths[i] !== -1) {
      const call = aggregateCallAt(text, depths, i);
      if (call !== undefined) {
        bound += `@__agg${calls.push(call) - 1}`;
        i = call.end;
        continue;
      }
      if (startsWord(text, i)) {
        for (const { key, index } of keys) {
          if (text.startsWith(key, i) && (endsWord(text, i + key.length) || !/\w$/.test(key))) {
            bound += `@__key${index}`;
            i += key.length;
            continue next;
          }
        }
      }
    }
    bound += text[i];
    i++;
  }
  return bound;
}

/** The results of a GROUP BY query over `items`: one per group (none for an empty SELECT VALUE). */
export function runGroupBy(
  text: string,
  items: readonly object[],
  parameters: readonly EngineParameter[],
): unknown[] {
  const prepared = prepare(parse(text));
  const groups = new Map<string, { keys: unknown[]; rows: object[] }>();
  for (const entry of evaluate(prepared.rows, items, parameters) as {
    keys: { item?: unknown }[];
    row: object;
  }[]) {
    // Undefined and null are different keys: {} and {"item":null}.
    const id = JSON.stringify(entry.keys);
    let group = groups.get(id);
    if (group === undefined) {
      group = { keys: entry.keys.map((key) => key.item), rows: [] };
      groups.set(id, group);
    }
    group.rows.push(entry.row);
  }
  const results: unknown[] = [];
  for (const { keys, rows } of groups.values()) {
    const [aggregates] =
      prepared.aggregates === undefined
        ? [{}]
        : (evaluate(prepared.aggregates, rows, parameters) as Record<string, unknown>[]);
    const bound: EngineParameter[] = [
      ...parameters,
      ...keys.map((value, i) => ({ name: `@__key${i}`, value })),
      ...Object.keys(aggregates ?? {}).map((name) => ({
        name: `@__agg${name.slice(1)}`,
        value: aggregates?.[name],
      })),
    ];
    const [value] = evaluate(prepared.projection, [], bound);
    if (prepared.selectValue) {
      if (value !== undefined) results.push(value);
      continue;
    }
    const columns = (value ?? {}) as Record<string, unknown>;
    results.push(
      Object.fromEntries(
        prepared.items.flatMap((item, i) => (`i${i}` in columns ? [[item.alias, columns[`i${i}`]]] : [])),
      ),
    );
  }
  return results;
}
