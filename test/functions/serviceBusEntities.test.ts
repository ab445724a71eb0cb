import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import {
  deployedEntitiesReader,
  EntitiesUnreadable,
  RESOURCE_MANAGER_API_VERSION,
} from '../../src/serviceBusEntities';

/**
 * How the drift guard's reader (src/serviceBusEntities.ts) talks to Azure Resource Manager, against
 * a stand-in that answers what a test tells it: the request it sends, and each way a read fails,
 * which the app takes as "cannot verify", never as drift.
 */
const NAMESPACE = '/subscriptions/1/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/sb-app01';
let server: Server;
let endpoint: string;
let answer: (path: string) => { status: number; body: string } = () => ({ status: 200, body: '{}' });
const requested: { url: string; authorization: string | undefined }[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    requested.push({ url: request.url ?? '', authorization: request.headers.authorization });
    const { status, body } = answer(request.url ?? '');
    response.writeHead(status, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
afterEach(() => requested.splice(0));

function reader(resourceManagerEndpoint = endpoint) {
  return deployedEntitiesReader(
    {
      resourceId: NAMESPACE,
      resourceManagerEndpoint,
      duplicateWindowSeconds: 3600,
      connectionString: undefined,
      fullyQualifiedNamespace: undefined,
    },
    undefined,
  )!;
}

it('does not read anything without SERVICEBUS_RESOURCE_ID', () => {
  expect(
    deployedEntitiesReader(
      {
        resourceId: undefined,
        resourceManagerEndpoint: endpoint,
        duplicateWindowSeconds: 3600,
        connectionString: undefined,
        fullyQualifiedNamespace: undefined,
      },
      undefined,
    ),
  ).toBeUndefined();
});

it('reads each topic once and each subscription, with the API version, and no token on loopback http', async () => {
  answer = (path) => ({ status: 200, body: JSON.stringify({ properties: { path } }) });

  const deployed = await reader()([
    { topic: 'orders', subscription: 'a.b' },
    { topic: 'orders', subscription: 'c d' },
  ]);

  expect(requested.map((r) => r.url).sort()).toEqual(
    [
      `${NAMESPACE}/topics/orders?api-version=${RESOURCE_MANAGER_API_VERSION}`,
      `${NAMESPACE}/topics/orders/subscriptions/a.b?api-version=${RESOURCE_MANAGER_API_VERSION}`,
      `${NAMESPACE}/topics/orders/subscriptions/c%20d?api-version=${RESOURCE_MANAGER_API_VERSION}`,
    ].sort(),
  );
  expect(requested.every((r) => r.authorization === undefined)).toBe(true);
  expect(deployed.topics).toEqual([
    {
      topic: 'orders',
      properties: { path: `${NAMESPACE}/topics/orders?api-version=${RESOURCE_MANAGER_API_VERSION}` },
    },
  ]);
  expect(deployed.subscriptions.map((s) => s.subscription)).toEqual(['a.b', 'c d']);
});

it('says which role is missing on 403, and gives the status of any other failure', async () => {
  answer = () => ({ status: 403, body: '{"error":{"code":"AuthorizationFailed"}}' });
  await expect(reader()([{ topic: 't', subscription: 's' }])).rejects.toThrow(
    /: 403: the app's identity needs the Reader role on the topic \(infra\/modules\/servicebus\.bicep assigns it\)$/,
  );
  answer = () => ({ status: 404, body: '{}' });
  await expect(reader()([{ topic: 't', subscription: 's' }])).rejects.toMatchObject({
    name: 'EntitiesUnreadable',
    status: 404,
  });
  answer = () => ({ status: 200, body: '{"id":"x"}' });
  await expect(reader()([{ topic: 't', subscription: 's' }])).rejects.toThrow(
    /no properties in the response$/,
  );
  answer = () => ({ status: 200, body: JSON.stringify({ properties: { big: 'x'.repeat(300_000) } }) });
  await expect(reader()([{ topic: 't', subscription: 's' }])).rejects.toThrow(/response over 262144 bytes$/);
});

it('names a connection that fails by its code', async () => {
  // A port that was just free: nothing listens there.
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const failure = reader(`http://127.0.0.1:${port}/`)([{ topic: 't', subscription: 's' }]);

  await expect(failure).rejects.toBeInstanceOf(EntitiesUnreadable);
  await expect(failure).rejects.toThrow(/^topics\/t(\/subscriptions\/s)?: TypeError \(ECONNREFUSED\)$/);
});
