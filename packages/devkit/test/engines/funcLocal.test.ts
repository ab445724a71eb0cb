import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { appTopology } from '@idempotent-consumers/devkit';
import { buildHarness, DOTNET, warnWhenSkipped } from '@idempotent-consumers/engines';
import { loadSettings } from '@idempotent-consumers/inbox/internal';
import { DEFAULT_KEY } from '@idempotent-consumers/local-azure';

import { PROJECT_ROOT } from '../../src/cli/project';
import { COSMOS_EXTENSION_CONNECTION_MODE, type LocalSettingsFile } from '../../src/emulators/localSettings';
import { StartedApp, userEnvironment } from '../../src/testing/npmStart';

const topology = appTopology();

/**
 * `npm run func:local`, as Azure Functions Core Tools' host would use it: the servers it starts and
 * the local.settings.json it writes, read by the .NET clients the host's Service Bus and Cosmos DB
 * extensions run (the harnesses of packages/engines, given the file itself), and the storage Azurite
 * serves for AzureWebJobsStorage. Core Tools itself is not run here (see README "Run it under the
 * real Functions host").
 */
const run = promisify(execFile);
warnWhenSkipped(
  'packages/devkit/test/engines/funcLocal.test.ts',
  'check npm run func:local with the .NET clients',
);

/** Azurite's well-known development account (public; `UseDevelopmentStorage=true` means it). */
const DEV_ACCOUNT = 'devstoreaccount1';
const DEV_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

/**
 * The subscription the Service Bus client checks: the first src/topology.json declares, which
 * func:local serves; after npm run remove:samples there may be none, and that check says it skips.
 */
const served = topology.topics.flatMap((t) =>
  t.subscriptions.map((s) => ({ topic: t.name, subscription: s.name, subject: s.subjects[0] ?? '' })),
)[0];
if (DOTNET && served === undefined)
  console.warn(
    'Skipped the Service Bus check of packages/devkit/test/engines/funcLocal.test.ts: src/topology.json declares no subscription for npm run func:local to serve.',
  );

type Results = Record<string, { Error?: string } & Record<string, unknown>>;
let folder: string;
let settingsPath: string;
let stack: StartedApp;
let serviceBusHarness: string;
let cosmosHarness: string;

async function harness(dll: string, ...args: string[]): Promise<Results> {
  const { stdout } = await run('dotnet', [dll, '--local-settings', settingsPath, ...args], {
    timeout: 120_000,
  });
  return (JSON.parse(stdout) as { results: Results }).results;
}

/** A Blob service request signed with Shared Key, as the storage SDK signs it (path-style, as Azurite serves it). */
async function blobRequest(
  method: 'GET' | 'PUT',
  path: string,
  query: Record<string, string>,
): Promise<Response> {
  const headers = { 'x-ms-date': new Date().toUTCString(), 'x-ms-version': '2021-08-06' };
  const canonicalHeaders = Object.entries(headers)
    .map(([name, value]) => `${name}:${value}\n`)
    .join('');
  const canonicalQuery = Object.keys(query)
    .sort()
    .map((name) => `\n${name}:${query[name]}`)
    .join('');
  const stringToSign = `${method}\n\n\n\n\n\n\n\n\n\n\n\n${canonicalHeaders}/${DEV_ACCOUNT}/${DEV_ACCOUNT}${path}${canonicalQuery}`;
  const signature = createHmac('sha256', Buffer.from(DEV_KEY, 'base64'))
    .update(stringToSign)
    .digest('base64');
  const url = `http://127.0.0.1:10000/${DEV_ACCOUNT}${path}?${new URLSearchParams(query).toString()}`;
  return fetch(url, {
    method,
    headers: { ...headers, Authorization: `SharedKey ${DEV_ACCOUNT}:${signature}` },
  });
}

