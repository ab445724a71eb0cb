import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

import { createCosmosClient } from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

const stack = useLocalStack();

describe('createCosmosClient', () => {
  it('signs with the key when there is one (the local server, an emulator), naming the template in its user agent', async () => {
    const client = createCosmosClient({
      endpoint: stack.server.endpoint,
      key: stack.server.key,
      database: 'app',
      container: 'state',
      leaseContainer: 'leases',
      clientId: undefined,
      allowMultipleWriteRegions: false,
    });
    try {
      await client.database('app').container('state').item('absent', 'p').read();
    } finally {
      client.dispose();
    }

    expect(stack.server.usageByClient().map((usage) => usage.userAgent)).toContainEqual(
      expect.stringMatching(/ idempotent-servicebus-consumers$/),
    );
  });

  describe('without a key, signs in with a managed identity (DefaultAzureCredential)', () => {
    /**
     * A stand-in for the App Service managed identity endpoint (IDENTITY_ENDPOINT), which
     * DefaultAzureCredential asks for a token before the first request. One for the file: MSAL
     * keeps the endpoint it found for the process. The account endpoint refuses connections: the
     * SDK sends bearer tokens only over TLS, and only the token request matters here. Each test
     * names another account: tokens are cached for the process too.
     */
    const asked: IncomingMessage[] = [];
    const identity = createServer((request, response) => {
      asked.push(request);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({ access_token: 'token', expires_on: String(Math.floor(Date.now() / 1000) + 3600) }),
      );
    });
    const saved = { ...process.env };
    beforeAll(async () => {
      await new Promise<void>((resolve) => identity.listen(0, '127.0.0.1', resolve));
      delete process.env.AZURE_CLIENT_ID;
      process.env.IDENTITY_ENDPOINT = `http://127.0.0.1:${(identity.address() as AddressInfo).port}/token`;
      process.env.IDENTITY_HEADER = 'header';
    });
    afterAll(() => {
      process.env = saved;
      identity.close();
    });

    async function tokenRequest(clientId: string | undefined, endpoint: string): Promise<URL> {
      asked.length = 0;
      const client = createCosmosClient({
        endpoint,
        key: undefined,
        leaseContainer: 'leases',
        database: 'app',
        container: 'state',
        clientId,
        allowMultipleWriteRegions: false,
      });
      try {
        await client
          .database('app')
          .read()
          .catch(() => undefined);
      } finally {
        client.dispose();
      }
      expect(asked).toHaveLength(1);
      return new URL(asked[0]!.url!, 'http://identity');
    }

    it('as the system-assigned identity when no client id is set', async () => {
      // Another account (the token cache is the process's), so the token is asked for again.
      const url = await tokenRequest(undefined, 'https://localhost:1/');

      expect(url.searchParams.has('client_id')).toBe(false);
      expect(url.searchParams.get('resource')).toBe('https://localhost:1');
    });

    it("as the user-assigned identity AZURE_CLIENT_ID names (the app's)", async () => {
      const url = await tokenRequest('11111111-2222-3333-4444-555555555555', 'https://127.0.0.1:1/');

      expect(url.searchParams.get('client_id')).toBe('11111111-2222-3333-4444-555555555555');
      expect(url.searchParams.get('resource')).toBe('https://127.0.0.1:1');
    });
  });
});
