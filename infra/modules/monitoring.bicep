// Log Analytics workspace and workspace-based Application Insights. Local authentication is disabled
// on both: only telemetry sent with a Microsoft Entra token that holds Monitoring Metrics Publisher on
// the component is ingested, and the workspace answers queries and ingestion only with Entra tokens
// (no workspace keys, no agents authenticating with its shared key).

import { azureRoles, developerPrincipal } from 'roles.bicep'

@description('Name of the Log Analytics workspace.')
param logAnalyticsName string

@description('Name of the Application Insights component.')
param applicationInsightsName string

@description('Azure region.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Days of log retention in the workspace.')
param retentionInDays int

@description('Daily ingestion cap of the workspace in GB; 0 for none. Past it, the workspace drops the day\'s further telemetry until the next reset.')
@minValue(0)
param dailyCapGb int

@description('Principal id of the app identity (Monitoring Metrics Publisher).')
param appPrincipalId string

@description('Developer who also publishes telemetry when running locally against Azure.')
param developer developerPrincipal

resource workspace 'Microsoft.OperationalInsights/workspaces@2025-02-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
    workspaceCapping: {
      dailyQuotaGb: dailyCapGb > 0 ? dailyCapGb : -1
    }
    features: {
      disableLocalAuth: true
    }
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

var metricsPublisher = subscriptionResourceId(
  'Microsoft.Authorization/roleDefinitions',
  azureRoles.monitoringMetricsPublisher
)

resource appPublishes 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, appPrincipalId, metricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: metricsPublisher
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource developerPublishes 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(developer.id)) {
  name: guid(applicationInsights.id, developer.id, metricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: metricsPublisher
    principalId: developer.id
    principalType: developer.type
  }
}

output workspaceId string = workspace.id
output applicationInsightsId string = applicationInsights.id
output applicationInsightsName string = applicationInsights.name
// An ingestion endpoint plus the component's instrumentation key: with local auth disabled it
// authorizes nothing by itself (ingestion needs an Entra token), so it is configuration, not a secret.
output connectionString string = applicationInsights.properties.ConnectionString
