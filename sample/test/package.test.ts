// The deployment package, tested as shipped: `npm run package` builds it and zips it; the zip is
// extracted into an empty temporary folder (no node_modules anywhere above it) and booted in a
// fresh Node.js process through the worker's path (@azure/functions-core injected, package.json
// `main` loaded, each invocation an RPC InvocationRequest shaped as the host sends it), with
// exactly the app settings the Bicep gives the function app, against the local Cosmos DB server.

import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';

import { PROJECT_ROOT, RETRY_COPIES } from '@idempotent-consumers/devkit';
import {
  azdRemoteBuild,
  azdZipEntries,
  listFiles,
  readAzureYaml,
} from '@idempotent-consumers/devkit/internal/build/azd';
import type { LoadReport } from '@idempotent-consumers/devkit/internal/build/loadPackage';
import {
  bootPackage,
  developmentOnlyPackages,
  metafileOf,
  PACKAGE_DIR,
  type PackageReport,
} from '@idempotent-consumers/devkit/internal/build/package';
import { appSettings, describeInfra } from '@idempotent-consumers/devkit/internal/testing/bicep';
import {
  functionNameOf,
  METRIC_NAMES,
  OUTBOX_TYPE,
  outgoingMessageId,
  processDelivery,
} from '@idempotent-consumers/inbox/internal';
import { delivery, dependencies, documentsIn } from '@idempotent-consumers/inbox/testing';
import {
  type LocalServiceBus,
  scaledClock,
  startServiceBus,
  useLocalStack,
} from '@idempotent-consumers/local-azure';
import { unzipSync } from 'fflate';
import { generate } from 'selfsigned';

import { topology } from '../../src/topology';
import {
  type Invoice,
  invoicePartition,
  invoiceStatusId,
  type Product,
  productPartition,
  stockReserver,
} from '../src';

const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), 'package-'));
const packageDir = join(work, 'dist');
const zipFile = join(work, 'consumers.zip');
const extracted = join(work, 'extracted');
const recordFile = join(work, 'coldstart.md');
const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  main: string;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const service = readAzureYaml(PROJECT_ROOT).services.consumers;

let report: PackageReport;
let printed: string;

beforeAll(async () => {
  // As a user runs it: the npm script's command, with a temporary output.
  const { stdout } = await run(
    process.execPath,
    [
      require.resolve('tsx/cli'),
      'packages/devkit/src/build/package.ts',
      '--out',
      packageDir,
      '--zip',
      zipFile,
      '--samples',
      '1',
      '--record',
      recordFile,
      '--json',
    ],
    { cwd: PROJECT_ROOT, encoding: 'utf8' },
  );
  printed = stdout;
  report = JSON.parse(stdout) as PackageReport;
  for (const [file, bytes] of Object.entries(unzipSync(new Uint8Array(readFileSync(zipFile))))) {
    mkdirSync(dirname(join(extracted, file)), { recursive: true });
    writeFileSync(join(extracted, file), bytes);
  }
}, 120_000);

describe('azure.yaml', () => {
  it('deploys the folder npm run build writes, as is, and names the azd it needs', () => {
    expect(readAzureYaml(PROJECT_ROOT).requiredVersions?.azd).toBe('>= 1.23.5');
    expect(service).toMatchObject({ project: '.', host: 'function', language: 'ts', dist: PACKAGE_DIR });
    expect(manifest.scripts.build).toBe(
      'tsx node_modules/@idempotent-consumers/devkit/src/build/package.ts --build-only',
    );
    expect(manifest.main).toBe(`${PACKAGE_DIR}/app.js`);
  });

  it('makes azd deploy without a remote build, which azd accepts given the project folder', () => {
    expect(service?.remoteBuild).toBe(false);
    expect(azdRemoteBuild(PROJECT_ROOT, service!)).toEqual({ remoteBuild: false });
  });
});

