import createQuery, { SyntaxError as QuerySyntaxError } from '@zeit/cosmosdb-query';

import { badRequest } from './errors';

/**
 * The SQL engine is @zeit/cosmosdb-query (it compiles a query to JavaScript). Compiled queries are
 * cached because the same few query texts (and patch conditions) arrive on every request.
 */
export type CompiledQuery = ReturnType<typeof createQuery>;
const cache = new Map<string, CompiledQuery>();
const CACHE_SIZE = 500;

export interface EngineParameter {
  name: string;
  value: unknown;
}

export function compileSql(text: string): CompiledQuery {
  let compiled = cache.get(text);
  if (compiled === undefined) {
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

export function execute<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof QuerySyntaxError) throw badRequest(`Syntax error: ${error.message}`);
    throw badRequest(`The query could not be executed: ${(error as Error).message}`);
  }
}

/** Every result of a query over `items`, in one go (no paging). */
export function evaluate(
  text: string,
  items: readonly object[],
  parameters: readonly EngineParameter[],
): unknown[] {
  const compiled = compileSql(text);
  return execute(
    () => compiled.exec(items as object[], { parameters: [...parameters] }) as { result: unknown[] },
  ).result;
}
