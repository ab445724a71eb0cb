import { createHmac } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';

import { CosmosClient } from '@azure/cosmos';
import { ServiceBusAdministrationClient } from '@azure/service-bus';

import { type LocalCosmos, start as startCosmos } from '../src/cosmos';
import { LOCAL_NAMESPACE_RESOURCE_ID } from '../src/servicebus/administration/resourceManager';
import { type LocalServiceBus, start as startPeer } from '../src/servicebus/amqp';
import { PEER_TOPOLOGY, TOPIC } from '../src/testing/peer';
import { rawRequest } from './support/conformanceTarget';

/**
 * Every local HTTP endpoint (the Cosmos DB server, the Service Bus administration endpoint, the
 * Resource Manager stand-in) over the wire, with requests no SDK sends: each gets a 4xx with a
 * bounded body, and the server answers a good request afterwards.
 */
interface Answer {
  status: number;
  body: string;
}

interface Call {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | string;
}

/** One request with exactly the path and headers given (Node's client sets Host unless told). */
function call(
  endpoint: URL,
  { method = 'GET', path, headers = {}, body }: Call,
  ca?: string,
): Promise<Answer> {
  const send = endpoint.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const outgoing = send(
      {
        host: endpoint.hostname,
        port: endpoint.port,
        method,
        path,
        headers,
        // The peer's certificate, for 127.0.0.1 whatever name Host gives.
        ...(ca === undefined ? {} : { ca, checkServerIdentity: () => undefined }),
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

/** Bytes written as they are (a request-target no client library would send), and the status line back. */
function rawStatus(endpoint: URL, text: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(Number(endpoint.port), endpoint.hostname, () => socket.write(text));
    let received = '';
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(received.split('\r\n')[0] ?? ''));
  });
}

/** The names every local endpoint answers to (packages/local-azure/src/localHttp.ts), as a Host header spells them. */
const LOOPBACK = ['localhost', '127.0.0.1', '[::1]'];

/** Over this, a body echoes more than a name or a message needs. */
const BOUND = 2_000;

