import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * What every local HTTP endpoint (the Cosmos DB server, the Service Bus administration endpoint,
 * the Resource Manager stand-in) does before and around its own handling of a request.
 */

/**
 * The names a local server answers to: the loopback names. The SDKs and the .NET clients send the
 * endpoint's own name in Host (127.0.0.1, as npm start prints it, or localhost when configured so),
 * and packages/inbox/src/settings.ts takes the same three as local. A DNS-rebinding page reaches 127.0.0.1
 * under a name of its own, which Host carries: refused. `*.localhost` is left out: no client here
 * sends it.
 */
export const LOOPBACK_NAMES: readonly string[] = ['localhost', '127.0.0.1', '[::1]'];

/** Interfaces that are no name: a server listening on one answers to the loopback names only. */
const WILDCARDS = new Set(['0.0.0.0', '::']);

/** `name[:port]` or `[v6][:port]`, as a Host header carries it. */
const HOST_HEADER = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/;

/**
 * Whether a request's Host header names this server: a loopback name or, for a server told to
 * listen on another name (`--host`, the one way to be reached under another name), that name; with
 * `port`, on that port. A missing Host is refused too: every client sends one.
 */
export function answersTo(
  host: string | undefined,
  options: { listenHost?: string; port?: number } = {},
): boolean {
  const parsed = host === undefined ? null : HOST_HEADER.exec(host.toLowerCase());
  if (!parsed) return false;
  const [, name = '', port] = parsed;
  if (options.port !== undefined && Number(port) !== options.port) return false;
  const listening = options.listenHost?.toLowerCase();
  const own = listening === undefined || WILDCARDS.has(listening) ? [] : [listening, `[${listening}]`];
  return LOOPBACK_NAMES.includes(name) || own.includes(name);
}

export interface LocalEndpoint {
  /** How the log names it: 'the local Cosmos DB server'. */
  name: string;
  /** The interface it listens on (see answersTo). */
  listenHost: string;
  /** Writes an error answer in the endpoint's own shape (Cosmos DB's JSON, ATOM's XML, ARM's JSON). */
  refuse(response: ServerResponse, status: number, message: string): void;
}

/**
 * A request listener for a local endpoint: a Host it does not answer to gets 421 (Misdirected
 * Request), and whatever the handler throws or rejects with becomes a 500 for that request alone,
 * logged with where it came from but nothing of the request, so that no request can end the
 * process (npm start, with the peer and the Cosmos DB server in it).
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
    if (!answersTo(request.headers.host, { listenHost: endpoint.listenHost })) {
      endpoint.refuse(
        response,
        421,
        `The ${endpoint.name} answers only under its own names (${LOOPBACK_NAMES.join(', ')}), not the one Host gives.`,
      );
      return;
    }
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
