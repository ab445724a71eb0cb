// Everything `azd up` provisions for the idempotent Service Bus consumers: a resource group with
// Service Bus (topics and subscriptions from src/topology.json), Cosmos DB, the function app on Flex
// Consumption with its storage and user-assigned identity, Application Insights and alerts.
// Identity-only: no key, SAS or secret-bearing connection string is created, read or output.
targetScope = 'subscription'

import { developerPrincipal } from 'modules/roles.bicep'

// ---------------------------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------------------------

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; part of every generated name and the azd-env-name tag.')
param environmentName string

@minLength(1)
@description('Azure region of every resource. Only regions with Flex Consumption are offered, so that a region without it is refused before anything is created.')
// The regions with Flex Consumption, as the Azure-Samples Flex Consumption quickstart templates list
// them (without the canary region). Refresh: az functionapp list-flexconsumption-locations --query "[].name" -o tsv
// (infra/README.md, "Regions").
@allowed([
  'australiaeast'
  'australiasoutheast'
  'brazilsouth'
  'canadacentral'
  'centralindia'
  'centralus'
  'eastasia'
  'eastus'
  'eastus2'
  'francecentral'
  'germanywestcentral'
  'italynorth'
  'japaneast'
  'koreacentral'
  'northcentralus'
  'northeurope'
  'norwayeast'
  'southafricanorth'
  'southcentralus'
  'southeastasia'
  'southindia'
  'spaincentral'
  'swedencentral'
  'uaenorth'
  'uksouth'
  'ukwest'
  'westcentralus'
  'westeurope'
  'westus'
  'westus2'
  'westus3'
])
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Object id of the deploying user or service principal (azd passes the signed-in one), granted the developer roles when grantDeveloperRoles is on; empty for none.')
param principalId string = ''

@description('Grant principalId the developer roles: sending to and receiving from every topic (test messages, the dead-letter tool), data access to the Cosmos DB database (local runs against Azure) and read access to the deployment container (the postprovision hook\'s check). On for development; turn it off (GRANT_DEVELOPER_ROLES=false) for production and for a CI principal from `azd pipeline config`, which should not take live messages meant for the consumers.')
param grantDeveloperRoles bool = true

