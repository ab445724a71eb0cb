// Logs: the Log Analytics workspace accepts only Entra ID (local auth off), and the Service Bus
// namespace, the Cosmos DB account, the function app and the storage account's blob service send
// every resource log category to it. Whether a category exists for a resource is Azure's to say;
// `allLogs` takes whatever it offers.

import {
  at,
  describeInfra,
  moduleOutput,
  only,
  type PredictedResource,
  resources,
} from '@idempotent-consumers/devkit/internal/testing/bicep';

describeInfra(
  'logs',
  () => ({}),
  ({ compiled, defaults }) => {
    const settingOf = (target: PredictedResource): PredictedResource | undefined =>
      resources(defaults(), 'Microsoft.Insights/diagnosticSettings').find(
        (setting) =>
          setting.id === `${target.id}/providers/Microsoft.Insights/diagnosticSettings/to-log-analytics`,
      );

    it('go to a Log Analytics workspace that refuses local (shared key) authentication', () => {
      const workspace = only(defaults(), 'Microsoft.OperationalInsights/workspaces');

      expect(at(workspace, 'properties.features')).toEqual({ disableLocalAuth: true });
      expect(
        at(compiled().template, 'resources.monitoring.properties.template.outputs.workspaceId.value'),
      ).toBe("[resourceId('Microsoft.OperationalInsights/workspaces', parameters('logAnalyticsName'))]");
    });

    it('are sent by Service Bus, Cosmos DB, the function app and blob storage: every category, to that workspace', () => {
      const targets = [
        only(defaults(), 'Microsoft.ServiceBus/namespaces'),
        only(defaults(), 'Microsoft.DocumentDB/databaseAccounts'),
        only(defaults(), 'Microsoft.Web/sites'),
        only(defaults(), 'Microsoft.Storage/storageAccounts/blobServices'),
      ];

      expect(resources(defaults(), 'Microsoft.Insights/diagnosticSettings')).toHaveLength(targets.length);
      for (const target of targets) {
        const setting = settingOf(target);

        expect({ target: target.type, logs: at(setting, 'properties.logs') }).toEqual({
          target: target.type,
          logs: [{ categoryGroup: 'allLogs', enabled: true }],
        });
        expect(String(at(setting, 'properties.workspaceId'))).toMatch(
          moduleOutput('monitoring', 'workspaceId'),
        );
        expect(at(setting, 'properties.metrics')).toBeUndefined();
      }
    });

    it('land in resource-specific tables where Service Bus and Cosmos DB also offer the legacy AzureDiagnostics table', () => {
      const destination = (type: string): unknown =>
        at(settingOf(only(defaults(), type)), 'properties.logAnalyticsDestinationType');

      expect(destination('Microsoft.ServiceBus/namespaces')).toBe('Dedicated');
      expect(destination('Microsoft.DocumentDB/databaseAccounts')).toBe('Dedicated');
      expect(destination('Microsoft.Web/sites')).toBeUndefined();
      expect(destination('Microsoft.Storage/storageAccounts/blobServices')).toBeUndefined();
    });
  },
);
