// Cosmos DB for NoSQL: the account, the database, the container that holds business documents, inbox
// markers and outbox documents side by side (a marker and the messages it publishes share their
// business document's partition so that all are written in one transactional batch), and the lease
// container of the outbox relay's change feed trigger. Keys are off: data access is Entra ID +
// data-plane RBAC only.

import { cosmosRoles, developerPrincipal } from 'roles.bicep'
import { allLogsToDedicatedTables, diagnosticSettingName } from 'diagnostics.bicep'

@description('Name of the Cosmos DB account.')
param accountName string

@description('Azure region.')
param location string

@description('Tags applied to the account.')
param tags object

@description('Name of the SQL database.')
param databaseName string

@description('Name of the container.')
param containerName string

@description('Name of the lease container of the outbox relay (the Cosmos DB trigger on the container).')
param leaseContainerName string

@description('Serverless (pay per request) or Provisioned (autoscale throughput on the container).')
@allowed([
  'Serverless'
  'Provisioned'
])
param capacityMode string

@description('Autoscale maximum RU/s of the container when capacityMode is Provisioned (1000 and up, in steps of 1000).')
@minValue(1000)
param autoscaleMaxThroughput int

@description('Continuous backup tier: Continuous7Days (no charge for the backup) or Continuous30Days (backup storage charged per GB).')
@allowed([
  'Continuous7Days'
  'Continuous30Days'
])
param continuousBackupTier string

@description('Spread the account\'s replicas over availability zones (only in regions that have them; fixed when the region is added).')
param zoneRedundant bool

@description('Principal id of the app identity.')
param appPrincipalId string

@description('Developer who reads and writes documents when running locally against Azure.')
param developer developerPrincipal

@description('Service principal of the CI live tests, which create, read and query items; empty for none.')
param testPrincipalId string

@description('Public network access of the account: Enabled or Disabled.')
param publicNetworkAccess string

@description('Resource id of the Log Analytics workspace that receives the account\'s resource logs.')
param workspaceId string

resource account 'Microsoft.DocumentDB/databaseAccounts@2025-10-15' = {
  name: accountName
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: zoneRedundant
      }
    ]
    // One write region: the inbox relies on a 409 inside one partition, which two write regions
    // could each accept for the same marker.
    enableMultipleWriteLocations: false
    // Point-in-time restore to any second of the last 7 (or 30) days, to a new account or deleted
    // containers into this one; periodic backup restores only through a support request.
    backupPolicy: {
      type: 'Continuous'
      continuousModeProperties: {
        tier: continuousBackupTier
      }
    }
    capabilities: capacityMode == 'Serverless'
      ? [
          {
            name: 'EnableServerless'
          }
        ]
      : []
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: publicNetworkAccess
  }
}

// Every data-plane request is logged (DataPlaneRequests), as are control-plane changes such as the
// indexing policy and role assignments (ControlPlaneRequests).
#disable-next-line use-recent-api-versions // see diagnostics.bicep
resource accountDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: diagnosticSettingName
  scope: account
  properties: allLogsToDedicatedTables(workspaceId)
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2025-10-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
  }
}

