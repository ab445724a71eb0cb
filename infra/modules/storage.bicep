// Storage for the Functions host (AzureWebJobsStorage) and the Flex Consumption deployment package.
// Shared keys are off: the host and the platform reach it with the app identity only.

import { azureRoles, developerPrincipal } from 'roles.bicep'
import { allLogsTo, diagnosticSettingName } from 'diagnostics.bicep'

@description('Name of the storage account (3-24 lowercase letters and digits).')
param name string

@description('Azure region.')
param location string

@description('Tags applied to the account.')
param tags object

@description('Blob container that holds the deployment package.')
param deploymentContainerName string

@description('Principal id of the app identity.')
param appPrincipalId string

@description('Developer (the deploying principal), who may read the deployment packages and nothing else.')
param developer developerPrincipal

@description('Public network access of the account: Enabled or Disabled.')
param publicNetworkAccess string

@description('Resource id of the Log Analytics workspace that receives the blob service\'s resource logs.')
param workspaceId string

@description('Zone-redundant storage (ZRS) instead of locally redundant (LRS).')
param zoneRedundant bool

resource account 'Microsoft.Storage/storageAccounts@2025-06-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: zoneRedundant ? 'Standard_ZRS' : 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2025-06-01' = {
  parent: account
  name: 'default'
}

// Reads, writes and deletes of blobs, the deployment packages included (StorageRead, StorageWrite,
// StorageDelete in the StorageBlobLogs table). The account itself has metrics only.
#disable-next-line use-recent-api-versions // see diagnostics.bicep
resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: diagnosticSettingName
  scope: blobService
  properties: allLogsTo(workspaceId)
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2025-06-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

var blobDataOwner = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', azureRoles.storageBlobDataOwner)
var blobDataReader = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', azureRoles.storageBlobDataReader)
var tableDataContributor = subscriptionResourceId(
  'Microsoft.Authorization/roleDefinitions',
  azureRoles.storageTableDataContributor
)

// Blob Data Owner is what the Functions host needs for its own storage: coordination blobs, the
// timer trigger's singleton lock, the key store; it also lets the platform read the deployment
// package. No queue role: nothing here uses queues (no blob trigger, no Durable Functions).
resource appOwnsBlobs 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, appPrincipalId, blobDataOwner)
  scope: account
  properties: {
    roleDefinitionId: blobDataOwner
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The host writes diagnostic events (start-up failures, misconfiguration) to table storage; without
// this role those events are lost and the host logs warnings instead.
resource appWritesDiagnosticEvents 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, appPrincipalId, tableDataContributor)
  scope: account
  properties: {
    roleDefinitionId: tableDataContributor
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Read only, and only the deployment container: whoever can write a package there runs code as the
// app, with all its data access. Reading is what the postprovision hook needs to tell when this
// deployment's role assignments are honoured by the blob service; it is created after the app's, so
// that by the time it works the app's very likely does too (Azure/azure-dev#8026).
resource developerReadsPackages 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(developer.id)) {
  name: guid(deploymentContainer.id, developer.id, blobDataReader)
  scope: deploymentContainer
  properties: {
    roleDefinitionId: blobDataReader
    principalId: developer.id
    principalType: developer.type
  }
  dependsOn: [
    appOwnsBlobs
  ]
}

output id string = account.id
output name string = account.name
output blobEndpoint string = account.properties.primaryEndpoints.blob
output tableEndpoint string = account.properties.primaryEndpoints.table
output deploymentContainerName string = deploymentContainer.name
output deploymentContainerUrl string = '${account.properties.primaryEndpoints.blob}${deploymentContainer.name}'
