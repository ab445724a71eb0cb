import { ToolError } from '../../cli/errors';

/** A request the console refuses, with its HTTP status and a message for the page. */
export class ConsoleError extends ToolError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ConsoleError';
  }
}

/**
 * What to do about a read or an action that Azure refused, naming the role that allows it (the
 * console signs in as the developer, with the roles the developer has); undefined for any other
 * error. Cosmos DB answers 403 without a data-plane role; Service Bus refuses a link with
 * UnauthorizedAccess (a ServiceBusError; UnauthorizedError underneath) and an administration read
 * with HTTP 401 (a RestError).
 */
export function explainRefusal(error: unknown, what: string): string | undefined {
  const { code, statusCode, name } = (error ?? {}) as {
    code?: unknown;
    statusCode?: unknown;
    name?: unknown;
  };
  if (code === 403 || (name !== 'RestError' && statusCode === 403)) {
    return (
      `Cosmos DB refused to let your identity read ${what}: it needs a data-plane role on the account, ` +
      'Cosmos DB Built-in Data Reader to look, or Cosmos DB Built-in Data Contributor (docs/console.md says how to assign it).'
    );
  }
  if (
    code === 'UnauthorizedAccess' ||
    code === 'UnauthorizedError' ||
    (name === 'RestError' && statusCode === 401)
  ) {
    return (
      `Service Bus refused to let your identity read ${what}: peeking needs Azure Service Bus Data Receiver on the ` +
      'namespace, resubmitting also Azure Service Bus Data Sender, and the exact message counts Azure Service Bus Data ' +
      'Owner (docs/console.md says how to assign them).'
    );
  }
  return undefined;
}