resource container 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2025-10-15' = {
  parent: database
  name: containerName
  properties: {
    resource: {
      id: containerName
      partitionKey: {
        paths: [
          '/partitionKey'
        ]
        kind: 'Hash'
        version: 2
      }
      // -1: TTL is on, but nothing expires unless it carries its own `ttl` (inbox markers may).
      defaultTtl: -1
      // Every access but a few is a point read or a transactional batch, which need no index. The
      // queries are the marker purge (packages/inbox/src/purge.ts):
      //   SELECT TOP @limit c.id, c.partitionKey, c.expiresAtEpochSeconds, c._etag FROM c
      //   WHERE c.type = @type AND c.expiresAtEpochSeconds <= @now
      // and the outbox sweeper's (packages/inbox/src/relay.ts: the pending count, the oldest, the ones due,
      // and the count of those set aside as unsendable):
      //   ... FROM c WHERE c.type = 'outbox' AND c.pendingSinceEpochSeconds <= @cutoff
      //       [AND NOT (c.topic IN (...))]   once a topic has failed in the run
      //   ... FROM c WHERE c.type = 'outbox' AND c.unsendableSinceEpochSeconds <= @cutoff
      // so only their filter paths are indexed and everything else is excluded, which makes every
      // write in every batch cheaper. Each composite index serves one query's equality on type and
      // its range in one index lookup (equality first, range last), which lowers its request charge.
      // pendingSinceEpochSeconds exists only while an outbox document is pending, and
      // unsendableSinceEpochSeconds only while one is set aside, so their indexes hold those only.
      // A new query must add its paths here, or it scans.
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: [
          {
            path: '/type/?'
          }
          {
            path: '/expiresAtEpochSeconds/?'
          }
          {
            path: '/pendingSinceEpochSeconds/?'
          }
          {
            path: '/unsendableSinceEpochSeconds/?'
          }
          {
            path: '/topic/?'
          }
        ]
        excludedPaths: [
          {
            path: '/*'
          }
        ]
        compositeIndexes: [
          [
            {
              path: '/type'
              order: 'ascending'
            }
            {
              path: '/expiresAtEpochSeconds'
              order: 'ascending'
            }
          ]
          [
            {
              path: '/type'
              order: 'ascending'
            }
            {
              path: '/pendingSinceEpochSeconds'
              order: 'ascending'
            }
          ]
          [
            {
              path: '/type'
              order: 'ascending'
            }
            {
              path: '/unsendableSinceEpochSeconds'
              order: 'ascending'
            }
          ]
        ]
      }
    }
    options: capacityMode == 'Provisioned'
      ? {
          autoscaleSettings: {
            maxThroughput: autoscaleMaxThroughput
          }
        }
      : {}
  }
}

// The outbox relay's Cosmos DB trigger keeps one lease document per range of the container's change
// feed here, with its continuation (checkpoint); its id is the partition key, as the trigger
// requires. The trigger is told not to create it (createLeaseContainerIfNotExists: false): creating a
// container is a control-plane operation, which the app's data-plane role does not grant. The
// trigger's lease reads, queries and renewals are small; on Provisioned it has the smallest
// autoscale throughput (100 to 1,000 RU/s) of its own, so that it never competes with the consumers.
resource leaseContainer 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2025-10-15' = {
  parent: database
  name: leaseContainerName
  properties: {
    resource: {
      id: leaseContainerName
      partitionKey: {
        paths: [
          '/id'
        ]
        kind: 'Hash'
        version: 2
      }
    }
    options: capacityMode == 'Provisioned'
      ? {
          autoscaleSettings: {
            maxThroughput: 1000
          }
        }
      : {}
  }
}

var dataContributor = '${account.id}/sqlRoleDefinitions/${cosmosRoles.builtInDataContributor}'
// Data-plane role assignments are scoped to the database: the app can read and write the items of
// this database's containers (the app's container and the relay's leases, which the trigger reads,
// creates and renews), and nothing else in the account.
var databaseScope = '${account.id}/dbs/${database.name}'

resource appDataContributor 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2025-10-15' = {
  parent: account
  name: guid(databaseScope, appPrincipalId, dataContributor)
  properties: {
    roleDefinitionId: dataContributor
    principalId: appPrincipalId
    scope: databaseScope
  }
}

resource developerDataContributor 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2025-10-15' = if (!empty(developer.id)) {
  parent: account
  name: guid(databaseScope, developer.id, dataContributor)
  properties: {
    roleDefinitionId: dataContributor
    principalId: developer.id
    scope: databaseScope
  }
}

// The live tests create a test invoice, read it back and query its inbox markers: a custom role of
// exactly those data actions, on the container only, so that they cannot replace or delete anything.
var containerScope = '${databaseScope}/colls/${container.name}'

resource liveTestRole 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions@2025-10-15' = if (!empty(testPrincipalId)) {
  parent: account
  name: guid(containerScope, 'live-tests')
  properties: {
    roleName: 'Live tests: create, read and query items of ${databaseName}/${containerName}'
    type: 'CustomRole'
    assignableScopes: [
      containerScope
    ]
    permissions: [
      {
        dataActions: [
          'Microsoft.DocumentDB/databaseAccounts/readMetadata'
          'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/create'
          'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/read'
          'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/executeQuery'
        ]
      }
    ]
  }
}

resource liveTestAssignment 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2025-10-15' = if (!empty(testPrincipalId)) {
  parent: account
  name: guid(containerScope, testPrincipalId, liveTestRole.id)
  properties: {
    roleDefinitionId: liveTestRole.id
    principalId: testPrincipalId
    scope: containerScope
  }
}

output id string = account.id
output name string = account.name
output endpoint string = account.properties.documentEndpoint
output databaseName string = database.name
output containerName string = container.name
output leaseContainerName string = leaseContainer.name
