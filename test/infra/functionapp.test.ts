// The function app and its storage: Flex Consumption's scale-out bound per function (1 to 1000,
// refused outside it when the template is evaluated, before anything is created; by default sized
// for the Cosmos DB container's throughput), no basic (user name and password)
// publishing credentials on its SCM and FTP endpoints, its runtime, package and identity-based
// settings, and a storage account that takes no shared key.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import {
  appRoleAssignments,
  appSettings,
  at,
  describeInfra,
  moduleOutput,
  only,
  premiumProvisionedVariant,
  resources,
  role,
  roleAssignmentScope,
  roleDefinitionId,
  type Snapshot,
} from '@idempotent-consumers/devkit/internal/testing/bicep';

describeInfra(
  'the function app',
  (azd) => ({
    premiumProvisioned: premiumProvisionedVariant(azd),
    purgeBudgetSet: { parameters: azd({ PURGE_MAX_RU_PER_SECOND: '250' }) },
    lowestMaximum: { parameters: { ...azd(), functionMaximumInstanceCount: 1 } },
    highestMaximumFromAzd: { parameters: azd({ FUNCTION_MAXIMUM_INSTANCE_COUNT: '1000' }) },
    aboveHighestMaximumFromAzd: { parameters: azd({ FUNCTION_MAXIMUM_INSTANCE_COUNT: '1001' }) },
    negativeMaximum: { parameters: { ...azd(), functionMaximumInstanceCount: -1 } },
    zoneRedundant: { parameters: azd({ ZONE_REDUNDANT: 'true' }) },
  }),
  ({ compiled, defaults, evaluated, refusal }) => {
    const premiumProvisioned = (): Snapshot => evaluated('premiumProvisioned');
    const purgeBudgetSet = (): Snapshot => evaluated('purgeBudgetSet');
    const maximumInstanceCount = (
      variant: 'defaults' | 'lowestMaximum' | 'highestMaximumFromAzd' | 'premiumProvisioned',
    ): unknown =>
      at(
        only(evaluated(variant), 'Microsoft.Web/sites'),
        'properties.functionAppConfig.scaleAndConcurrency.maximumInstanceCount',
      );

    describe('maximum instance count (per function scale group)', () => {
      it('defaults to one instance per 500 RU/s the container serves: 10 on Serverless, 8 at 4,000 RU/s autoscale', () => {
        expect(compiled().template.parameters['functionMaximumInstanceCount']).toMatchObject({
          type: 'int',
          defaultValue: 0,
          minValue: 0,
          maxValue: 1000,
        });
        expect(maximumInstanceCount('defaults')).toBe(10);
        expect(maximumInstanceCount('premiumProvisioned')).toBe(4000 / 500);
      });

      it('takes any value from 1, the lowest Flex Consumption accepts, to 1000, given as a parameter or in the azd environment', () => {
        expect(maximumInstanceCount('lowestMaximum')).toBe(1);
        expect(maximumInstanceCount('highestMaximumFromAzd')).toBe(1000);
      });

      it('refuses 1001 and a negative count when the template is evaluated, before anything is created', () => {
        expect(refusal('aboveHighestMaximumFromAzd')).toContain(
          'is too large to assign to a target for which the maximum allowable value is 1000',
        );
        expect(refusal('negativeMaximum')).toContain(
          'is too small to assign to a target for which the minimum allowable value is 0',
        );
      });

      it('is described as per function in the parameter the azd prompt shows', () => {
        expect(
          at(compiled().template.parameters, 'functionMaximumInstanceCount.metadata.description'),
        ).toContain('per function');
      });
    });

    it('denies every request to its main endpoint (no function is HTTP-triggered) and keeps the SCM endpoint, which azd deploys through, on its own rules', () => {
      const site = only(defaults(), 'Microsoft.Web/sites');
      const httpFunctions = readdirSync(path.join(PROJECT_ROOT, 'functions')).filter((file) =>
        /\bapp\.http\(/.test(readFileSync(path.join(PROJECT_ROOT, 'functions', file), 'utf8')),
      );

      expect(httpFunctions).toEqual([]);
      expect(at(site, 'properties.siteConfig')).toMatchObject({
        ipSecurityRestrictionsDefaultAction: 'Deny',
        scmIpSecurityRestrictionsUseMain: false,
        scmIpSecurityRestrictionsDefaultAction: 'Allow',
      });
      expect(at(site, 'properties.siteConfig.ipSecurityRestrictions')).toBeUndefined();
    });

    it('is zone redundant only when ZONE_REDUNDANT asks: the plan, its storage and the Cosmos DB account', () => {
      const zones = (from: Snapshot): unknown[] => [
        at(only(from, 'Microsoft.Web/serverfarms'), 'properties.zoneRedundant'),
        at(only(from, 'Microsoft.Storage/storageAccounts'), 'sku.name'),
        at(only(from, 'Microsoft.DocumentDB/databaseAccounts'), 'properties.locations.0.isZoneRedundant'),
      ];

      expect(zones(defaults())).toEqual([false, 'Standard_LRS', false]);
      expect(zones(evaluated('zoneRedundant'))).toEqual([true, 'Standard_ZRS', true]);
    });

    it('allows no basic-authentication publishing on its SCM (Kudu) and FTP endpoints', () => {
      const site = only(defaults(), 'Microsoft.Web/sites');
      const policies = resources(defaults(), 'Microsoft.Web/sites/basicPublishingCredentialsPolicies');

      expect(policies.map((policy) => [policy.name, policy.properties]).sort()).toEqual([
        [`${site.name}/ftp`, { allow: false }],
        [`${site.name}/scm`, { allow: false }],
      ]);
      expect(at(site, 'properties.siteConfig.ftpsState')).toBe('Disabled');
    });

    describe('with the defaults of main.parameters.json', () => {
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
            maximumInstanceCount: 10,
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
          const containers = resources(
            defaults(),
            'Microsoft.Storage/storageAccounts/blobServices/containers',
          );

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
              'COSMOS_LEASE_CONTAINER',
              'CosmosDBConnection__accountEndpoint',
              'CosmosDBConnection__clientId',
              'CosmosDBConnection__credential',
              'INBOX_RESUBMIT_MARGIN',
              'INBOX_RETENTION',
              'PURGE_MAX_RU_PER_SECOND',
              'SERVICEBUS_DUPLICATE_WINDOW',
              'SERVICEBUS_LOCK_DURATION',
              'SERVICEBUS_MAX_DELIVERY_COUNT',
              'SERVICEBUS_MESSAGE_TTL',
              'SERVICEBUS_RESOURCE_ID',
              'ServiceBusConnection__clientId',
              'ServiceBusConnection__credential',
              'ServiceBusConnection__fullyQualifiedNamespace',
            ].sort(),
          );
          expect(settings).toMatchObject({
            ServiceBusConnection__credential: 'managedidentity',
            AzureWebJobsStorage__credential: 'managedidentity',
            CosmosDBConnection__credential: 'managedidentity',
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
            'CosmosDBConnection__clientId',
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
          expect(settings['COSMOS_LEASE_CONTAINER']).toMatch(moduleOutput('cosmos', 'leaseContainerName'));
          expect(settings['CosmosDBConnection__accountEndpoint']).toMatch(moduleOutput('cosmos', 'endpoint'));
          expect(settings['APPLICATIONINSIGHTS_CONNECTION_STRING']).toMatch(
            moduleOutput('monitoring', 'connectionString'),
          );
        });

        it("gives the outbox relay's Cosmos DB trigger the lease container that the Bicep creates", () => {
          const cosmosModule = at(compiled().template, 'resources.cosmos.properties.template');

          expect(at(cosmosModule, 'outputs.leaseContainerName.value')).toBe(
            "[parameters('leaseContainerName')]",
          );
          expect(at(cosmosModule, 'resources.leaseContainer.name')).toBe(
            "[format('{0}/{1}/{2}', parameters('accountName'), parameters('databaseName'), parameters('leaseContainerName'))]",
          );
          expect(
            at(compiled().template, 'resources.cosmos.properties.parameters.leaseContainerName'),
          ).toEqual({
            value: "[parameters('cosmosLeaseContainerName')]",
          });
          expect(compiled().template.parameters['cosmosLeaseContainerName']).toMatchObject({
            type: 'string',
            defaultValue: 'leases',
          });
        });

        it("gives the app the topics' duplicate detection window as SERVICEBUS_DUPLICATE_WINDOW, from the one value both are set from", () => {
          const topics = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics');
          const serviceBusParameters = at(compiled().template, 'resources.serviceBus.properties.parameters');

          expect(topics.length).toBeGreaterThan(0);
          for (const topic of topics) {
            expect(at(topic, 'properties.duplicateDetectionHistoryTimeWindow')).toBe(
              appSettings(defaults())['SERVICEBUS_DUPLICATE_WINDOW'],
            );
          }
          expect(appSettings(defaults())['SERVICEBUS_DUPLICATE_WINDOW']).toBe('PT1H');
          expect(at(serviceBusParameters, 'duplicateDetectionWindow')).toEqual({
            value: "[variables('duplicateDetectionWindow')]",
          });
          expect(
            at(
              compiled().template,
              'resources.functionApp.properties.parameters.appSettings.value.SERVICEBUS_DUPLICATE_WINDOW',
            ),
          ).toBe("[variables('duplicateDetectionWindow')]");
        });

        it("gives the app its namespace's resource id (SERVICEBUS_RESOURCE_ID), where the drift guard reads the entities", () => {
          expect(appSettings(defaults())['SERVICEBUS_RESOURCE_ID']).toMatch(moduleOutput('serviceBus', 'id'));
          expect(appSettings(defaults())['AZURE_RESOURCE_MANAGER_ENDPOINT']).toBeUndefined();
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
    });
  },
);
