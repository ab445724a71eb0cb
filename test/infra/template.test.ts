// What infra/main.bicep offers and returns: its parameters (every name overridable, no Basic
// Service Bus), its outputs for azd (UPPER_SNAKE, no secret), and the azd tags on what it creates.

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import { describeInfra, environmentName, only } from '@idempotent-consumers/devkit/internal/testing/bicep';

describeInfra(
  'parameters, outputs and tags',
  (azd) => ({
    basicSku: { parameters: { ...azd(), serviceBusSku: 'Basic' } },
    regionWithoutFlexConsumption: { parameters: azd({ AZURE_LOCATION: 'westindia' }) },
  }),
  ({ compiled, defaults, refusal }) => {
    describe('the region (location)', () => {
      const allowed = (): unknown => compiled().template.parameters['location']?.allowedValues;

      it("offers only regions with Flex Consumption, as azd's location prompt lists them, sorted and without the canary region", () => {
        const regions = allowed() as string[];

        expect(regions.length).toBeGreaterThan(20);
        expect([...regions].sort()).toEqual(regions);
        expect(new Set(regions).size).toBe(regions.length);
        expect(regions).not.toContain('eastus2euap');
        expect(compiled().template.parameters['location']?.metadata).toMatchObject({
          azd: { type: 'location' },
        });
      });

      it('includes the region the README deploys to and the one these tests evaluate in', () => {
        const readme = readFileSync(path.join(PROJECT_ROOT, 'README.md'), 'utf8');
        const example = /azd env set AZURE_LOCATION (\S+)/.exec(readme)?.[1];

        expect(allowed()).toEqual(expect.arrayContaining([example, 'westeurope']));
      });

      it('refuses a region without Flex Consumption before anything is created', () => {
        expect(allowed()).not.toContain('westindia');
        expect(refusal('regionWithoutFlexConsumption')).toContain(
          `the provided value is of type "'westindia'"`,
        );
      });
    });

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
        const azureYaml = readFileSync(path.join(PROJECT_ROOT, 'azure.yaml'), 'utf8');
        const services = [...azureYaml.matchAll(/^services:\n((?: {2}.*\n|\n)*)/gm)].map((block) =>
          [...(block[1] ?? '').matchAll(/^ {2}([A-Za-z0-9-]+):/gm)].map((service) => service[1]),
        );

        expect(services).toEqual([[only(defaults(), 'Microsoft.Web/sites').tags?.['azd-service-name']]]);
        expect(azureYaml).toMatch(/^ {4}host: function$/m);
        expect(azureYaml).toMatch(/^ {4}language: ts$/m);
      });
    });
  },
);