(DOTNET ? describe : describe.skip)(
  'npm run func:local against the .NET clients of the Functions host',
  () => {
    beforeAll(async () => {
      serviceBusHarness = await buildHarness('ServiceBus');
      cosmosHarness = await buildHarness('Cosmos');
      folder = mkdtempSync(join(tmpdir(), 'func-local-'));
      settingsPath = join(folder, 'local.settings.json');
      // As a user runs it, in a terminal of its own; the ports 0 are written into the settings file.
      stack = new StartedApp(
        'npx',
        [
          'tsx',
          'packages/devkit/src/tools/funcLocal.ts',
          '--cosmos-port',
          '0',
          '--servicebus-port',
          '0',
          '--settings',
          settingsPath,
        ],
        { cwd: PROJECT_ROOT, env: userEnvironment(join(folder, 'local-run.json')) },
      );
      await stack.shown(/^Press Ctrl\+C to stop\.$/m, 0);
    }, 600_000);

    afterAll(() => {
      stack?.kill();
      rmSync(folder, { recursive: true, force: true });
    });

    const written = (): LocalSettingsFile =>
      JSON.parse(readFileSync(settingsPath, 'utf8')) as LocalSettingsFile;

    it('writes the settings the host and the app need, with connection strings instead of the identity', () => {
      const { Values: values } = written();

      expect(stack.output).toContain(`Wrote ${settingsPath}.`);
      expect(values['ServiceBusConnection']).toMatch(
        /^Endpoint=sb:\/\/127\.0\.0\.1:\d+;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;$/,
      );
      expect(values['CosmosDBConnection']).toBe(
        `AccountEndpoint=${values['COSMOS_ENDPOINT']};AccountKey=${DEFAULT_KEY};`,
      );
      expect(values[COSMOS_EXTENSION_CONNECTION_MODE]).toBe('Gateway');
      expect(values['AzureWebJobsStorage']).toBe('UseDevelopmentStorage=true');
      expect(Object.keys(values).filter((name) => name.includes('Connection__'))).toEqual([]);
      // The app's own check of its settings accepts them (it runs them when the worker loads it).
      expect(loadSettings(values).cosmos).toMatchObject({
        database: 'app',
        container: 'state',
        key: DEFAULT_KEY,
      });
    });

    (served ? it : it.skip)(
      'Azure.Messaging.ServiceBus connects with ServiceBusConnection, sends to a topic and processes from its subscription',
      async () => {
        const { topic, subscription, subject } = served!;
        const results = await harness(serviceBusHarness, topic, subscription, subject);
        const port = /:(\d+);/.exec(written().Values['ServiceBusConnection'] ?? '')?.[1];

        expect(results['connection']).toEqual({
          Endpoint: `sb://127.0.0.1:${port}/`,
          SharedAccessKeyName: 'RootManageSharedAccessKey',
        });
        const seen = results['sendAndProcess'] as { Sent: string; Received: Record<string, unknown> };
        expect(seen.Sent).toMatch(/^local-settings-[0-9a-f]{32}$/);
        expect(seen).toEqual({
          Sent: seen.Sent,
          Received: {
            MessageId: seen.Sent,
            Subject: subject,
            Body: '{"check":"local-settings"}',
            DeliveryCount: 1,
          },
          LeftInSubscription: 0,
        });
      },
      120_000,
    );

    it('Microsoft.Azure.Cosmos connects with CosmosDBConnection in gateway mode and runs a change feed processor on the relay’s containers', async () => {
      const results = await harness(cosmosHarness);

      expect(results['containers']).toEqual({
        ConnectionMode: 'Gateway',
        Container: { Id: 'state', PartitionKeyPath: '/partitionKey', DefaultTimeToLive: -1 },
        Leases: { Id: 'leases', PartitionKeyPath: '/id' },
      });
      expect(results['processor']).toEqual({ Written: 201, Delivered: ['local-settings-1'] });
    }, 120_000);

    it('Azurite serves the development storage account: the host can create its container and list it', async () => {
      const created = await blobRequest('PUT', '/azure-webjobs-hosts', { restype: 'container' });
      const listed = await blobRequest('GET', '', { comp: 'list' });

      expect(created.status).toBe(201);
      expect(created.headers.get('server')).toMatch(/^Azurite-Blob\//);
      expect(listed.status).toBe(200);
      expect(await listed.text()).toContain('<Name>azure-webjobs-hosts</Name>');
    });

    it('stops everything it started on Ctrl+C', async () => {
      const cosmos = written().Values['COSMOS_ENDPOINT'] ?? '';

      expect(['exit code 0', 'SIGINT']).toContain(await stack.interrupt());
      for (const url of [cosmos, 'http://127.0.0.1:10000/']) {
        const refused = await fetch(url).then(
          () => 'answered',
          (error: Error) => error.cause,
        );
        expect({ url, refused }).toMatchObject({ url, refused: { code: 'ECONNREFUSED' } });
      }
    });
  },
);
