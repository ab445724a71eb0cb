// The infrastructure, checked offline: infra/main.bicep must build and lint clean, and the resources
// it would create (evaluated by `bicep snapshot`, the Resource Manager template engine run locally)
// must carry every property the design depends on. Values that exist only after deployment
// (principal ids, endpoints) are checked as the expressions that will produce them. Diagnostics,
// network access, roles of the developer and the live tests, the Cosmos DB indexing policy and the
// postprovision hook have their own files next to this one.

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import {
  loadSettings,
  METRIC_NAMES,
  parseDurationSeconds,
  retentionBoundSeconds,
} from '../../src/inbox/internal';
import type { CliResult, PredictedResource, Snapshot } from './bicep';
import {
  armGuid,
  at,
  azdEnvironment,
  azdParameters,
  deploymentLocation as location,
  describeWithBicep,
  developerId,
  environmentName,
  evaluateVariants,
  fakeScope,
  infraDir,
  lint,
  locateBicep,
  moduleOutput,
  only,
  repoRoot,
  resources,
  role,
  roleAssignments,
  roleAssignmentScope,
  roleDefinitionId,
  unformattedFiles,
} from './bicep';

/** The scheduled query rule whose name ends with `suffix`. */
function queryRule(from: Snapshot, suffix: string): PredictedResource | undefined {
  return resources(from, 'Microsoft.Insights/scheduledQueryRules').find((rule) =>
    String(rule.name).endsWith(suffix),
  );
}

interface Topology {
  topics: { name: string; subscriptions: { name: string; consumer: string; subjects: string[] }[] }[];
}

const topology = JSON.parse(readFileSync(path.join(repoRoot, 'src', 'topology.json'), 'utf8')) as Topology;
const declaredSubscriptions = topology.topics.flatMap((topic) =>
  topic.subscriptions.map((subscription) => ({ topic: topic.name, ...subscription })),
);

const existingActionGroup = `/subscriptions/${fakeScope.subscriptionId}/resourceGroups/ops/providers/Microsoft.Insights/actionGroups/on-call`;

const findBicepScript = path.join(infraDir, 'find-bicep.sh');
const pinnedBicepVersion = /BICEP_VERSION="\$\{BICEP_VERSION:-([0-9.]+)\}"/.exec(
  readFileSync(findBicepScript, 'utf8'),
)?.[1];

/**
 * Runs find-bicep.sh where only basic tools are on PATH (no dotnet, no az, an empty cache) and,
 * when a version is given, a fake `bicep` that reports it.
 */
function findBicepInSandbox(fakeVersion?: string): {
  status: number | null;
  stdout: string;
  stderr: string;
  fakeBicep: string;
} {
  const sandbox = mkdtempSync(path.join(tmpdir(), 'find-bicep-'));
  try {
    const bin = path.join(sandbox, 'bin');
    mkdirSync(bin);
    for (const tool of ['bash', 'uname', 'dirname', 'cut', 'mkdir', 'chmod', 'cat', 'sed']) {
      const where = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
      symlinkSync(where, path.join(bin, tool));
    }
    const fakeBicep = path.join(bin, 'bicep');
    if (fakeVersion) {
      writeFileSync(
        fakeBicep,
        `#!${path.join(bin, 'bash')}\necho "Bicep CLI version ${fakeVersion} (fake)"\n`,
        { mode: 0o755 },
      );
    }
    const environment = { ...process.env };
    delete environment['BICEP_PATH'];
    const script = spawnSync(path.join(bin, 'bash'), [findBicepScript], {
      cwd: repoRoot,
      encoding: 'utf8',
      env: { ...environment, PATH: bin, HOME: sandbox, BICEP_CACHE_DIR: path.join(sandbox, 'cache') },
    });
    return { status: script.status, stdout: script.stdout, stderr: script.stderr, fakeBicep };
  } finally {
    rmSync(sandbox, { recursive: true, force: true });
  }
}

/** Parameters of modules/servicebus.bicep, evaluated on its own with other declarations than src/. */
const serviceBusModuleParameters = (topics: Topology['topics']): Record<string, unknown> => ({
  namespaceName: 'sb-declarations',
  location,
  tags: {},
  sku: 'Standard',
  topics,
  lockDuration: 'PT1M',
  maxDeliveryCount: 10,
  messageTimeToLive: 'P14D',
  duplicateDetectionWindow: 'PT1H',
  appPrincipalId: developerId,
  appCanReadRuntimeProperties: false,
  developer: { id: '', type: 'User' },
  testPrincipalId: '',
  publicNetworkAccess: 'Enabled',
  workspaceId: `/subscriptions/${fakeScope.subscriptionId}/resourceGroups/rg-declarations/providers/Microsoft.OperationalInsights/workspaces/log-declarations`,
});
const severalSubjectsTopics: Topology['topics'] = [
  {
    name: 'orders',
    subscriptions: [
      {
        name: 'audit',
        consumer: 'audit.recorder',
        subjects: ['OrderCreated', "Order's Note", 'OrderShipped'],
      },
    ],
  },
  {
    name: 'payments',
    subscriptions: [{ name: 'ledger', consumer: 'ledger', subjects: ['PaymentReceived'] }],
  },
];
const noSubjectTopics: Topology['topics'] = [
  { name: 'orders', subscriptions: [{ name: 'nothing', consumer: 'nobody', subjects: [] }] },
];