@description('Type of principalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param principalType string = 'User'

@description('Object id of the service principal the CI live tests (sample/liveTests.ts) sign in as, granted only what they use: sending to the topics and creating, reading and querying items in the container; empty for none.')
param testPrincipalId string = ''

// ---------------------------------------------------------------------------------------------
// Names (empty = generated from the abbreviation and the resource token)
// ---------------------------------------------------------------------------------------------

param resourceGroupName string = ''
param identityName string = ''
param logAnalyticsName string = ''
param applicationInsightsName string = ''
param serviceBusNamespaceName string = ''
param cosmosAccountName string = ''
param storageAccountName string = ''
param functionPlanName string = ''
param functionAppName string = ''

// ---------------------------------------------------------------------------------------------
// Messaging and the inbox retention bound
// ---------------------------------------------------------------------------------------------

@description('Service Bus tier. Basic is not offered: it has no topics and no duplicate detection.')
@allowed([
  'Standard'
  'Premium'
])
param serviceBusSku string = 'Standard'

@description('Peek-lock duration of every subscription (ISO-8601, PT5S to PT5M).')
param serviceBusLockDuration string = 'PT1M'

@description('Deliveries before a message is dead-lettered.')
@minValue(1)
@maxValue(2000)
param serviceBusMaxDeliveryCount int = 10

@description('Default time to live of messages in every subscription (ISO-8601).')
param serviceBusMessageTtl string = 'P14D'

@description('How long after dead-lettering an operator may still resubmit a message (ISO-8601).')
param inboxResubmitMargin string = 'P7D'

@description('How long inbox markers are kept (ISO-8601). Empty: the larger of P30D and the bound rounded up to whole days. Must exceed lockDuration x maxDeliveryCount + message TTL + resubmit margin.')
param inboxRetention string = ''

@description('Also grant the app Azure Service Bus Data Owner on each of its subscriptions, so that scaling reads exact message counts instead of estimating them by peeking. Off: least privilege.')
param serviceBusDataOwnerForScaling bool = false

// ---------------------------------------------------------------------------------------------
// Cosmos DB
// ---------------------------------------------------------------------------------------------

param cosmosDatabaseName string = 'app'
param cosmosContainerName string = 'state'

@description('Lease container of the outbox relay\'s Cosmos DB trigger (COSMOS_LEASE_CONTAINER), partitioned on /id.')
param cosmosLeaseContainerName string = 'leases'

@description('Serverless (pay per request) or Provisioned (autoscale).')
@allowed([
  'Serverless'
  'Provisioned'
])
param cosmosCapacityMode string = 'Serverless'

@description('Cosmos DB continuous backup tier (point-in-time restore): Continuous7Days, free, or Continuous30Days, whose backup storage is charged per GB.')
@allowed([
  'Continuous7Days'
  'Continuous30Days'
])
param cosmosContinuousBackupTier string = 'Continuous7Days'

@description('Autoscale maximum RU/s of the container when cosmosCapacityMode is Provisioned.')
@minValue(1000)
param cosmosAutoscaleMaxThroughput int = 1000

@description('Request units per second one purge run spends on average at most (PURGE_MAX_RU_PER_SECOND). 0: a tenth of what the container can serve: 500 on Serverless (5,000 RU/s per container), the autoscale maximum / 10 on Provisioned (the autoscale floor, so the purge alone never scales the container up).')
@minValue(0)
param purgeMaxRuPerSecond int = 0

// What the container serves at most: a serverless container up to 5,000 RU/s, a provisioned one its
// autoscale maximum.
var containerMaxRuPerSecond = cosmosCapacityMode == 'Serverless' ? 5000 : cosmosAutoscaleMaxThroughput
var derivedPurgeMaxRuPerSecond = containerMaxRuPerSecond / 10

// ---------------------------------------------------------------------------------------------
// Function app
// ---------------------------------------------------------------------------------------------

@description('Memory of each Flex Consumption instance, in MB.')
@allowed([
  512
  2048
  4096
])
param functionInstanceMemoryMB int = 2048

@description('Upper bound of Flex Consumption scale-out, per function: each Service Bus consumer, the outbox relay and each timer scale on their own instances, each group up to this count (1 to 1000). 0: one instance per 500 RU/s the container serves: 10 on Serverless (5,000 RU/s), the autoscale maximum / 500 on Provisioned.')
@minValue(0)
@maxValue(1000)
param functionMaximumInstanceCount int = 0

// One instance per 500 RU/s: an instance runs up to 16 deliveries at a time (host.json
// maxConcurrentCalls) and a delivery costs tens of RU, so a busy instance alone asks for hundreds of
// RU/s. Instances beyond what the container serves buy only 429s and GB-seconds.
var derivedMaximumInstanceCount = min(1000, max(1, containerMaxRuPerSecond / 500))

// ---------------------------------------------------------------------------------------------
// Availability
// ---------------------------------------------------------------------------------------------

@description('Spread Cosmos DB, the host storage and the function app\'s instances over availability zones (ZONE_REDUNDANT). Off by default (cheaper, and not every region has zones); turn it on for production in a region with zones, before the first provision: Cosmos DB fixes it when the region is added.')
param zoneRedundant bool = false

// ---------------------------------------------------------------------------------------------
// Network
// ---------------------------------------------------------------------------------------------

@description('Public network access of Service Bus, Cosmos DB, storage and the function app. Enabled: without virtual network integration and private endpoints, which this template does not create, the app reaches its services and azd deploys it over public endpoints (every request still needs an Entra ID token). Disabled is for a network you add around it.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string = 'Enabled'

// ---------------------------------------------------------------------------------------------
// Monitoring and alerts
// ---------------------------------------------------------------------------------------------

@description('Days of log retention in the Log Analytics workspace.')
@minValue(30)
@maxValue(730)
param logRetentionInDays int = 30

@description('Daily cap on Log Analytics ingestion in GB (LOG_DAILY_CAP_GB); 0 for none, the default. A cap bounds the monitoring bill, but past it the day\'s further logs and telemetry are dropped, alerts included, until the daily reset.')
@minValue(0)
param logDailyCapGb int = 0

@description('Resource id of an existing action group that the alerts notify; empty for none.')
param actionGroupId string = ''

@description('E-mail address for an action group created here; empty for none.')
param alertEmail string = ''

@description('Failed function executions within 15 minutes above which to alert.')
@minValue(0)
param functionFailureThreshold int = 5

@description('Share of a consumer\'s deliveries that are duplicates, in percent, above which to alert.')
@minValue(0)
@maxValue(100)
param duplicateShareThresholdPercent int = 5

@description('Window over which the duplicate share is computed (ISO-8601).')
param duplicateShareWindow string = 'PT1H'

@description('Deliveries a consumer needs in the window before its duplicate share is judged.')
@minValue(1)
param duplicateShareMinDeliveries int = 20

@description('Age of the oldest pending outbox message (ISO-8601) above which to alert. Default: three times the sweeper\'s OUTBOX_SWEEP_AGE (PT5M): a message that neither the relay nor ten minutes of sweeper runs could send.')
param outboxPendingAgeThreshold string = 'PT15M'

// ---------------------------------------------------------------------------------------------
// Derived values
// ---------------------------------------------------------------------------------------------

var abbrs = loadJsonContent('abbreviations.json')
var topology = loadJsonContent('../src/topology.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
var serviceName = 'consumers'
var developer developerPrincipal = {
  id: grantDeveloperRoles ? principalId : ''
  type: principalType
}

// Set by the design, not a knob: the broker drops a repeated send of a MessageId within an hour. The
// topics get it, and so does the app (SERVICEBUS_DUPLICATE_WINDOW), which refuses to start when its
// sweeper could resend after the broker has forgotten a MessageId.
var duplicateDetectionWindow = 'PT1H'

// ISO-8601 durations in seconds, by adding them to a fixed instant. Years and months are refused:
// they have no fixed length, and the app refuses them too.
func durationSeconds(duration string) int =>
  contains(split(duration, 'T')[0], 'Y') || contains(split(duration, 'T')[0], 'M')
    ? fail('${duration}: write durations in weeks, days, hours, minutes or seconds (years and months have no fixed length)')
    : dateTimeToEpoch(dateTimeAdd('2000-01-01T00:00:00Z', duration)) - dateTimeToEpoch('2000-01-01T00:00:00Z')

var lockSeconds = durationSeconds(serviceBusLockDuration)
var lockDuration = lockSeconds >= 5 && lockSeconds <= 300
  ? serviceBusLockDuration
  : fail('serviceBusLockDuration (SERVICEBUS_LOCK_DURATION) ${serviceBusLockDuration} is ${lockSeconds} s; Service Bus allows 5 s to 300 s (PT5M)')

// A message can come back to a consumer for lockDuration x maxDeliveryCount (redeliveries), then
// stay in the subscription until its TTL, then be resubmitted from the dead-letter queue within the
// margin. An inbox marker that expires before all of that lets the message be processed twice.
var retentionBoundSeconds = lockSeconds * serviceBusMaxDeliveryCount + durationSeconds(serviceBusMessageTtl) + durationSeconds(inboxResubmitMargin)
var defaultRetention = 'P${max(30, retentionBoundSeconds / 86400 + 1)}D'
var requestedRetention = empty(inboxRetention) ? defaultRetention : inboxRetention
var retentionSeconds = durationSeconds(requestedRetention)
var checkedRetention = retentionSeconds > retentionBoundSeconds
  ? requestedRetention
  : fail('inboxRetention (INBOX_RETENTION) ${requestedRetention} = ${retentionSeconds} s is too short: it must exceed lockDuration x maxDeliveryCount + message TTL + resubmit margin = ${serviceBusLockDuration} x ${serviceBusMaxDeliveryCount} + ${serviceBusMessageTtl} + ${inboxResubmitMargin} = ${retentionBoundSeconds} s, or a redelivered or resubmitted message can outlive its inbox marker and be processed twice')

var names = {
  resourceGroup: !empty(resourceGroupName) ? resourceGroupName : '${abbrs.resourcesResourceGroups}${environmentName}'
  identity: !empty(identityName) ? identityName : '${abbrs.managedIdentityUserAssignedIdentities}${resourceToken}'
  logAnalytics: !empty(logAnalyticsName) ? logAnalyticsName : '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
  applicationInsights: !empty(applicationInsightsName)
    ? applicationInsightsName
    : '${abbrs.insightsComponents}${resourceToken}'
  serviceBus: !empty(serviceBusNamespaceName)
    ? serviceBusNamespaceName
    : '${abbrs.serviceBusNamespaces}${resourceToken}'
  cosmos: !empty(cosmosAccountName) ? cosmosAccountName : '${abbrs.documentDBDatabaseAccounts}${resourceToken}'
  storage: !empty(storageAccountName) ? storageAccountName : '${abbrs.storageStorageAccounts}${resourceToken}'
  plan: !empty(functionPlanName) ? functionPlanName : '${abbrs.webServerFarms}${resourceToken}'
  functionApp: !empty(functionAppName) ? functionAppName : '${abbrs.webSitesFunctions}${resourceToken}'
}
// A Standard namespace has no private endpoints: with public access off nothing could reach it.
var serviceBusPublicNetworkAccess = publicNetworkAccess == 'Disabled' && serviceBusSku != 'Premium'
  ? fail('publicNetworkAccess (PUBLIC_NETWORK_ACCESS) Disabled needs serviceBusSku (SERVICEBUS_SKU) Premium: a ${serviceBusSku} namespace has no private endpoints, so nothing could reach it')
  : publicNetworkAccess
var deploymentContainerName = 'app-package-${take(toLower(names.functionApp), 32)}-${take(resourceToken, 7)}'

// ---------------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------------

// The first thing created, and it carries the checked retention: a too-short retention fails the
// deployment before any resource exists.
resource rg 'Microsoft.Resources/resourceGroups@2025-04-01' = {
  name: names.resourceGroup
  location: location
  tags: union(tags, {
    'inbox-retention': checkedRetention
  })
}

module identity 'modules/identity.bicep' = {
  scope: rg
  params: {
    name: names.identity
    location: location
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  scope: rg
  params: {
    logAnalyticsName: names.logAnalytics
    applicationInsightsName: names.applicationInsights
    location: location
    tags: tags
    retentionInDays: logRetentionInDays
    dailyCapGb: logDailyCapGb
    appPrincipalId: identity.outputs.principalId
    developer: developer
  }
}

module serviceBus 'modules/servicebus.bicep' = {
  scope: rg
  params: {
    namespaceName: names.serviceBus
    location: location
    tags: tags
    sku: serviceBusSku
    topics: topology.topics
    lockDuration: lockDuration
    maxDeliveryCount: serviceBusMaxDeliveryCount
    messageTimeToLive: serviceBusMessageTtl
    duplicateDetectionWindow: duplicateDetectionWindow
    appPrincipalId: identity.outputs.principalId
    appCanReadRuntimeProperties: serviceBusDataOwnerForScaling
    developer: developer
    testPrincipalId: testPrincipalId
    publicNetworkAccess: serviceBusPublicNetworkAccess
    workspaceId: monitoring.outputs.workspaceId
  }
}

module cosmos 'modules/cosmos.bicep' = {
  scope: rg
  params: {
    accountName: names.cosmos
    location: location
    tags: tags
    databaseName: cosmosDatabaseName
    containerName: cosmosContainerName
    leaseContainerName: cosmosLeaseContainerName
    capacityMode: cosmosCapacityMode
    autoscaleMaxThroughput: cosmosAutoscaleMaxThroughput
    continuousBackupTier: cosmosContinuousBackupTier
    zoneRedundant: zoneRedundant
    appPrincipalId: identity.outputs.principalId
    developer: developer
    testPrincipalId: testPrincipalId
    publicNetworkAccess: publicNetworkAccess
    workspaceId: monitoring.outputs.workspaceId
  }
}

module storage 'modules/storage.bicep' = {
  scope: rg
  params: {
    name: names.storage
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
    zoneRedundant: zoneRedundant
    appPrincipalId: identity.outputs.principalId
    developer: developer
    publicNetworkAccess: publicNetworkAccess
    workspaceId: monitoring.outputs.workspaceId
  }
}

module functionApp 'modules/functionapp.bicep' = {
  scope: rg
  params: {
    planName: names.plan
    name: names.functionApp
    location: location
    tags: tags
    serviceName: serviceName
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageBlobEndpoint: storage.outputs.blobEndpoint
    storageTableEndpoint: storage.outputs.tableEndpoint
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    applicationInsightsConnectionString: monitoring.outputs.connectionString
    nodeVersion: '22'
    instanceMemoryMB: functionInstanceMemoryMB
    zoneRedundant: zoneRedundant
    maximumInstanceCount: max(
      1,
      functionMaximumInstanceCount > 0 ? functionMaximumInstanceCount : derivedMaximumInstanceCount
    )
    publicNetworkAccess: publicNetworkAccess
    workspaceId: monitoring.outputs.workspaceId
    // The contract with the app code: these names are read by functions/ and src/.
    appSettings: {
      ServiceBusConnection__fullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
      ServiceBusConnection__credential: 'managedidentity'
      ServiceBusConnection__clientId: identity.outputs.clientId
      COSMOS_ENDPOINT: cosmos.outputs.endpoint
      COSMOS_DATABASE: cosmos.outputs.databaseName
      COSMOS_CONTAINER: cosmos.outputs.containerName
      COSMOS_LEASE_CONTAINER: cosmos.outputs.leaseContainerName
      // The outbox relay's Cosmos DB trigger is configured by the host, not by the app's code, so it
      // has its own identity-based connection, like the Service Bus trigger's.
      CosmosDBConnection__accountEndpoint: cosmos.outputs.endpoint
      CosmosDBConnection__credential: 'managedidentity'
      CosmosDBConnection__clientId: identity.outputs.clientId
      INBOX_RETENTION: checkedRetention
      INBOX_RESUBMIT_MARGIN: inboxResubmitMargin
      SERVICEBUS_LOCK_DURATION: lockDuration
      SERVICEBUS_MAX_DELIVERY_COUNT: string(serviceBusMaxDeliveryCount)
      SERVICEBUS_MESSAGE_TTL: serviceBusMessageTtl
      SERVICEBUS_DUPLICATE_WINDOW: duplicateDetectionWindow
      SERVICEBUS_RESOURCE_ID: serviceBus.outputs.id
      PURGE_MAX_RU_PER_SECOND: string(purgeMaxRuPerSecond > 0 ? purgeMaxRuPerSecond : derivedPurgeMaxRuPerSecond)
    }
  }
}

module alerts 'modules/alerts.bicep' = {
  scope: rg
  params: {
    location: location
    tags: tags
    namePrefix: resourceToken
    serviceBusNamespaceId: serviceBus.outputs.id
    applicationInsightsId: monitoring.outputs.applicationInsightsId
    actionGroupId: actionGroupId
    alertEmail: alertEmail
    functionFailureThreshold: functionFailureThreshold
    duplicateShareThresholdPercent: duplicateShareThresholdPercent
    duplicateShareWindow: duplicateShareWindow
    duplicateShareMinDeliveries: duplicateShareMinDeliveries
    outboxPendingAgeThresholdSeconds: durationSeconds(outboxPendingAgeThreshold)
  }
}

// The operations workbook (infra/workbook.json), opened from the Application Insights component.
module workbook 'modules/workbook.bicep' = {
  scope: rg
  params: {
    location: location
    tags: tags
    applicationInsightsId: monitoring.outputs.applicationInsightsId
  }
}

// ---------------------------------------------------------------------------------------------
// Outputs (azd writes them to the environment; none is a secret)
// ---------------------------------------------------------------------------------------------

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output AZURE_FUNCTION_IDENTITY_CLIENT_ID string = identity.outputs.clientId
output SERVICEBUS_NAMESPACE string = serviceBus.outputs.name
output SERVICEBUS_FQDN string = serviceBus.outputs.fullyQualifiedNamespace
output COSMOS_ACCOUNT_NAME string = cosmos.outputs.name
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output COSMOS_DATABASE string = cosmos.outputs.databaseName
output COSMOS_CONTAINER string = cosmos.outputs.containerName
output COSMOS_LEASE_CONTAINER string = cosmos.outputs.leaseContainerName
output STORAGE_ACCOUNT_NAME string = storage.outputs.name
// Read by the postprovision hook (infra/scripts/wait-for-deployment-storage.mjs).
output STORAGE_BLOB_ENDPOINT string = storage.outputs.blobEndpoint
output DEPLOYMENT_CONTAINER_NAME string = storage.outputs.deploymentContainerName
output DEVELOPER_ROLES_GRANTED bool = !empty(developer.id)
output APPLICATIONINSIGHTS_CONNECTION_STRING string = monitoring.outputs.connectionString
// Not named INBOX_RETENTION: azd would feed an output of that name back into the inboxRetention
// parameter on the next provision, freezing today's computed default.
output INBOX_RETENTION_DEPLOYED string = checkedRetention
output INBOX_RETENTION_BOUND_SECONDS int = retentionBoundSeconds
