import { bounded } from '../localHttp';
import { badRequest, CosmosError } from './errors';
import type { FaultTarget } from './faults';
import { flag, type RequestHeaders } from './http';

/** The resource a request path names. */
export type Route =
  | { type: 'account' }
  | { type: 'offers' }
  | { type: 'offer'; id: string }
  | { type: 'databases' }
  | { type: 'database'; database: string }
  | { type: 'containers'; database: string }
  | { type: 'container'; database: string; container: string }
  | { type: 'pkranges'; database: string; container: string }
  | { type: 'items'; database: string; container: string }
  | { type: 'item'; database: string; container: string; id: string }
  | { type: 'conflicts'; database: string; container: string }
  | { type: 'partitionKeyDelete'; database: string; container: string };

/**
 * The resource a request names. The whole target is its path: Cosmos DB's REST API has no query
 * strings, and an item id may hold '?', which @azure/cosmos leaves unencoded in the path (it uses
 * encodeURI), so `.../docs/a?b` is the item `a?b`, as Azure serves it, not the item `a`.
 */
export function parseRoute(path: string): Route {
  const segments = segmentsOf(path);
  const [dbs, database, colls, container, docs, id, ...rest] = segments;
  const unknown = (): never => {
    throw new CosmosError(404, `Unknown resource path '${bounded(path)}'.`);
  };
  if (segments.length === 0) return { type: 'account' };
  if (dbs === 'offers' && segments.length === 1) return { type: 'offers' };
  if (dbs === 'offers' && database !== undefined && segments.length === 2)
    return { type: 'offer', id: database };
  if (dbs !== 'dbs' || rest.length > 0) return unknown();
  if (database === undefined) return { type: 'databases' };
  if (colls === undefined) return { type: 'database', database };
  if (colls !== 'colls') return unknown();
  if (container === undefined) return { type: 'containers', database };
  if (docs === undefined) return { type: 'container', database, container };
  if (docs === 'pkranges' && id === undefined) return { type: 'pkranges', database, container };
  if (docs === 'conflicts' && id === undefined) return { type: 'conflicts', database, container };
  if (docs === 'operations' && id === 'partitionkeydelete')
    return { type: 'partitionKeyDelete', database, container };
  if (docs !== 'docs') return unknown();
  return id === undefined
    ? { type: 'items', database, container }
    : { type: 'item', database, container, id };
}

/** The resource type and link the client signed: a feed (`.../docs`) is signed by its parent's link. */
export function signedResource(
  verb: string,
  url: string,
): { verb: string; resourceType: string; resourceLink: string } {
  const segments = segmentsOf(url);
  if (segments.length === 0) return { verb, resourceType: '', resourceLink: '' };
  // deleteAllItemsForPartitionKey posts to <container>/operations/partitionkeydelete, signed as the container.
  if (segments.length === 6 && segments[4] === 'operations')
    return { verb, resourceType: 'colls', resourceLink: segments.slice(0, 4).join('/') };
  const isFeed = segments.length % 2 === 1;
  return isFeed
    ? { verb, resourceType: segments.at(-1) as string, resourceLink: segments.slice(0, -1).join('/') }
    : { verb, resourceType: segments.at(-2) as string, resourceLink: segments.join('/') };
}

/** A path's segments, decoded; one that is not percent-encoding is a 400. */
function segmentsOf(path: string): string[] {
  return path
    .split('/')
    .filter((segment) => segment !== '')
    .map((segment) => {
      try {
        return decodeURIComponent(segment);
      } catch {
        throw badRequest(`The request path segment '${bounded(segment)}' is not valid percent-encoding.`);
      }
    });
}

/** Which kind of request a fault rule or the request counts see. */
export function faultTarget(route: Route, method: string, headers: RequestHeaders): FaultTarget {
  if (route.type === 'item') return method === 'GET' ? 'read' : 'write';
  if (route.type === 'partitionKeyDelete') return 'write';
  if (route.type !== 'items') return 'metadata';
  if (
    method === 'GET' ||
    flag(headers['x-ms-documentdb-isquery']) ||
    flag(headers['x-ms-cosmos-is-query-plan-request'])
  ) {
    return 'query';
  }
  return flag(headers['x-ms-cosmos-is-batch-request']) ? 'batch' : 'write';
}