describe('npm run package', () => {
  it('prints the folder, the zip, the size, the files and the load time', () => {
    expect(report.files).toEqual([
      'app.js',
      'azureMonitor.js',
      'host.json',
      'package.json',
      'serviceBusPublisher.js',
    ]);
    expect(report.zippedBytes).toBeGreaterThan(0);
    expect(report.zippedBytes).toBeLessThan(report.bytes);
    expect(report.loadMs.samples).toHaveLength(1);
    expect(report.loadMs.median).toBeGreaterThan(0);
    expect(printed).toContain('"zip"');
  });

  it('records the figures as markdown that the format check accepts, with the command', async () => {
    const recorded = readFileSync(recordFile, 'utf8');
    const check = await run(
      process.execPath,
      [
        require.resolve('prettier/bin/prettier.cjs'),
        '--config',
        join(PROJECT_ROOT, '.prettierrc.json'),
        '--check',
        recordFile,
      ],
      {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
      },
    ).catch((error: { code: number; stdout: string }) => error);

    expect(recorded).toContain(`npm run package -- --out ${packageDir}`);
    expect(recorded).toMatch(new RegExp(`\\|\\s+${report.loadMs.median.toFixed(0)} \\|`));
    expect(check).not.toHaveProperty('code');
  });

  it('is described as it is: the README and azure.yaml name each bundle it ships', () => {
    const bundles = report.files.filter((file) => file.endsWith('.js'));
    // As one line: prettier wraps the prose where it likes.
    const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ');
    const azureYaml = readFileSync(join(PROJECT_ROOT, 'azure.yaml'), 'utf8').replace(/\s*\n\s*#?\s*/g, ' ');

    expect(bundles).toHaveLength(3);
    expect(readme).toContain('`dist/` (three bundles: ');
    expect(azureYaml).toContain('three bundles (');
    for (const bundle of bundles) {
      expect({
        bundle,
        readme: readme.includes(`\`${bundle}\``),
        azureYaml: azureYaml.includes(bundle),
      }).toEqual({
        bundle,
        readme: true,
        azureYaml: true,
      });
    }
  });

  it('zips exactly the files azd would zip from that folder', () => {
    const zipped = Object.keys(unzipSync(new Uint8Array(readFileSync(zipFile)))).sort();

    expect(zipped).toEqual(report.files);
    expect(azdZipEntries(packageDir, service!)).toEqual(report.files);
    expect(listFiles(extracted)).toEqual(report.files);
  });

  it('ships a package.json whose main is the bundle and which needs nothing installed', () => {
    const shipped = JSON.parse(readFileSync(join(extracted, 'package.json'), 'utf8')) as Record<
      string,
      unknown
    >;

    expect(shipped.main).toBe('app.js');
    expect(shipped).not.toHaveProperty('dependencies');
    expect(shipped).not.toHaveProperty('scripts');
    expect(readFileSync(join(extracted, 'host.json'), 'utf8')).toBe(
      readFileSync(join(PROJECT_ROOT, 'host.json'), 'utf8'),
    );
  });

  it('bundles every runtime dependency and no development-only one, the heavy ones off the start-up file', () => {
    // esbuild's metafile of the build: each output file's inputs, as paths from the project's root.
    // A workspace package is bundled from its own folder (packages/<name>/), not from node_modules.
    const { outputs } = JSON.parse(readFileSync(metafileOf(packageDir), 'utf8')) as {
      outputs: Record<string, { inputs: Record<string, unknown> }>;
    };
    const lock = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { resolved?: string; link?: boolean }>;
    };
    const workspaces = new Map(
      Object.entries(lock.packages)
        .filter(([, entry]) => entry.link === true && entry.resolved !== undefined)
        .map(([path, entry]) => [entry.resolved!, path.slice('node_modules/'.length)]),
    );
    const packageOf = (input: string): string | undefined => {
      const installed = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\/(?!.*\/node_modules\/)/.exec(input);
      if (installed) return installed[1];
      const workspace = /^(packages\/[^/]+)\//.exec(input);
      return workspace ? (workspaces.get(workspace[1]!) ?? workspace[1]) : undefined;
    };
    const bundledIn = (file: string): Set<string> => {
      const output = Object.entries(outputs).find(([path]) => path.endsWith(`/${file}`));
      if (output === undefined)
        throw new Error(`The metafile has no output ${file}: ${Object.keys(outputs).join(', ')}`);
      return new Set(Object.keys(output[1].inputs).flatMap((input) => packageOf(input) ?? []));
    };
    const files = ['app.js', 'azureMonitor.js', 'serviceBusPublisher.js'];
    const bundled = new Set(files.flatMap((file) => [...bundledIn(file)]));

    expect(Object.keys(manifest.dependencies).filter((name) => !bundled.has(name))).toEqual([]);
    // What a production install would not have (outside what package.json's dependencies need) may
    // not ship: local Azure and the dev kit (workspace packages the app only devDepends on), and what
    // only they need, such as the local Cosmos DB server's query engine.
    const developmentOnly = developmentOnlyPackages();
    expect(developmentOnly).toEqual(
      expect.arrayContaining([
        '@idempotent-consumers/local-azure',
        '@idempotent-consumers/devkit',
        '@zeit/cosmosdb-query',
      ]),
    );
    expect([...bundled].filter((name) => developmentOnly.includes(name))).toEqual([]);
    // The OpenTelemetry SDK and the Service Bus client load after registration (src/app.ts).
    const startup = bundledIn('app.js');
    expect(['applicationinsights', '@azure/service-bus', 'rhea'].filter((name) => startup.has(name))).toEqual(
      [],
    );
    expect(bundledIn('serviceBusPublisher.js').has('@azure/service-bus')).toBe(true);
  });

  it('refuses a bad option with its usage and exit code 2, before building anything', async () => {
    const failed = await run(
      process.execPath,
      [require.resolve('tsx/cli'), 'packages/devkit/src/build/package.ts', '--samples', 'x'],
      {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
      },
    ).catch((error: { code: number; stderr: string }) => error);

    expect(failed).toMatchObject({ code: 2 });
    expect((failed as { stderr: string }).stderr).toContain('--samples must be a whole number from 1 to 50');
    expect((failed as { stderr: string }).stderr).toContain('Usage:');
  });
});

