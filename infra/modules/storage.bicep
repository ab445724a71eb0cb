// Storage for the Functions host (AzureWebJobsStorage) and the Flex Consumption deployment package.
// Shared keys are off: the host and the platform reach it with the app identity only.

import { azureRoles, developerPrincipal } from 'roles.bicep'

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

@description('Developer who inspects blobs (deployment packages, timer locks) when running locally.')
param developer developerPrincipal

resource account 'Microsoft.Storage/storageAccounts@2025-06-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
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

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2025-06-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

var blobDataOwner = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', azureRoles.storageBlobDataOwner)
var blobDataContributor = subscriptionResourceId(
  'Microsoft.Authorization/roleDefinitions',
  azureRoles.storageBlobDataContributor
)
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

resource developerReadsBlobs 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(developer.id)) {
  name: guid(account.id, developer.id, blobDataContributor)
  scope: account
  properties: {
    roleDefinitionId: blobDataContributor
    principalId: developer.id
    principalType: developer.type
  }
}

output id string = account.id
output name string = account.name
output blobEndpoint string = account.properties.primaryEndpoints.blob
output tableEndpoint string = account.properties.primaryEndpoints.table
output deploymentContainerUrl string = '${account.properties.primaryEndpoints.blob}${deploymentContainer.name}'
