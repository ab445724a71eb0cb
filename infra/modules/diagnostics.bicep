// What every diagnostic setting of this template sends to the Log Analytics workspace, in one place.
// Resource logs only: platform metrics are kept by Azure Monitor without a diagnostic setting, and
// the alerts and the workbook read them there. `allLogs` takes whatever categories the resource type
// offers (they differ by tier, e.g. Service Bus runtime audit logs are Premium only).
// Category groups exist only in Microsoft.Insights/diagnosticSettings@2021-05-01-preview, the newest
// version; the linter's use-recent-api-versions would have the stable 2016-09-01, which has none, so
// each diagnostic setting disables that rule for its line.

@export()
@description('Properties of a diagnostic setting sending every resource log category to the workspace.')
func allLogsTo(workspaceId string) object => {
  workspaceId: workspaceId
  logs: [
    {
      categoryGroup: 'allLogs'
      enabled: true
    }
  ]
}

@export()
@description('The same, into resource-specific tables (for resource types that also offer the legacy AzureDiagnostics table).')
func allLogsToDedicatedTables(workspaceId string) object =>
  union(allLogsTo(workspaceId), {
    logAnalyticsDestinationType: 'Dedicated'
  })

@export()
@description('Name of every diagnostic setting this template creates (one per resource).')
var diagnosticSettingName = 'to-log-analytics'