describeInfra(
  'the extracted package, booted through the worker with the Bicep app settings',
  () => ({}),
  ({ compiled, defaults }) => {
    const templateDefault = (parameter: string): string =>
      String(
        (compiled().template.parameters as Record<string, { defaultValue?: unknown }>)[parameter]
          ?.defaultValue,
      );

    let boot: LoadReport;
    let settings: Record<string, string>;
    let serviceBus: LocalServiceBus;
    const stack = useLocalStack();
    afterAll(() => serviceBus?.stop());

    const payment = { invoiceId: 'INV-PKG-1', paymentId: 'PAY-PKG-1', amount: 12.5, currency: 'EUR' };
    const order = { orderId: 'ORD-PKG-1', productId: 'SKU-PKG-1', quantity: 2 };
    const status = { invoiceId: 'INV-PKG-2', status: 'Issued', version: 3 };
    // Reserved before the boot, so that its StockReserved waits in the outbox for the packaged relay.
    const staged = { orderId: 'ORD-PKG-2', productId: 'SKU-PKG-2', quantity: 1 };
    const stagedMessageId = outgoingMessageId(
      stockReserver.name,
      'ord-pkg-2',
      productPartition(staged.productId),
      'stock-reserved',
    );
    const twice = (fn: string, subject: string, messageId: string, body: object) =>
      [1, 2].map((deliveryCount) => ({
        function: fn,
        delivery: {
          body: JSON.stringify(body),
          messageId,
          subject,
          deliveryCount,
          contentType: 'application/json',
        },
      }));

    beforeAll(async () => {
      settings = appSettings(defaults());
      const invoice: Invoice = {
        id: payment.invoiceId,
        partitionKey: invoicePartition(payment.invoiceId),
        type: 'invoice',
        currency: 'EUR',
        totalMinor: 10_000,
        paidMinor: 0,
        status: 'Open',
      };
      const product: Product = {
        id: order.productId,
        partitionKey: productPartition(order.productId),
        type: 'product',
        stock: 10,
        reserved: 0,
      };
      await stack.container.items.create(invoice);
      await stack.container.items.create(product);
      await stack.container.items.create<Product>({
        ...product,
        id: staged.productId,
        partitionKey: productPartition(staged.productId),
      });
      await processDelivery(
        stockReserver,
        delivery(staged, { messageId: 'ord-pkg-2', subject: 'OrderCreated' }),
        dependencies(stack.container),
      );
      // The change feed page the host would hand the relay: the product, the marker, the outbox document.
      const page = await documentsIn(stack.container, productPartition(staged.productId));
      serviceBus = await startServiceBus({
        port: 0,
        clock: scaledClock(1),
        topology,
        retryCopies: RETRY_COPIES,
      });
      const plan = join(work, 'plan.json');
      writeFileSync(
        plan,
        JSON.stringify({
          invocations: [
            ...twice('billing-payment-applier', 'PaymentReceived', 'pay-pkg-1', payment),
            ...twice('inventory-stock-reserver', 'OrderCreated', 'ord-pkg-1', order),
            ...twice('billing-invoice-status-projector', 'InvoiceStatusChanged', 'status-pkg-1', status),
            { function: 'outbox-relay', documents: page },
          ],
        }),
      );
      // Only what the Bicep sets, and PATH so that node runs: nothing from this machine leaks in.
      // Values Resource Manager resolves only at deployment (ARM expressions in the snapshot) are left
      // out; the local server stands in for the account, with the database and container names the
      // template gives it.
      const env = {
        PATH: process.env.PATH,
        ...Object.fromEntries(Object.entries(settings).filter(([, value]) => !value.startsWith('['))),
        COSMOS_ENDPOINT: stack.server.endpoint,
        COSMOS_KEY: stack.server.key,
        COSMOS_DATABASE: templateDefault('cosmosDatabaseName'),
        COSMOS_CONTAINER: templateDefault('cosmosContainerName'),
        // The local peer stands in for the namespace (whose name is an ARM expression, left out).
        ServiceBusConnection: serviceBus.connectionString,
      };
      const [first] = await bootPackage(extracted, { plan, env });
      if (!first) throw new Error('the package did not boot');
      boot = first;
    }, 300_000);

    it('needs nothing from outside the package: only optional probes for development-only packages were refused', () => {
      // The driver refuses every module outside the extracted folder, as on a host where nothing else is
      // on the app's module path; the invocations below ran under that rule.
      const developmentOnly = developmentOnlyPackages();
      expect(boot.refusedModules.filter((name) => !developmentOnly.includes(name))).toEqual([]);
    });

    it('registers through @azure/functions-core: no "test mode" warning', () => {
      expect(boot.warnings.filter((line) => /test mode/i.test(line))).toEqual([]);
      expect(boot.functions.length).toBeGreaterThan(0);
    });

    it('registers one Service Bus trigger per subscription of src/topology.json, and nothing else undeclared', () => {
      const triggers = boot.functions
        .map(({ name, bindings }) => ({ name, trigger: Object.values(bindings).find(isTrigger) }))
        .filter(({ trigger }) => trigger?.type === 'serviceBusTrigger');
      const declared = topology.topics.flatMap((topic) =>
        topic.subscriptions.map((subscription) => `${topic.name}/${subscription.name}`),
      );

      expect(
        triggers
          .map(({ trigger }) => `${String(trigger?.topicName)}/${String(trigger?.subscriptionName)}`)
          .sort(),
      ).toEqual(declared.sort());
      for (const { name, trigger } of triggers) {
        expect(trigger).toMatchObject({ direction: 'in', connection: 'ServiceBusConnection' });
        expect(name).toBe(functionNameOf(String(trigger?.subscriptionName)));
      }
    });

    it('registers the purge and outbox sweeper timers on six-field schedules that do not run on every scale-out', () => {
      const timers = boot.functions
        .map(({ name, bindings }) => ({ name, trigger: Object.values(bindings).find(isTrigger) }))
        .filter(({ trigger }) => trigger?.type === 'timerTrigger');

      expect(timers.map(({ name }) => name).sort()).toEqual(['outbox-sweeper', 'purge-expired-markers']);
      for (const { trigger } of timers) {
        expect(String(trigger?.schedule).split(' ')).toHaveLength(6);
        expect(trigger?.runOnStartup).not.toBe(true);
      }
    });

    it("registers the outbox relay on the Bicep's database, container and lease container", () => {
      const relays = boot.functions
        .map(({ name, bindings }) => ({ name, trigger: Object.values(bindings).find(isTrigger) }))
        .filter(({ trigger }) => trigger?.type === 'cosmosDBTrigger');

      expect(relays.map(({ name }) => name)).toEqual(['outbox-relay']);
      expect(relays[0]?.trigger).toMatchObject({
        connection: 'CosmosDBConnection',
        databaseName: templateDefault('cosmosDatabaseName'),
        containerName: templateDefault('cosmosContainerName'),
        leaseContainerName: templateDefault('cosmosLeaseContainerName'),
        createLeaseContainerIfNotExists: false,
      });
    });

    it("gives each trigger's connection its identity settings in the Bicep", () => {
      const connections = new Set(
        boot.functions.flatMap(({ bindings }) =>
          Object.values(bindings)
            .filter(isTrigger)
            .map((binding) => binding.connection)
            .filter((connection): connection is string => typeof connection === 'string'),
        ),
      );

      expect([...connections].sort()).toEqual(['CosmosDBConnection', 'ServiceBusConnection']);
      // Service Bus names its namespace, Cosmos DB its account endpoint.
      expect(settings.ServiceBusConnection__fullyQualifiedNamespace).toBeTruthy();
      expect(settings.CosmosDBConnection__accountEndpoint).toBeTruthy();
      for (const connection of connections) {
        expect(settings[`${connection}__credential`]).toBe('managedidentity');
        expect(settings[`${connection}__clientId`]).toBeTruthy();
      }
    });

    it('reads no setting of its own that the Bicep leaves unset, unless packages/inbox/README.md documents its default', () => {
      const readme = readFileSync(join(PROJECT_ROOT, 'packages', 'inbox', 'README.md'), 'utf8');
      const table = readme.slice(readme.indexOf('## Settings'), readme.indexOf('## Telemetry'));
      const documentedOptional = new Set(
        table
          .split('\n')
          .filter((line) => line.startsWith('| `') && !line.includes('(required'))
          .flatMap((line) => [...(line.split('|')[1] ?? '').matchAll(/`([A-Za-z_]+)`/g)].map((m) => m[1]!)),
      );
      const own = boot.settingsRead.filter((name) =>
        /^(COSMOS|INBOX|SERVICEBUS|PURGE|HOST|BREAKER|OUTBOX|APPLICATIONINSIGHTS)_|^AZURE_CLIENT_ID$|^ServiceBusConnection/.test(
          name,
        ),
      );

      expect(own).toContain('COSMOS_ENDPOINT');
      expect(own.filter((name) => !(name in settings) && !documentedOptional.has(name))).toEqual([]);
    });

    it('processes each consumer’s message once, then completes the redelivery as a duplicate', async () => {
      expect(boot.invocations).toEqual([
        { function: 'billing-payment-applier', outcome: 'processed' },
        { function: 'billing-payment-applier', outcome: 'duplicate' },
        { function: 'inventory-stock-reserver', outcome: 'processed' },
        { function: 'inventory-stock-reserver', outcome: 'duplicate' },
        { function: 'billing-invoice-status-projector', outcome: 'processed' },
        { function: 'billing-invoice-status-projector', outcome: 'duplicate' },
        { function: 'outbox-relay' },
      ]);
      const read = async <T extends object>(id: string, partitionKey: string): Promise<T | undefined> =>
        (await stack.container.item(id, partitionKey).read<T>()).resource;
      expect(await read<Invoice>(payment.invoiceId, invoicePartition(payment.invoiceId))).toMatchObject({
        paidMinor: 1250,
      });
      expect(await read<Product>(order.productId, productPartition(order.productId))).toMatchObject({
        stock: 8,
        reserved: 2,
      });
      expect(await read(invoiceStatusId(status.invoiceId), invoicePartition(status.invoiceId))).toMatchObject(
        {
          status: 'Issued',
          version: 3,
        },
      );
    });

    it('relays the outbox with its own @azure/service-bus (the deferred file) and marks the document dispatched', async () => {
      const received = serviceBus.broker
        .subscription('business-events', 'shipping.shipment-planner')
        .entity.peek();
      const outbox = (await documentsIn(stack.container, productPartition(staged.productId))).filter(
        (d) => d.type === OUTBOX_TYPE,
      );

      expect(received.map((m) => [m.messageId, m.subject, m.contentType])).toEqual([
        [stagedMessageId, 'StockReserved', 'application/json'],
      ]);
      const body = received[0]?.body;
      expect(JSON.parse(Buffer.isBuffer(body) ? body.toString('utf8') : String(body))).toEqual(staged);
      expect(outbox).toEqual([expect.objectContaining({ messageId: stagedMessageId, status: 'dispatched' })]);
      expect(outbox[0]?.ttl).toEqual(expect.any(Number));
    });
  },
);