describe('the Resource Manager stand-in', () => {
  let peer: LocalServiceBus;
  let endpoint: URL;
  const namespace = LOCAL_NAMESPACE_RESOURCE_ID;
  beforeEach(async () => {
    peer = await startPeer({ port: 0, topology: PEER_TOPOLOGY });
    endpoint = new URL(peer.resourceManager.endpoint);
  });
  afterEach(async () => {
    await peer.stop();
  });

  const stillServing = async (): Promise<void> => {
    const good = await call(endpoint, { path: `${namespace}/topics/${TOPIC}?api-version=2021-11-01` });
    expect(good.status).toBe(200);
  };

  it('answers a path that is not percent-encoding with 400, and serves on', async () => {
    const topic = await call(endpoint, { path: `${namespace}/topics/%E0%A4?api-version=1` });
    const subscription = await call(endpoint, {
      path: `${namespace}/topics/${TOPIC}/subscriptions/%ZZ?api-version=1`,
    });

    expect([topic.status, subscription.status]).toEqual([400, 400]);
    expect(JSON.parse(topic.body)).toMatchObject({ error: { code: 'BadRequest' } });
    await stillServing();
  });

  it('answers a request-target that is no URL with 400, and serves on', async () => {
    const status = await rawStatus(
      endpoint,
      'GET http://[ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    );

    expect(status).toMatch(/^HTTP\/1\.1 400/);
    await stillServing();
  });

  it('refuses a Host that is not a loopback name with 421, and answers under each loopback name', async () => {
    const path = `${namespace}/topics/${TOPIC}?api-version=2021-11-01`;
    const foreign = await call(endpoint, { path, headers: { host: `rebound.example:${endpoint.port}` } });
    const loopback = await Promise.all(
      LOOPBACK.map((name) => call(endpoint, { path, headers: { host: `${name}:${endpoint.port}` } })),
    );

    expect(foreign.status).toBe(421);
    expect(JSON.parse(foreign.body)).toMatchObject({ error: { code: 'MisdirectedRequest' } });
    expect(loopback.map((answer) => answer.status)).toEqual([200, 200, 200]);
  });

  it('echoes a long unknown name bounded', async () => {
    const name = 'n'.repeat(8_000);
    const answer = await call(endpoint, { path: `${namespace}/topics/${name}?api-version=1` });

    expect(answer.status).toBe(404);
    expect(answer.body.length).toBeLessThan(BOUND);
    await stillServing();
  });
});

describe('the Service Bus administration endpoint', () => {
  let peer: LocalServiceBus;
  let endpoint: URL;
  beforeEach(async () => {
    peer = await startPeer({ port: 0, topology: PEER_TOPOLOGY });
    endpoint = new URL(`https://${peer.host}:${peer.port}/`);
  });
  afterEach(async () => {
    await peer.stop();
  });

  const stillServing = async (): Promise<void> => {
    const admin = new ServiceBusAdministrationClient(peer.connectionString, peer.administrationClientOptions);
    expect(await admin.topicExists(TOPIC)).toBe(true);
  };

  it('answers a request-target that is no URL with 400, and serves on', async () => {
    const answer = await call(endpoint, { path: 'http://[/x' }, peer.certificate).catch((error: Error) => ({
      status: 0,
      body: error.message,
    }));

    expect(answer.status).toBe(400);
    await stillServing();
  });

  /** A shared access signature for the whole namespace, as the emulator's key signs it. */
  const signed = (): Record<string, string> => {
    const resource = encodeURIComponent(endpoint.href.toLowerCase());
    const expiry = Math.round(Date.now() / 1000) + 300;
    const signature = encodeURIComponent(
      createHmac('sha256', 'SAS_KEY_VALUE').update(`${resource}\n${expiry}`).digest('base64'),
    );
    return {
      authorization: `SharedAccessSignature sig=${signature}&se=${expiry}&skn=RootManageSharedAccessKey&sr=${resource}`,
    };
  };

  it('refuses a Host that is not a loopback name with 421, and answers under each loopback name', async () => {
    const path = `/${TOPIC}?api-version=2021-05`;
    const at = (host: string): Promise<Answer> =>
      call(endpoint, { path, headers: { ...signed(), host: `${host}:${endpoint.port}` } }, peer.certificate);
    const foreign = await at('rebound.example');
    const loopback = await Promise.all(LOOPBACK.map(at));

    expect(foreign.status).toBe(421);
    expect(foreign.body).toMatch(/^<Error><Code>421<\/Code>/);
    expect(loopback.map((answer) => answer.status)).toEqual([200, 200, 200]);
  });

  it('answers a path that is not percent-encoding with 400, and serves on', async () => {
    const answer = await call(
      endpoint,
      { path: '/%E0%A4?api-version=2021-05', headers: signed() },
      peer.certificate,
    );

    expect(answer.status).toBe(400);
    await stillServing();
  });
});

describe('the local Cosmos DB server', () => {
  let server: LocalCosmos;
  let endpoint: URL;
  beforeEach(async () => {
    server = await startCosmos({ port: 0 });
    endpoint = new URL(server.endpoint);
  });
  afterEach(async () => {
    await server.stop();
  });

  const stillServing = async (): Promise<void> => {
    const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
    const { resources } = await client.databases.readAll().fetchAll();
    expect(resources).toEqual([]);
  };

  it('refuses a Host that is not a loopback name with 421, and answers under each loopback name', async () => {
    // The list of databases, signed as the SDK signs it (fetch would not send another Host).
    const date = new Date().toUTCString();
    const signature = createHmac('sha256', Buffer.from(server.key, 'base64'))
      .update(`get\ndbs\n\n${date.toLowerCase()}\n\n`)
      .digest('base64');
    const headers = {
      'x-ms-date': date,
      authorization: encodeURIComponent(`type=master&ver=1.0&sig=${signature}`),
    };
    const at = (host: string): Promise<Answer> =>
      call(endpoint, { path: '/dbs', headers: { ...headers, host: `${host}:${endpoint.port}` } });
    const foreign = await at('rebound.example');
    const loopback = await Promise.all(LOOPBACK.map(at));

    expect(foreign.status).toBe(421);
    expect(JSON.parse(foreign.body)).toMatchObject({ code: 'MisdirectedRequest' });
    expect(loopback.map((answer) => answer.status)).toEqual([200, 200, 200]);
  });

  it('answers a path that is not percent-encoding with 400, and serves on', async () => {
    const answer = await call(endpoint, { path: '/dbs/%E0%A4' });

    expect(answer.status).toBe(400);
    expect(answer.body.length).toBeLessThan(BOUND);
    await stillServing();
  });

  it('echoes a long path bounded in its 404', async () => {
    const answer = await call(endpoint, {
      path: `/dbs/db/${'x'.repeat(8_000)}`,
      headers: { authorization: 'type=master&ver=1.0&sig=AAAA', 'x-ms-date': new Date().toUTCString() },
    });

    expect(answer.status).toBe(404);
    expect(answer.body.length).toBeLessThan(BOUND);
    await stillServing();
  });

  it('echoes a long partition key header bounded in its 400', async () => {
    const client = new CosmosClient({ endpoint: server.endpoint, key: server.key });
    const { database } = await client.databases.create({ id: 'db' });
    await database.containers.create({ id: 'c', partitionKey: { paths: ['/pk'] } });

    const answer = await rawRequest(server, 'GET', '/dbs/db/colls/c/docs/x', {
      headers: { 'x-ms-documentdb-partitionkey': `[${'"p'.repeat(4_000)}` },
    });

    expect(answer.status).toBe(400);
    expect(JSON.stringify(answer.body).length).toBeLessThan(BOUND);
  });

  it('answers a body over the request limit with 413, and serves on', async () => {
    const answer = await call(endpoint, {
      method: 'POST',
      path: '/dbs',
      headers: { 'content-type': 'application/json' },
      body: Buffer.alloc(17 * 1024 * 1024, 0x20),
    }).catch((error: NodeJS.ErrnoException) => ({ status: 0, body: String(error.code) }));

    expect(answer.status).toBe(413);
    await stillServing();
  });
});
