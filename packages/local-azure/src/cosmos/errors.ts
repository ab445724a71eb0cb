import { bounded } from '../localHttp';

/**
 * Errors the local server answers with. Cosmos DB returns `{ code, message }` where `code` is the
 * status name and `message` starts with `Message: {"Errors":[...]}`; the SDK copies the body onto the
 * error it throws, so tests and callers see the same shape they would see against Azure.
 */
export const StatusName = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  408: 'RequestTimeout',
  409: 'Conflict',
  412: 'PreconditionFailed',
  413: 'RequestEntityTooLarge',
  /** Not Cosmos DB's: the local server's answer to a Host that is not its own (localHttp.ts). */
  421: 'MisdirectedRequest',
  424: 'FailedDependency',
  429: 'TooManyRequests',
  500: 'InternalServerError',
  503: 'ServiceUnavailable',
} as const;

export type ErrorStatus = keyof typeof StatusName;

export class CosmosError extends Error {
  constructor(
    readonly status: ErrorStatus,
    message: string,
    readonly substatus?: number,
    /** Sent as `additionalErrorInfo` (a query the gateway will not run directly: its query plan). */
    readonly additionalErrorInfo?: string,
  ) {
    super(message);
    this.name = 'CosmosError';
  }
}

export const badRequest = (message: string, substatus?: number): CosmosError =>
  new CosmosError(400, message, substatus);
export const notFound = (
  message = 'Resource Not Found. Learn more: https://aka.ms/cosmosdb-tsg-not-found',
): CosmosError => new CosmosError(404, message);
export const conflict = (
  message = 'Entity with the specified id already exists in the system.',
): CosmosError => new CosmosError(409, message);
export const preconditionFailed = (
  message = 'Operation cannot be performed because one of the specified precondition is not met.',
): CosmosError => new CosmosError(412, message);

export interface ErrorBody {
  code: string;
  message: string;
  additionalErrorInfo?: string;
}

/** How much of a message, and of the request's path, an error body echoes. */
const MAX_MESSAGE = 1_000;
const MAX_URI = 200;

export function errorBody(error: CosmosError, activityId: string, requestUri: string): ErrorBody {
  return {
    code: StatusName[error.status],
    message:
      `Message: ${JSON.stringify({ Errors: [bounded(error.message, MAX_MESSAGE)] })}\r\n` +
      `ActivityId: ${activityId}, Request URI: ${bounded(requestUri, MAX_URI)}, RequestStats: , SDK: local-cosmos-server`,
    ...(error.additionalErrorInfo === undefined ? {} : { additionalErrorInfo: error.additionalErrorInfo }),
  };
}
