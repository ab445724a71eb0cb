// The function app on a Flex Consumption plan, running as the user-assigned identity. Every
// connection is identity-based: there is no key, SAS or secret-bearing connection string in its
// settings, and the deployment package is fetched with the same identity. No basic (user name and
// password) publishing credentials: azd deploys with an Entra ID token.

import { allLogsTo, diagnosticSettingName } from 'diagnostics.bicep'

@description('Name of the Flex Consumption plan.')
param planName string

@description('Name of the function app.')
param name string

@description('Azure region.')
param location string

@description('Tags applied to the plan and the app (the app also gets azd-service-name).')
param tags object

@description('azd service name from azure.yaml, written to the app\'s azd-service-name tag.')
param serviceName string

@description('Resource id of the user-assigned identity the app runs as.')
param identityId string

@description('Client id of that identity.')
param identityClientId string

@description('Blob endpoint of the host storage account (https://<account>.blob.<suffix>/).')
param storageBlobEndpoint string

@description('Table endpoint of the host storage account, for the host\'s diagnostic events.')
param storageTableEndpoint string

@description('URL of the blob container that holds the deployment package.')
param deploymentContainerUrl string

@description('Application Insights connection string (an ingestion endpoint; not a credential once local auth is off).')
param applicationInsightsConnectionString string

@description('Node.js version of the Flex Consumption runtime.')
param nodeVersion string

@description('Memory of each instance, in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int

@description('Upper bound of scale-out of each per-function scale group (each non-HTTP function scales on its own instances); Flex Consumption accepts 1 to 1000.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int

@description('Public network access of the app (its SCM endpoint, which azd deploys through, included): Enabled or Disabled.')
param publicNetworkAccess string

@description('Resource id of the Log Analytics workspace that receives the app\'s resource logs.')
param workspaceId string

@description('The app\'s own settings (the contract with the code: Service Bus, Cosmos DB, inbox).')
param appSettings object

@description('Spread the plan\'s instances over availability zones (Flex Consumption, in regions that support it).')
param zoneRedundant bool

// Host storage over the identity: one URI per service the host uses (blobs for coordination, timer
// locks and keys; tables for diagnostic events), plus which credential to use.
var platformSettings = {
  AzureWebJobsStorage__blobServiceUri: storageBlobEndpoint
  AzureWebJobsStorage__tableServiceUri: storageTableEndpoint
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId
  APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
  // DefaultAzureCredential in the app code (Cosmos DB) picks the user-assigned identity by this.
  AZURE_CLIENT_ID: identityClientId
}

resource plan 'Microsoft.Web/serverfarms@2025-03-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
    zoneRedundant: zoneRedundant
  }
}

resource site 'Microsoft.Web/sites@2025-03-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': serviceName })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    publicNetworkAccess: publicNetworkAccess
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      // No function is HTTP-triggered, so the app's main endpoint serves nobody: deny it all (403).
      // The SCM endpoint keeps its own rules, which allow: azd deploys through it, with a token.
      ipSecurityRestrictionsDefaultAction: 'Deny'
      scmIpSecurityRestrictionsUseMain: false
      scmIpSecurityRestrictionsDefaultAction: 'Allow'
      appSettings: map(items(union(appSettings, platformSettings)), setting => {
        name: setting.key
        value: string(setting.value)
      })
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      runtime: {
        name: 'node'
        version: nodeVersion
      }
    }
  }
}

// Basic authentication to the SCM (Kudu) and FTP endpoints: off. Deployments and the SCM site then
// need an Entra ID token with rights on the app, which is what azd uses.
resource scmBasicAuth 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2025-03-01' = {
  parent: site
  name: 'scm'
  properties: {
    allow: false
  }
}

resource ftpBasicAuth 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2025-03-01' = {
  parent: site
  name: 'ftp'
  properties: {
    allow: false
  }
}

// FunctionAppLogs: the host's and the functions' logs, also when Application Insights is unreachable.
#disable-next-line use-recent-api-versions // see diagnostics.bicep
resource siteDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: diagnosticSettingName
  scope: site
  properties: allLogsTo(workspaceId)
}

output id string = site.id
output name string = site.name
output defaultHostName string = site.properties.defaultHostName
