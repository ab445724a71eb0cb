import { createHmac, randomUUID } from 'node:crypto';

import {
  type Container,
  CosmosClient,
  type Database,
  type PartitionKeyDefinition,
  type UniqueKeyPolicy,
} from '@azure/cosmos';
import { type LocalCosmos, startCosmos as start } from '@idempotent-consumers/local-azure';

import { namedCosmosAccount } from './namedAccount';

/**
 * Where the conformance suite runs: the local server by default, or a real account / the emulator
 * when the shell sets COSMOS_ENDPOINT and COSMOS_KEY (./namedAccount.ts reads them). Everything is checked through @azure/cosmos (and, for
 * what the SDK refuses to send, through signed raw HTTP), never through the server's internals.
 */
export interface Target {
  readonly local: boolean;
  readonly endpoint: string;
  readonly key: string;
  readonly client: CosmosClient;
  /** The local server, for fault injection; undefined against a real account. */
  readonly server: LocalCosmos | undefined;
  /** Moves time forward: the local server's clock, or a real wait against a real account. */
  advanceSeconds(seconds: number): Promise<void>;
  /** A fresh database for one test file. */
  database(): Promise<Database>;
  container(definition?: {
    partitionKey?: PartitionKeyDefinition;
    defaultTtl?: number;
    uniqueKeyPolicy?: UniqueKeyPolicy;
  }): Promise<Container>;
  stop(): Promise<void>;
}

/**
 * The target for the test file that calls this: opened before its tests, its databases deleted and
 * its server stopped after them. The handle's fields are set once the tests run.
 */
export function useTarget(): Target {
  const target = {} as Target;
  let opened: Target | undefined;
  beforeAll(async () => {
    opened = await openTarget();
    Object.assign(target, opened);
  });
  afterEach(() => opened?.server?.faults.clear());
  afterAll(async () => {
    await opened?.stop();
  });
  return target;
}

/** Whether the suite runs against the local server; decided before any test runs. */
export const local = namedCosmosAccount === undefined;

async function openTarget(): Promise<Target> {
  let offsetMs = 0;
  const server = local ? await start({ now: () => Date.now() + offsetMs, seed: 1 }) : undefined;
  const endpoint = server?.endpoint ?? namedCosmosAccount?.endpoint ?? '';
  const key = server?.key ?? namedCosmosAccount?.key ?? '';
  const client = new CosmosClient({ endpoint, key });
  const databases: Database[] = [];
  let shared: Database | undefined;

  const target: Target = {
    local: server !== undefined,
    endpoint,
    key,
    client,
    server,
    async advanceSeconds(seconds) {
      if (server) offsetMs += seconds * 1000;
      else await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    },
    async database() {
      const { database } = await client.databases.create({ id: `conformance-${randomUUID()}` });
      databases.push(database);
      return database;
    },
    async container(definition = {}) {
      shared ??= await target.database();
      const { container } = await shared.containers.create({
        id: `c-${randomUUID()}`,
        partitionKey: definition.partitionKey ?? { paths: ['/pk'] },
        ...(definition.defaultTtl === undefined ? {} : { defaultTtl: definition.defaultTtl }),
        ...(definition.uniqueKeyPolicy === undefined ? {} : { uniqueKeyPolicy: definition.uniqueKeyPolicy }),
      });
      return container;
    },
    async stop() {
      await Promise.all(databases.map((database) => database.delete().catch(() => undefined)));
      client.dispose();
      await server?.stop();
    },
  };
  return target;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  body: unknown;
}

/**
 * A request signed exactly as the SDK signs it, for what the SDK will not send (a malformed body,
 * more than 100 batch operations, a missing header).
 */
export async function rawRequest(
  target: Pick<Target, 'endpoint' | 'key'>,
  method: string,
  path: string,
  options: {
    body?: string;
    headers?: Record<string, string>;
    /** false: send no authorization header; a path: sign for that resource instead of `path`. */
    sign?: false | { asPath: string };
  } = {},
): Promise<RawResponse> {
  const date = new Date().toUTCString();
  const signedPath = options.sign ? options.sign.asPath : path;
  const segments = signedPath.split('/').filter(Boolean).map(decodeURIComponent);
  const isFeed = segments.length % 2 === 1;
  const resourceType = segments.length === 0 ? '' : isFeed ? segments.at(-1)! : segments.at(-2)!;
  const resourceLink = (isFeed ? segments.slice(0, -1) : segments).join('/');
  const text = `${method.toLowerCase()}\n${resourceType}\n${resourceLink}\n${date.toLowerCase()}\n\n`;
  const signature = createHmac('sha256', Buffer.from(target.key, 'base64')).update(text).digest('base64');
  const response = await fetch(new URL(path, target.endpoint), {
    method,
    headers: {
      'x-ms-date': date,
      'x-ms-version': '2020-07-15',
      ...(options.sign === false
        ? {}
        : { authorization: encodeURIComponent(`type=master&ver=1.0&sig=${signature}`) }),
      ...options.headers,
    },
    ...(options.body === undefined ? {} : { body: options.body }),
  });
  const textBody = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: textBody ? (JSON.parse(textBody) as unknown) : undefined,
  };
}

/** The status the SDK reports for a failed point operation (it throws an error with `code`). */
export async function statusOf(operation: Promise<unknown>): Promise<number> {
  try {
    await operation;
    return 0;
  } catch (error) {
    return (error as { code?: number }).code ?? -1;
  }
}

/** A batch that fails as a whole throws `Batch request error`, with the HTTP error as its cause. */
export async function batchErrorStatus(operation: Promise<unknown>): Promise<number> {
  try {
    await operation;
    return 0;
  } catch (error) {
    return ((error as Error).cause as { code?: number } | undefined)?.code ?? -1;
  }
}
