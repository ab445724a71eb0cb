import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * What every local HTTP endpoint (the Cosmos DB server, the Service Bus administration endpoint,
 * the Resource Manager stand-in) does before and around its own handling of a request.
 */

export interface LocalEndpoint {
  /** How the log names it: 'the local Cosmos DB server'. */
  name: string;
  /** Writes an error answer in the endpoint's own shape (Cosmos DB's JSON, ATOM's XML, ARM's JSON). */
  refuse(response: ServerResponse, status: number, message: string): void;
}

/**
 * A request listener for a local endpoint: whatever the handler throws or rejects with becomes a
 * 500 for that request alone, logged with where it came from but nothing of the request, so that
 * no request can end the process (npm start, with the peer and the Cosmos DB server in it).
 */
export function localListener(
  endpoint: LocalEndpoint,
  handler: (request: IncomingMessage, response: ServerResponse) => void | Promise<void>,
): (request: IncomingMessage, response: ServerResponse) => void {
  return (request, response) => {
    const failed = (error: unknown): void => {
      logUnexpected(endpoint.name, error);
      if (response.headersSent) {
        response.destroy();
        return;
      }
      try {
        endpoint.refuse(response, 500, `The ${endpoint.name} failed on this request; its log says where.`);
      } catch {
        response.destroy();
      }
    };
    try {
      void handler(request, response)?.catch(failed);
    } catch (error) {
      failed(error);
    }
  };
}

/**
 * Logs an error no request should have caused: its kind and the line that threw, not its message
 * (which may quote the request).
 */
export function logUnexpected(name: string, error: unknown): void {
  const kind = error instanceof Error ? error.name : typeof error;
  const where =
    error instanceof Error ? error.stack?.split('\n').find((line) => /^\s+at /.test(line)) : undefined;
  console.error(
    `${name}: a request failed unexpectedly (${kind}${where ? `, ${where.trim()}` : ''}); answered 500.`,
  );
}

/** A value echoed in an answer, cut to `limit` characters. */
export function bounded(text: string, limit = 80): string {
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}
