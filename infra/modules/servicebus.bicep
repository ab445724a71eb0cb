// Service Bus namespace, the topics and subscriptions declared in src/topology.json, one filter rule
// per subscription, receive rights scoped to each subscription, and send rights scoped to each topic
// a consumer publishes to (its "publishers") or a subscription of which declares delayedRetry.

import { azureRoles, developerPrincipal } from 'roles.bicep'
import { allLogsToDedicatedTables, diagnosticSettingName } from 'diagnostics.bicep'

@description('Name of the Service Bus namespace.')
param namespaceName string

@description('Azure region.')
param location string

@description('Tags applied to the namespace.')
param tags object

@description('Namespace tier. Basic has no topics and no duplicate detection, so it is not offered.')
@allowed([
  'Standard'
  'Premium'
])
param sku string

@description('Topics, the consumers that publish to each ("publishers", optional) and their subscriptions, in the shape of src/topology.json.')
param topics array

@description('Peek-lock duration of every subscription (ISO-8601, at most PT5M).')
param lockDuration string

@description('Deliveries before a message is dead-lettered (MaxDeliveryCountExceeded).')
param maxDeliveryCount int

@description('Default time to live of messages in every subscription (ISO-8601).')
param messageTimeToLive string

@description('Window in which the broker drops a second send of the same MessageId (ISO-8601, PT20S to P7D).')
param duplicateDetectionWindow string

@description('Principal id of the app identity, which receives from every subscription and sends to every topic that declares publishers or has a subscription with delayedRetry.')
param appPrincipalId string

@description('Also grant the app Azure Service Bus Data Owner on each subscription, so that scaling reads exact message counts (the extension otherwise estimates them by peeking).')
param appCanReadRuntimeProperties bool

@description('Developer who sends test messages and inspects subscriptions and dead-letter queues.')
param developer developerPrincipal

@description('Service principal of the CI live tests, which only send; empty for none.')
param testPrincipalId string

@description('Public network access of the namespace: Enabled or Disabled.')
param publicNetworkAccess string

@description('Resource id of the Log Analytics workspace that receives the namespace\'s resource logs.')
param workspaceId string

// One entry per (topic, subscription); a subscription without a subject would receive nothing, which
// is never what a declaration means, so it stops the deployment instead. retries: it declares
// delayedRetry (packages/inbox/src/delayedRetry.ts), so its filter also takes its own delayed copies.
var subscriptions = flatten(map(
  range(0, length(topics)),
  t =>
    map(topics[t].subscriptions, subscription => {
      topicIndex: t
      topicName: topics[t].name
      name: subscription.name
      subjects: empty(subscription.subjects)
        ? fail('src/topology.json: subscription ${topics[t].name}/${subscription.name} declares no subjects')
        : subscription.subjects
      retries: subscription.?delayedRetry != null
    })
))

// The Subject of every delayed copy and the application property naming the one subscription it is
// for: RETRY_SUBJECT and RETRY_PROPERTIES.for of packages/inbox/src/delayedRetry.ts (test/infra/servicebus.test.ts
// checks the filter against them).
var retrySubject = 'inbox.retry'
var retryForProperty = 'inboxRetryFor'

// A SQL string literal: quoted, a quote inside doubled.
func sqlString(text string) string => '\'${replace(text, '\'', '\'\'')}\''

resource namespace 'Microsoft.ServiceBus/namespaces@2026-01-01' = {
  name: namespaceName
  location: location
  tags: tags
  sku: {
    name: sku
    tier: sku
    capacity: sku == 'Premium' ? 1 : null
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: publicNetworkAccess
  }
}

#disable-next-line use-recent-api-versions // see diagnostics.bicep
resource namespaceDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: diagnosticSettingName
  scope: namespace
  properties: allLogsToDedicatedTables(workspaceId)
}

// Duplicate detection can only be switched on when a topic is created, and the documentation
// disagrees on the default window, so both are explicit here.
resource topicResources 'Microsoft.ServiceBus/namespaces/topics@2026-01-01' = [
  for topic in topics: {
    parent: namespace
    name: topic.name
    properties: {
      requiresDuplicateDetection: true
      duplicateDetectionHistoryTimeWindow: duplicateDetectionWindow
    }
  }
]

resource subscriptionResources 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2026-01-01' = [
  for subscription in subscriptions: {
    parent: topicResources[subscription.topicIndex]
    name: subscription.name
    properties: {
      lockDuration: lockDuration
      maxDeliveryCount: maxDeliveryCount
      defaultMessageTimeToLive: messageTimeToLive
      deadLetteringOnMessageExpiration: true
      deadLetteringOnFilterEvaluationExceptions: true
      requiresSession: false
    }
  }
]