const bicep = locateBicep();

describeWithBicep(bicep)('infra/main.bicep', () => {
  let linted: CliResult = { exitCode: -1, output: 'infra/ was not linted' };
  let unformatted: string[] = ['infra/ was not checked'];

  beforeAll(async () => {
    if (bicep.found) {
      [linted, unformatted] = await Promise.all([lint(bicep.path), unformattedFiles(bicep.path)]);
    }
  }, 300_000);

  const serviceBusModule = {
    templateFile: path.join(infraDir, 'modules', 'servicebus.bicep'),
    resourceGroup: 'rg-declarations',
  };
  const { compiled, evaluated, refusal } = evaluateVariants(bicep, (template) => {
    const base = azdParameters(template, azdEnvironment);
    return {
      defaults: { parameters: base },
      premiumProvisioned: {
        parameters: {
          ...base,
          serviceBusSku: 'Premium',
          cosmosCapacityMode: 'Provisioned',
          cosmosAutoscaleMaxThroughput: 4000,
          serviceBusDataOwnerForScaling: true,
          alertEmail: 'ops@example.com',
          actionGroupId: existingActionGroup,
        },
      },
      basicSku: { parameters: { ...base, serviceBusSku: 'Basic' } },
      tooShortFromAzdEnvironment: {
        parameters: azdParameters(template, { ...azdEnvironment, INBOX_RETENTION: 'P7D' }),
      },
      equalToBound: { parameters: { ...base, inboxRetention: 'P21DT10M' } },
      purgeBudgetSet: {
        parameters: azdParameters(template, { ...azdEnvironment, PURGE_MAX_RU_PER_SECOND: '250' }),
      },
      justAboveBound: { parameters: { ...base, inboxRetention: 'P21DT11M' } },
      longerMessageTtl: { parameters: { ...base, serviceBusMessageTtl: 'P30D' } },
      lockLongerThanServiceBusAllows: { parameters: { ...base, serviceBusLockDuration: 'PT6M' } },
      monthsInMessageTtl: { parameters: { ...base, serviceBusMessageTtl: 'P1M' } },
      severalSubjects: {
        parameters: serviceBusModuleParameters(severalSubjectsTopics),
        options: serviceBusModule,
      },
      noSubject: { parameters: serviceBusModuleParameters(noSubjectTopics), options: serviceBusModule },
    };
  });
  const defaults = (): Snapshot => evaluated('defaults');
  const premiumProvisioned = (): Snapshot => evaluated('premiumProvisioned');
  const purgeBudgetSet = (): Snapshot => evaluated('purgeBudgetSet');

  const appSettings = (from: Snapshot): Record<string, string> => {
    const settings = at(only(from, 'Microsoft.Web/sites'), 'properties.siteConfig.appSettings') as {
      name: string;
      value: string;
    }[];
    return Object.fromEntries(settings.map(({ name, value }) => [name, value]));
  };
  const appPrincipal = moduleOutput('identity', 'principalId');
  const appRoleAssignments = (from: Snapshot): PredictedResource[] =>
    roleAssignments(from).filter((assignment) =>
      appPrincipal.test(String(at(assignment, 'properties.principalId'))),
    );

  describe('Bicep CLI', () => {
    it('lints every file of infra/ with no error and no warning', () => {
      expect(linted.output.trim()).toBe('');
      expect(linted.exitCode).toBe(0);
    });

    it('finds every .bicep file formatted as `bicep format` writes it', () => {
      expect(unformatted).toEqual([]);
    });

    it('builds main.bicep without diagnostics, at subscription scope', () => {
      expect(compiled().diagnostics).toBe('');
      expect(compiled().template.$schema).toContain('subscriptionDeploymentTemplate.json');
    });

    it('finds a Bicep CLI through infra/find-bicep.sh and prints only its absolute path', () => {
      const script = spawnSync('bash', [findBicepScript], {
        cwd: repoRoot,
        encoding: 'utf8',
      });

      expect(script.status).toBe(0);
      expect(script.stdout.trim().split('\n')).toHaveLength(1);
      expect(path.isAbsolute(script.stdout.trim())).toBe(true);
    });

    it('makes find-bicep.sh fail with one clear line when no Bicep CLI can be had', () => {
      const script = findBicepInSandbox();

      expect(script.status).not.toBe(0);
      expect(script.stdout).toBe('');
      expect(script.stderr.trim().split('\n')).toEqual([expect.stringContaining('no Bicep CLI found')]);
    });

    it('takes a bicep on PATH of the pinned version, and one of another version only as a last resort', () => {
      const pinned = findBicepInSandbox(pinnedBicepVersion);
      const other = findBicepInSandbox('0.1.0');

      expect([pinned.status, pinned.stdout.trim()]).toEqual([0, pinned.fakeBicep]);
      expect([other.status, other.stdout.trim()]).toEqual([0, other.fakeBicep]);
      expect(other.stderr).toContain(
        `skipping ${other.fakeBicep}: version 0.1.0, the checks are pinned to ${pinnedBicepVersion}`,
      );
      expect(other.stderr).toContain("warning: no 'dotnet' to restore");
    });
  });

  describe('template', () => {
    it('offers Standard and Premium Service Bus, never Basic', () => {
      expect(compiled().template.parameters['serviceBusSku']?.allowedValues).toEqual(['Standard', 'Premium']);
    });

    it('refuses Basic as a parameter value', () => {
      expect(refusal('basicSku')).toContain(
        `Expected a value of type "'Premium' | 'Standard'" but the provided value is of type "'Basic'"`,
      );
    });

    it('lets every resource name be overridden by a parameter defaulting to a generated name', () => {
      for (const name of [
        'resourceGroupName',
        'identityName',
        'logAnalyticsName',
        'applicationInsightsName',
        'serviceBusNamespaceName',
        'cosmosAccountName',
        'storageAccountName',
        'functionPlanName',
        'functionAppName',
      ]) {
        expect(compiled().template.parameters[name]).toEqual({ type: 'string', defaultValue: '' });
      }
    });

    it('never reads, builds or outputs a key, a SAS or a secret-bearing connection string', () => {
      for (const forbidden of [
        /listKeys/i,
        /listConnectionStrings/i,
        /listAccountSas/i,
        /listServiceSas/i,
        /AccountKey=/i,
        /SharedAccessKey/i,
        /primaryMasterKey/i,
        /AuthorizationRules/i,
      ]) {
        expect(compiled().text).not.toMatch(forbidden);
      }
      for (const [name, output] of Object.entries(compiled().template.outputs)) {
        expect(`${name}: ${output.type}`).not.toMatch(/: secure/i);
        expect(name).not.toMatch(/KEY|SECRET|PASSWORD|SAS/);
      }
    });

    it('outputs what azd and local runs need, in UPPER_SNAKE', () => {
      const outputs = Object.keys(compiled().template.outputs);

      expect(outputs).toEqual(
        expect.arrayContaining([
          'AZURE_LOCATION',
          'AZURE_TENANT_ID',
          'AZURE_RESOURCE_GROUP',
          'AZURE_FUNCTION_APP_NAME',
          'SERVICEBUS_NAMESPACE',
          'SERVICEBUS_FQDN',
          'COSMOS_ENDPOINT',
          'COSMOS_DATABASE',
          'COSMOS_CONTAINER',
          'APPLICATIONINSIGHTS_CONNECTION_STRING',
        ]),
      );
      for (const output of outputs) {
        expect(output).toMatch(/^[A-Z][A-Z0-9_]*$/);
      }
    });
  });

  describe('with the defaults of main.parameters.json', () => {
    it('tags every top-level resource with azd-env-name', () => {
      const topLevel = defaults().predictedResources.filter((resource) => resource.location !== undefined);

      expect(topLevel.length).toBeGreaterThanOrEqual(12);
      for (const resource of topLevel) {
        expect({ type: resource.type, tag: resource.tags?.['azd-env-name'] }).toEqual({
          type: resource.type,
          tag: environmentName,
        });
      }
    });

    it('names the function app after the azure.yaml service in its azd-service-name tag', () => {
      const azureYaml = readFileSync(path.join(repoRoot, 'azure.yaml'), 'utf8');
      const services = [...azureYaml.matchAll(/^services:\n((?: {2}.*\n|\n)*)/gm)].map((block) =>
        [...(block[1] ?? '').matchAll(/^ {2}([A-Za-z0-9-]+):/gm)].map((service) => service[1]),
      );

      expect(services).toEqual([[only(defaults(), 'Microsoft.Web/sites').tags?.['azd-service-name']]]);
      expect(azureYaml).toMatch(/^ {4}host: function$/m);
      expect(azureYaml).toMatch(/^ {4}language: ts$/m);
    });

    describe('Service Bus', () => {
      it('is a Standard namespace with local (SAS) auth off and TLS 1.2', () => {
        const namespace = only(defaults(), 'Microsoft.ServiceBus/namespaces');

        expect(namespace.sku).toMatchObject({ name: 'Standard', tier: 'Standard' });
        expect(namespace.properties).toMatchObject({ disableLocalAuth: true, minimumTlsVersion: '1.2' });
      });

      it('creates every declared topic with duplicate detection on and a PT1H window', () => {
        const topics = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics');

        expect(topics.map((topic) => topic.name.split('/')[1]).sort()).toEqual(
          topology.topics.map((topic) => topic.name).sort(),
        );
        for (const topic of topics) {
          expect(topic.properties).toMatchObject({
            requiresDuplicateDetection: true,
            duplicateDetectionHistoryTimeWindow: 'PT1H',
          });
        }
      });

      it('creates exactly the declared subscriptions, with lock, delivery count, TTL and dead-lettering', () => {
        const subscriptions = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics/subscriptions');

        expect(
          subscriptions.map((subscription) => subscription.name.split('/').slice(1).join('/')).sort(),
        ).toEqual(declaredSubscriptions.map((declared) => `${declared.topic}/${declared.name}`).sort());
        for (const subscription of subscriptions) {
          expect(subscription.properties).toMatchObject({
            lockDuration: 'PT1M',
            maxDeliveryCount: 10,
            defaultMessageTimeToLive: 'P14D',
            deadLetteringOnMessageExpiration: true,
          });
        }
      });

      it('replaces the catch-all $Default rule of each subscription with a filter on its subjects', () => {
        const rules = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules');

        expect(rules).toHaveLength(declaredSubscriptions.length);
        for (const declared of declaredSubscriptions) {
          const rule = rules.find((candidate) =>
            candidate.name.endsWith(`/${declared.topic}/${declared.name}/$Default`),
          );
          const filter =
            declared.subjects.length === 1
              ? { filterType: 'CorrelationFilter', correlationFilter: { label: declared.subjects[0] } }
              : {
                  filterType: 'SqlFilter',
                  sqlFilter: {
                    sqlExpression: `sys.Label IN (${declared.subjects.map((s) => `'${s}'`).join(', ')})`,
                  },
                };

          expect({ subscription: declared.name, properties: rule?.properties }).toEqual({
            subscription: declared.name,
            properties: filter,
          });
        }
      });

      it('lets the app receive from each subscription, scoped to that subscription only', () => {
        const receivers = appRoleAssignments(defaults()).filter(
          (assignment) =>
            at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataReceiver),
        );

        expect(receivers.map(roleAssignmentScope).sort()).toEqual(
          resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics/subscriptions')
            .map((subscription) => subscription.id)
            .sort(),
        );
        for (const receiver of receivers) {
          expect(at(receiver, 'properties.principalType')).toBe('ServicePrincipal');
        }
      });

      it('grants nothing at namespace or topic scope, and no Data Owner unless asked', () => {
        const namespaceId = only(defaults(), 'Microsoft.ServiceBus/namespaces').id;
        const serviceBusScopes = roleAssignments(defaults())
          .map(roleAssignmentScope)
          .filter((scope) => scope.startsWith(namespaceId));

        expect(
          serviceBusScopes.filter((scope) => !scope.includes('/subscriptions/', namespaceId.length)),
        ).toEqual([]);
        expect(
          roleAssignments(defaults()).filter(
            (assignment) =>
              at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataOwner),
          ),
        ).toEqual([]);
      });
    });

    describe('Cosmos DB', () => {
      it('is a serverless account with keys off and Session consistency', () => {
        const account = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts');

        expect(account.properties).toMatchObject({
          disableLocalAuth: true,
          consistencyPolicy: { defaultConsistencyLevel: 'Session' },
          capabilities: [{ name: 'EnableServerless' }],
        });
      });

      it('creates database "app" and container "state" on /partitionKey (Hash v2) with TTL on and no default expiry', () => {
        const database = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases');
        const container = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers');

        expect(database.name.split('/')[1]).toBe('app');
        expect(container.name.split('/').slice(1)).toEqual(['app', 'state']);
        expect(at(container, 'properties.resource.partitionKey')).toEqual({
          paths: ['/partitionKey'],
          kind: 'Hash',
          version: 2,
        });
        expect(at(container, 'properties.resource.defaultTtl')).toBe(-1);
        expect(at(container, 'properties.options')).toEqual({});
      });

      it('makes the app a Built-in Data Contributor on the database only, named guid(scope, principal, role)', () => {
        const account = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts');
        const assignment = only(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments');
        const scope = `${account.id}/dbs/app`;
        const definition = `${account.id}/sqlRoleDefinitions/${role.cosmosBuiltInDataContributor}`;
        const principal = String(at(assignment, 'properties.principalId'));

        expect(principal).toMatch(appPrincipal);
        expect(assignment.properties).toMatchObject({ scope, roleDefinitionId: definition });
        expect(assignment.name).toBe(
          `[format('{0}/{1}', '${account.name}', guid('${scope}', ${principal.slice(1, -1)}, '${definition}'))]`,
        );
      });
    });

    describe('storage', () => {
      it('allows no shared key, no public blob access and nothing below TLS 1.2', () => {
        const account = only(defaults(), 'Microsoft.Storage/storageAccounts');

        expect(account.properties).toMatchObject({
          allowSharedKeyAccess: false,
          allowBlobPublicAccess: false,
          minimumTlsVersion: 'TLS1_2',
          supportsHttpsTrafficOnly: true,
        });
      });

      it('lets the app own blobs and write host diagnostic events, on this account only', () => {
        const accountId = only(defaults(), 'Microsoft.Storage/storageAccounts').id;
        const onStorage = appRoleAssignments(defaults()).filter((assignment) =>
          roleAssignmentScope(assignment).startsWith(accountId),
        );

        expect(
          onStorage.map((assignment) => [
            roleAssignmentScope(assignment),
            at(assignment, 'properties.roleDefinitionId'),
          ]),
        ).toEqual(
          expect.arrayContaining([
            [accountId, roleDefinitionId(role.storageBlobDataOwner)],
            [accountId, roleDefinitionId(role.storageTableDataContributor)],
          ]),
        );
        expect(onStorage).toHaveLength(2);
      });
    });

    describe('Application Insights', () => {
      it('refuses local (instrumentation key) auth and lets the app publish with its identity', () => {
        const component = only(defaults(), 'Microsoft.Insights/components');
        const publishers = appRoleAssignments(defaults()).filter(
          (assignment) => roleAssignmentScope(assignment) === component.id,
        );

        expect(component.properties).toMatchObject({ DisableLocalAuth: true });
        expect(publishers.map((assignment) => at(assignment, 'properties.roleDefinitionId'))).toEqual([
          roleDefinitionId(role.monitoringMetricsPublisher),
        ]);
      });
    });

    describe('function app', () => {
      it('runs on a Flex Consumption plan (FC1)', () => {
        const plan = only(defaults(), 'Microsoft.Web/serverfarms');
        const site = only(defaults(), 'Microsoft.Web/sites');

        expect(plan.sku).toEqual({ name: 'FC1', tier: 'FlexConsumption' });
        expect(at(plan, 'properties.reserved')).toBe(true);
        expect(at(site, 'properties.serverFarmId')).toBe(plan.id);
        expect(site.kind).toBe('functionapp,linux');
      });

      it('runs Node 22 with the parameterised memory and scale-out, as its user-assigned identity', () => {
        const site = only(defaults(), 'Microsoft.Web/sites');
        const identityId = moduleOutput('identity', 'id');

        expect(at(site, 'properties.functionAppConfig.runtime')).toEqual({ name: 'node', version: '22' });
        expect(at(site, 'properties.functionAppConfig.scaleAndConcurrency')).toEqual({
          instanceMemoryMB: 2048,
          maximumInstanceCount: 100,
        });
        expect(at(site, 'identity.type')).toBe('UserAssigned');
        expect(Object.keys(at(site, 'identity.userAssignedIdentities') as object)).toEqual([
          expect.stringMatching(/outputs\.id\.value\)\]$/),
        ]);
        expect(
          String(
            at(
              site,
              'properties.functionAppConfig.deployment.storage.authentication.userAssignedIdentityResourceId',
            ),
          ),
        ).toMatch(identityId);
      });

      it('fetches its package from the deployment blob container with that identity', () => {
        const site = only(defaults(), 'Microsoft.Web/sites');
        const containers = resources(defaults(), 'Microsoft.Storage/storageAccounts/blobServices/containers');

        expect(at(site, 'properties.functionAppConfig.deployment.storage')).toMatchObject({
          type: 'blobContainer',
          authentication: { type: 'UserAssignedIdentity' },
        });
        expect(String(at(site, 'properties.functionAppConfig.deployment.storage.value'))).toMatch(
          moduleOutput('storage', 'deploymentContainerUrl'),
        );
        expect(containers.map((container) => at(container, 'properties.publicAccess'))).toEqual(['None']);
      });

      it('has exactly the identity-based settings of the contract', () => {
        const settings = appSettings(defaults());
        const clientId = moduleOutput('identity', 'clientId');

        expect(Object.keys(settings).sort()).toEqual(
          [
            'APPLICATIONINSIGHTS_AUTHENTICATION_STRING',
            'APPLICATIONINSIGHTS_CONNECTION_STRING',
            'AZURE_CLIENT_ID',
            'AzureWebJobsStorage__blobServiceUri',
            'AzureWebJobsStorage__clientId',
            'AzureWebJobsStorage__credential',
            'AzureWebJobsStorage__tableServiceUri',
            'COSMOS_CONTAINER',
            'COSMOS_DATABASE',
            'COSMOS_ENDPOINT',
            'INBOX_RESUBMIT_MARGIN',
            'INBOX_RETENTION',
            'PURGE_MAX_RU_PER_SECOND',
            'SERVICEBUS_LOCK_DURATION',
            'SERVICEBUS_MAX_DELIVERY_COUNT',
            'SERVICEBUS_MESSAGE_TTL',
            'ServiceBusConnection__clientId',
            'ServiceBusConnection__credential',
            'ServiceBusConnection__fullyQualifiedNamespace',
          ].sort(),
        );
        expect(settings).toMatchObject({
          ServiceBusConnection__credential: 'managedidentity',
          AzureWebJobsStorage__credential: 'managedidentity',
          INBOX_RESUBMIT_MARGIN: 'P7D',
          INBOX_RETENTION: 'P30D',
          PURGE_MAX_RU_PER_SECOND: '500',
          SERVICEBUS_LOCK_DURATION: 'PT1M',
          SERVICEBUS_MAX_DELIVERY_COUNT: '10',
          SERVICEBUS_MESSAGE_TTL: 'P14D',
        });
        for (const name of [
          'ServiceBusConnection__clientId',
          'AzureWebJobsStorage__clientId',
          'AZURE_CLIENT_ID',
        ]) {
          expect(settings[name]).toMatch(clientId);
        }
        expect(settings['APPLICATIONINSIGHTS_AUTHENTICATION_STRING']).toMatch(
          /^\[string\(format\('ClientId=\{0\};Authorization=AAD', reference\(.*'identity-\{0\}'.*\)\.outputs\.clientId\.value\)\)\]$/,
        );
        expect(settings['ServiceBusConnection__fullyQualifiedNamespace']).toMatch(
          moduleOutput('serviceBus', 'fullyQualifiedNamespace'),
        );
        expect(settings['AzureWebJobsStorage__blobServiceUri']).toMatch(
          moduleOutput('storage', 'blobEndpoint'),
        );
        expect(settings['AzureWebJobsStorage__tableServiceUri']).toMatch(
          moduleOutput('storage', 'tableEndpoint'),
        );
        expect(settings['COSMOS_ENDPOINT']).toMatch(moduleOutput('cosmos', 'endpoint'));
        expect(settings['COSMOS_DATABASE']).toMatch(moduleOutput('cosmos', 'databaseName'));
        expect(settings['COSMOS_CONTAINER']).toMatch(moduleOutput('cosmos', 'containerName'));
        expect(settings['APPLICATIONINSIGHTS_CONNECTION_STRING']).toMatch(
          moduleOutput('monitoring', 'connectionString'),
        );
      });

      it('gives the purge a tenth of what the container serves: 500 RU/s serverless, autoscale max / 10 provisioned, or the value set', () => {
        expect(appSettings(defaults())['PURGE_MAX_RU_PER_SECOND']).toBe('500');
        expect(appSettings(premiumProvisioned())['PURGE_MAX_RU_PER_SECOND']).toBe('400');
        expect(appSettings(purgeBudgetSet())['PURGE_MAX_RU_PER_SECOND']).toBe('250');
      });

      it('derives the Service Bus FQDN from the namespace endpoint, not from a hard-coded suffix', () => {
        const serviceBusModule = at(compiled().template, 'resources.serviceBus.properties.template');

        expect(at(serviceBusModule, 'resources.namespace.type')).toBe('Microsoft.ServiceBus/namespaces');
        expect(at(serviceBusModule, 'outputs.fullyQualifiedNamespace.value')).toBe(
          "[split(split(reference('namespace').serviceBusEndpoint, '/')[2], ':')[0]]",
        );
        expect(compiled().text).not.toContain('servicebus.windows.net');
      });

      it('has no setting whose value looks like a key, a SAS or a secret connection string', () => {
        for (const [name, value] of Object.entries(appSettings(defaults()))) {
          expect(`${name}=${value}`).not.toMatch(
            /AccountKey=|SharedAccessKey|SharedAccessSignature|[?&]sig=|Password=|listKeys/i,
          );
        }
      });
    });

    describe('alerts', () => {
      it('alerts on any dead-lettered message, per entity of the namespace', () => {
        const alert = resources(defaults(), 'Microsoft.Insights/metricAlerts').find((candidate) =>
          moduleOutput('serviceBus', 'id').test(String(at(candidate, 'properties.scopes.0'))),
        );

        expect(at(alert, 'properties.criteria.allOf')).toEqual([
          expect.objectContaining({
            metricNamespace: 'Microsoft.ServiceBus/namespaces',
            metricName: 'DeadletteredMessages',
            dimensions: [{ name: 'EntityName', operator: 'Include', values: ['*'] }],
            operator: 'GreaterThan',
            threshold: 0,
          }),
        ]);
      });

      it('alerts on failed function executions from Application Insights', () => {
        const alert = resources(defaults(), 'Microsoft.Insights/metricAlerts').find((candidate) =>
          moduleOutput('monitoring', 'applicationInsightsId').test(
            String(at(candidate, 'properties.scopes.0')),
          ),
        );

        expect(at(alert, 'properties.criteria.allOf')).toEqual([
          expect.objectContaining({
            metricNamespace: 'microsoft.insights/components',
            metricName: 'requests/failed',
            operator: 'GreaterThan',
            threshold: 5,
          }),
        ]);
      });

      it("alerts when a consumer's duplicate share of inbox.messages exceeds the threshold", () => {
        const rule = queryRule(defaults(), '-duplicate-share');
        const criterion = at(rule, 'properties.criteria.allOf.0') as Record<string, unknown>;
        const query = String(criterion['query']);

        expect(String(at(rule, 'properties.scopes.0'))).toMatch(
          moduleOutput('monitoring', 'applicationInsightsId'),
        );
        expect(query).toMatch(/^customMetrics\n\| where name == 'inbox\.messages'/);
        expect(query).toContain('tostring(customDimensions.outcome)');
        expect(query).toContain('tostring(customDimensions.consumer)');
        expect(query).toContain("outcome in ('duplicate', 'payload_mismatch')");
        expect(query).toContain('deliveries >= 20');
        expect(criterion).toMatchObject({
          metricMeasureColumn: 'duplicateSharePercent',
          operator: 'GreaterThan',
          threshold: 5,
          dimensions: [{ name: 'consumer', operator: 'Include', values: ['*'] }],
        });
        expect(at(rule, 'properties.windowSize')).toBe('PT1H');
      });

      it('alerts when an instance keeps its Cosmos DB circuit breaker open for 15 minutes (inbox.breaker_open)', () => {
        const rule = queryRule(defaults(), '-breaker-open');
        const criterion = at(rule, 'properties.criteria.allOf.0') as Record<string, unknown>;
        const query = String(criterion['query']);

        expect(String(at(rule, 'properties.scopes.0'))).toMatch(
          moduleOutput('monitoring', 'applicationInsightsId'),
        );
        // The app's own metric name, not a copy of it.
        expect(query).toContain(`where name == '${METRIC_NAMES.breakerOpen}'`);
        expect(query).toContain('min(valueMin)');
        expect(criterion).toMatchObject({
          metricMeasureColumn: 'minimumOpen',
          operator: 'GreaterThanOrEqual',
          threshold: 1,
          dimensions: [{ name: 'instance', operator: 'Include', values: ['*'] }],
        });
        expect(at(rule, 'properties.windowSize')).toBe('PT15M');
        expect(at(rule, 'properties.actions')).toEqual({ actionGroups: [] });
      });

      it('notifies nobody until an action group or an e-mail is given', () => {
        expect(resources(defaults(), 'Microsoft.Insights/actionGroups')).toEqual([]);
        for (const alert of resources(defaults(), 'Microsoft.Insights/metricAlerts')) {
          expect(at(alert, 'properties.actions')).toEqual([]);
        }
      });
    });

    describe('workbook', () => {
      it('deploys infra/workbook.json as a shared workbook opened on the Application Insights component', () => {
        const workbook = only(defaults(), 'Microsoft.Insights/workbooks');

        expect(workbook.kind).toBe('shared');
        expect(workbook.location).toBe(location);
        expect(workbook.tags?.['azd-env-name']).toBe(environmentName);
        expect(String(at(workbook, 'properties.sourceId'))).toMatch(
          moduleOutput('monitoring', 'applicationInsightsId'),
        );
        expect(at(workbook, 'properties.category')).toBe('workbook');
        expect(at(workbook, 'properties.serializedData')).toBe(
          readFileSync(path.join(infraDir, 'workbook.json'), 'utf8'),
        );
      });

      it('is named by a GUID of its resource group, so that a redeployment updates the same workbook', () => {
        const workbook = only(defaults(), 'Microsoft.Insights/workbooks');
        const resourceGroup = only(defaults(), 'Microsoft.Resources/resourceGroups');

        expect(workbook.name).toBe(armGuid(resourceGroup.id, 'inbox-workbook'));
        expect(workbook.id).toBe(
          `${resourceGroup.id}/providers/Microsoft.Insights/workbooks/${workbook.name}`,
        );
      });
    });

    it('grants the app only the roles above, each named guid(scope, principal, role)', () => {
      const assignments = appRoleAssignments(defaults());

      expect(assignments).toHaveLength(roleAssignments(defaults()).length);
      expect(assignments).toHaveLength(declaredSubscriptions.length + 3);
      for (const assignment of assignments) {
        const principal = String(at(assignment, 'properties.principalId'));
        const definition = String(at(assignment, 'properties.roleDefinitionId'));

        expect(assignment.name).toBe(
          `[guid('${roleAssignmentScope(assignment)}', ${principal.slice(1, -1)}, '${definition}')]`,
        );
      }
    });
  });

  describe('with Premium, provisioned Cosmos DB, exact scaling counts and notifications', () => {
    it('creates a Premium namespace of one messaging unit', () => {
      expect(only(premiumProvisioned(), 'Microsoft.ServiceBus/namespaces').sku).toEqual({
        name: 'Premium',
        tier: 'Premium',
        capacity: 1,
      });
    });

    it('drops the serverless capability and gives the container autoscale throughput', () => {
      const account = only(premiumProvisioned(), 'Microsoft.DocumentDB/databaseAccounts');
      const container = only(
        premiumProvisioned(),
        'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers',
      );

      expect(at(account, 'properties.capabilities')).toEqual([]);
      expect(at(container, 'properties.options')).toEqual({ autoscaleSettings: { maxThroughput: 4000 } });
    });

    it('adds Data Owner for the app on each subscription, still not on the namespace', () => {
      const owners = appRoleAssignments(premiumProvisioned()).filter(
        (assignment) =>
          at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataOwner),
      );

      expect(owners.map(roleAssignmentScope).sort()).toEqual(
        resources(premiumProvisioned(), 'Microsoft.ServiceBus/namespaces/topics/subscriptions')
          .map((subscription) => subscription.id)
          .sort(),
      );
    });

    it('sends every alert to the given action group and to one created for the e-mail address', () => {
      const group = only(premiumProvisioned(), 'Microsoft.Insights/actionGroups');
      const expected = [existingActionGroup, group.id];

      expect(at(group, 'properties.emailReceivers.0.emailAddress')).toBe('ops@example.com');
      for (const alert of resources(premiumProvisioned(), 'Microsoft.Insights/metricAlerts')) {
        expect(at(alert, 'properties.actions')).toEqual(expected.map((actionGroupId) => ({ actionGroupId })));
      }
      const rules = resources(premiumProvisioned(), 'Microsoft.Insights/scheduledQueryRules');
      expect(rules).toHaveLength(2);
      for (const rule of rules) {
        expect(at(rule, 'properties.actions')).toEqual({ actionGroups: expected });
      }
    });
  });

  describe('inbox retention bound', () => {
    // The app's own arithmetic (src/inbox/settings.ts): the Bicep and the app must agree on the bound.
    const durationSeconds = (duration: string): number => parseDurationSeconds(duration, 'duration');
    const bound = (
      lockDuration: string,
      maxDeliveryCount: number,
      messageTtl: string,
      margin: string,
    ): number =>
      retentionBoundSeconds({
        lockDurationSeconds: durationSeconds(lockDuration),
        maxDeliveryCount,
        messageTtlSeconds: durationSeconds(messageTtl),
        resubmitMarginSeconds: durationSeconds(margin),
      });

    it('computes lockDuration x maxDeliveryCount + message TTL + resubmit margin from main.parameters.json', () => {
      const parameters = azdParameters(compiled().template, azdEnvironment);
      const expected = bound(
        String(parameters['serviceBusLockDuration']),
        Number(parameters['serviceBusMaxDeliveryCount']),
        String(parameters['serviceBusMessageTtl']),
        String(parameters['inboxResubmitMargin']),
      );

      expect(defaults().outputs['INBOX_RETENTION_BOUND_SECONDS']).toBe(expected);
      expect(expected).toBe(60 * 10 + 14 * 86_400 + 7 * 86_400);
    });

    it('holds for the retention deployed by default', () => {
      const deployed = String(defaults().outputs['INBOX_RETENTION_DEPLOYED']);

      expect(durationSeconds(deployed)).toBeGreaterThan(
        Number(defaults().outputs['INBOX_RETENTION_BOUND_SECONDS']),
      );
      expect(appSettings(defaults())['INBOX_RETENTION']).toBe(deployed);
      expect(only(defaults(), 'Microsoft.Resources/resourceGroups').tags?.['inbox-retention']).toBe(deployed);
    });

    it('deploys settings the app accepts at start-up', () => {
      const settings = appSettings(defaults());

      const loaded = loadSettings({
        COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/',
        INBOX_RETENTION: String(settings['INBOX_RETENTION']),
        INBOX_RESUBMIT_MARGIN: String(settings['INBOX_RESUBMIT_MARGIN']),
        SERVICEBUS_LOCK_DURATION: String(settings['SERVICEBUS_LOCK_DURATION']),
        SERVICEBUS_MAX_DELIVERY_COUNT: String(settings['SERVICEBUS_MAX_DELIVERY_COUNT']),
        SERVICEBUS_MESSAGE_TTL: String(settings['SERVICEBUS_MESSAGE_TTL']),
        PURGE_MAX_RU_PER_SECOND: String(settings['PURGE_MAX_RU_PER_SECOND']),
      });

      expect(loaded.inbox.retentionSeconds).toBe(durationSeconds(String(settings['INBOX_RETENTION'])));
      expect(loaded.purge.maxRequestUnitsPerSecond).toBe(Number(settings['PURGE_MAX_RU_PER_SECOND']));
    });

    it('refuses a too-short INBOX_RETENTION set in the azd environment, saying why', () => {
      expect(refusal('tooShortFromAzdEnvironment')).toContain(
        'inboxRetention (INBOX_RETENTION) P7D = 604800 s is too short: it must exceed lockDuration x maxDeliveryCount + message TTL + resubmit margin = PT1M x 10 + P14D + P7D = 1815000 s',
      );
    });

    it('refuses a retention equal to the bound and accepts one a minute longer', () => {
      expect(refusal('equalToBound')).toContain(
        'inboxRetention (INBOX_RETENTION) P21DT10M = 1815000 s is too short',
      );
      expect(refusal('justAboveBound')).toBeUndefined();
      expect(appSettings(evaluated('justAboveBound'))['INBOX_RETENTION']).toBe('P21DT11M');
    });

    it('raises the default retention with the message TTL', () => {
      const { outputs } = evaluated('longerMessageTtl');
      const expectedBound = bound('PT1M', 10, 'P30D', 'P7D');
      const deployed = String(outputs['INBOX_RETENTION_DEPLOYED']);

      expect(outputs['INBOX_RETENTION_BOUND_SECONDS']).toBe(expectedBound);
      expect(deployed).toBe(`P${Math.floor(expectedBound / 86_400) + 1}D`);
      expect(durationSeconds(deployed)).toBeGreaterThan(expectedBound);
    });

    it('refuses durations in months or years, which have no fixed length', () => {
      expect(refusal('monthsInMessageTtl')).toContain(
        'P1M: write durations in weeks, days, hours, minutes or seconds (years and months have no fixed length)',
      );
    });

    it('refuses a lock duration above the Service Bus maximum of PT5M', () => {
      expect(refusal('lockLongerThanServiceBusAllows')).toContain(
        'serviceBusLockDuration (SERVICEBUS_LOCK_DURATION) PT6M is 360 s',
      );
    });
  });

  describe('modules/servicebus.bicep with other declarations', () => {
    it('keeps one $Default rule per subscription, a SQL filter when there are several subjects', () => {
      const rules = resources(
        evaluated('severalSubjects'),
        'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules',
      );

      expect(rules.map((rule) => [rule.name, rule.properties])).toEqual([
        [
          'sb-declarations/orders/audit/$Default',
          {
            filterType: 'SqlFilter',
            sqlFilter: { sqlExpression: "sys.Label IN ('OrderCreated', 'Order''s Note', 'OrderShipped')" },
          },
        ],
        [
          'sb-declarations/payments/ledger/$Default',
          { filterType: 'CorrelationFilter', correlationFilter: { label: 'PaymentReceived' } },
        ],
      ]);
    });

    it('puts each subscription under its own topic, and scopes its receiver role to it', () => {
      const subscriptions = resources(
        evaluated('severalSubjects'),
        'Microsoft.ServiceBus/namespaces/topics/subscriptions',
      );
      const receivers = roleAssignments(evaluated('severalSubjects'));

      expect(subscriptions.map((subscription) => subscription.name)).toEqual([
        'sb-declarations/orders/audit',
        'sb-declarations/payments/ledger',
      ]);
      expect(receivers.map(roleAssignmentScope)).toEqual(
        subscriptions.map((subscription) => subscription.id),
      );
      expect(receivers.map((receiver) => receiver.name)).toEqual(
        subscriptions.map((subscription) =>
          armGuid(subscription.id, developerId, roleDefinitionId(role.serviceBusDataReceiver)),
        ),
      );
    });

    it('refuses a subscription that declares no subject', () => {
      expect(refusal('noSubject')).toContain(
        'src/topology.json: subscription orders/nothing declares no subjects.',
      );
    });
  });
});