function isTrigger(binding: unknown): binding is Record<string, unknown> & { type: string } {
  return /Trigger$/.test(String((binding as { type?: unknown }).type));
}

describe('the extracted package, with Application Insights', () => {
  // A stand-in for the ingestion endpoint: the exporter only speaks HTTPS, so it gets a self-signed
  // certificate for 127.0.0.1 that the child process trusts (NODE_EXTRA_CA_CERTS).
  const received: { path: string; body: string }[] = [];
  let ingestion: Server;
  const stack = useLocalStack();
  let boot: LoadReport;

  beforeAll(async () => {
    const certificate = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
    });
    const caFile = join(work, 'ingestion-ca.pem');
    writeFileSync(caFile, certificate.cert);
    ingestion = createServer({ key: certificate.private, cert: certificate.cert }, (request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const raw = Buffer.concat(chunks);
        const body = request.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
        received.push({ path: request.url ?? '', body: body.toString('utf8') });
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ itemsReceived: 1, itemsAccepted: 1, errors: [] }));
      });
    });
    await new Promise<void>((resolve) => ingestion.listen(0, '127.0.0.1', resolve));
    const endpoint = `https://127.0.0.1:${(ingestion.address() as AddressInfo).port}/`;
    const plan = join(work, 'telemetry-plan.json');
    const body = { invoiceId: 'INV-AI-1', paymentId: 'PAY-AI-1', amount: 1, currency: 'EUR' };
    writeFileSync(
      plan,
      JSON.stringify({
        invocations: [
          {
            function: 'billing-payment-applier',
            delivery: { body: JSON.stringify(body), messageId: 'pay-ai-1' },
          },
        ],
        lingerMs: 4_000,
      }),
    );
    const [first] = await bootPackage(extracted, {
      plan,
      env: {
        PATH: process.env.PATH,
        COSMOS_ENDPOINT: stack.server.endpoint,
        COSMOS_KEY: stack.server.key,
        APPLICATIONINSIGHTS_CONNECTION_STRING: `InstrumentationKey=00000000-0000-0000-0000-000000000001;IngestionEndpoint=${endpoint};LiveEndpoint=${endpoint}`,
        NODE_EXTRA_CA_CERTS: caFile,
        OTEL_METRIC_EXPORT_INTERVAL: '500',
        // Nothing may leave this machine: no SDK self-telemetry, and the Flex Consumption variables
        // Azure sets, so that the resource detection does not probe the VM metadata endpoint.
        APPLICATIONINSIGHTS_STATSBEAT_DISABLED: 'true',
        WEBSITE_SITE_NAME: 'func-package-test',
        WEBSITE_SKU: 'FlexConsumption',
      },
    });
    if (!first) throw new Error('the package did not boot');
    boot = first;
  }, 120_000);

  afterAll(async () => {
    await new Promise((resolve) => ingestion?.close(resolve));
  });

  it('starts Azure Monitor after registration and exports the inbox metrics to the ingestion endpoint', () => {
    const metrics = received
      .filter(({ path }) => path.startsWith('/v2.1/track'))
      .flatMap(({ body }) => JSON.parse(body) as { data?: { baseData?: { metrics?: { name: string }[] } } }[])
      .flatMap((item) => item.data?.baseData?.metrics?.map((metric) => metric.name) ?? []);

    expect(boot.invocations).toEqual([{ function: 'billing-payment-applier', outcome: 'alternative' }]);
    expect(metrics).toContain(METRIC_NAMES.messages);
    expect(metrics).toContain(METRIC_NAMES.duration);
  });
});