// A new subscription starts with a catch-all rule named $Default; redefining $Default replaces it.
// The whole filter of a subscription lives in that one rule, updated in place: with one rule per
// subject, removing a subject from the declaration would leave its rule behind (deployments do not
// delete child resources) and the subscription would keep receiving it. The same holds for delayed
// retry: its copies are taken by the same rule, not by a second one that removing delayedRetry
// would leave behind. One subject is a correlation filter on Subject (label), the cheapest filter
// to evaluate; several subjects need a SQL filter, and so does a subscription with delayedRetry:
//   sys.Label IN ('A', 'B') OR sys.Label = 'inbox.retry' AND inboxRetryFor = '<its name>'
// (AND binds tighter than OR): its subjects, and only the copies scheduled for it, so that a copy
// does not fan out to the other subscriptions of the topic. The local peer builds the same filter
// (local/servicebus/rules.ts subjectsFilter).
resource filterRules 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2026-01-01' = [
  for (subscription, i) in subscriptions: {
    parent: subscriptionResources[i]
    name: '$Default'
    properties: length(subscription.subjects) == 1 && !subscription.retries
      ? {
          filterType: 'CorrelationFilter'
          correlationFilter: {
            label: subscription.subjects[0]
          }
        }
      : {
          filterType: 'SqlFilter'
          sqlFilter: {
            sqlExpression: 'sys.Label IN (${join(map(subscription.subjects, subject => sqlString(subject)), ', ')})${subscription.retries ? ' OR sys.Label = ${sqlString(retrySubject)} AND ${retryForProperty} = ${sqlString(subscription.name)}' : ''}'
          }
        }
  }
]

var dataReceiver = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', azureRoles.serviceBusDataReceiver)
var dataSender = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', azureRoles.serviceBusDataSender)
var dataOwner = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', azureRoles.serviceBusDataOwner)
var reader = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', azureRoles.reader)

// The trigger's role must have effective scope over the subscription it reads; scoping it to each
// subscription (not the topic, not the namespace) keeps one consumer from reading another's messages.
resource appReceives 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (subscription, i) in subscriptions: {
    name: guid(subscriptionResources[i].id, appPrincipalId, dataReceiver)
    scope: subscriptionResources[i]
    properties: {
      roleDefinitionId: dataReceiver
      principalId: appPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]

// The outbox relay and sweeper send what a consumer published (tx.publish) as the app's identity,
// and a consumer with delayedRetry schedules the delayed copies of a failed message on its own
// topic as the app's identity too. A topic is the narrowest scope a send can be granted on, and
// only the topics that declare a publisher or have a subscription with delayedRetry get it, once
// per topic whichever the reasons: the app cannot send to any other topic.
var retryingTopics = map(
  filter(subscriptions, subscription => subscription.retries),
  subscription => subscription.topicIndex
)

resource appSends 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (topic, i) in topics: if (!empty(topic.?publishers ?? []) || contains(retryingTopics, i)) {
    name: guid(topicResources[i].id, appPrincipalId, dataSender)
    scope: topicResources[i]
    properties: {
      roleDefinitionId: dataSender
      principalId: appPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]

// The drift guard (packages/inbox/src/entityDrift.ts) reads each topic's duplicate detection and its
// subscriptions' lock, delivery count and TTL through Azure Resource Manager, at start and before
// each purge. Reader on the topic is the narrowest grant that covers the topic and its
// subscriptions: control-plane reads only, no message (Data Receiver at a subscription's scope
// cannot read its topic; the data-plane administration API needs Manage, that is Data Owner).
resource appReadsEntities 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (topic, i) in topics: {
    name: guid(topicResources[i].id, appPrincipalId, reader)
    scope: topicResources[i]
    properties: {
      roleDefinitionId: reader
      principalId: appPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]

resource appReadsRuntimeProperties 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (subscription, i) in subscriptions: if (appCanReadRuntimeProperties) {
    name: guid(subscriptionResources[i].id, appPrincipalId, dataOwner)
    scope: subscriptionResources[i]
    properties: {
      roleDefinitionId: dataOwner
      principalId: appPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]

// The developer sends test messages to every topic, and a local run of the functions against Azure
// sends as the developer what the app sends (published events, delayed copies): Data Sender on
// every topic already covers both, so delayedRetry adds nothing here. The live tests' principal
// (below) only publishes test events, never runs a consumer, and has Data Sender on every topic too.
resource developerSends 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (topic, i) in topics: if (!empty(developer.id)) {
    name: guid(topicResources[i].id, developer.id, dataSender)
    scope: topicResources[i]
    properties: {
      roleDefinitionId: dataSender
      principalId: developer.id
      principalType: developer.type
    }
  }
]

resource developerReceives 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (topic, i) in topics: if (!empty(developer.id)) {
    name: guid(topicResources[i].id, developer.id, dataReceiver)
    scope: topicResources[i]
    properties: {
      roleDefinitionId: dataReceiver
      principalId: developer.id
      principalType: developer.type
    }
  }
]

// The live tests publish one event to the topic its subject is routed to; a topic is the narrowest
// scope a send can be granted on.
resource testPrincipalSends 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (topic, i) in topics: if (!empty(testPrincipalId)) {
    name: guid(topicResources[i].id, testPrincipalId, dataSender)
    scope: topicResources[i]
    properties: {
      roleDefinitionId: dataSender
      principalId: testPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]

output id string = namespace.id
output name string = namespace.name
// serviceBusEndpoint is https://<namespace>.<cloud suffix>:443/; the host name is the namespace FQDN.
output fullyQualifiedNamespace string = split(split(namespace.properties.serviceBusEndpoint, '/')[2], ':')[0]
