// Eight alerts that matter for an idempotent consumer: messages given up on (dead-lettered), handler
// failures, a rise in the share of duplicate deliveries, deliveries that overlapped because a lock
// expired under the handler, a Cosmos DB circuit breaker that stays open,
// published messages that stay in the outbox, a topic that refuses the outbox's messages (named),
// and outbox messages set aside as unsendable. Each notifies the given action group and/or an
// action group created here for an e-mail address.

@description('Azure region of the scheduled query rule (metric alerts are global).')
param location string

@description('Tags applied to every alert and action group.')
param tags object

@description('Prefix of the alert names, e.g. the environment\'s resource token.')
param namePrefix string

@description('Resource id of the Service Bus namespace.')
param serviceBusNamespaceId string

@description('Resource id of the Application Insights component the app reports to.')
param applicationInsightsId string

@description('Resource id of an existing action group to notify; empty for none.')
param actionGroupId string

@description('E-mail address for a new action group; empty to create none.')
param alertEmail string

@description('Failed function executions, within 15 minutes, above which to alert.')
@minValue(0)
param functionFailureThreshold int

@description('Duplicate share of a consumer\'s deliveries, in percent, above which to alert.')
@minValue(0)
@maxValue(100)
param duplicateShareThresholdPercent int

@description('Window over which the duplicate share is computed (ISO-8601, PT5M to P2D).')
param duplicateShareWindow string

@description('Deliveries a consumer must have in the window before its duplicate share counts.')
@minValue(1)
param duplicateShareMinDeliveries int

@description('Age of the oldest pending outbox message, in seconds, above which (at every sweeper run for 15 minutes) to alert.')
@minValue(60)
param outboxPendingAgeThresholdSeconds int

resource emailGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmail)) {
  name: 'ag-${namePrefix}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: take('inbox${namePrefix}', 12)
    enabled: true
    emailReceivers: [
      {
        name: 'owner'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var actionGroupIds = concat(empty(actionGroupId) ? [] : [actionGroupId], empty(alertEmail) ? [] : [emailGroup.id])

// Dead-lettered messages are a point-in-time count per entity; for a topic it is the sum over its
// subscriptions (Azure Monitor has no per-subscription dimension), so "above zero on the topic" is
// "above zero on at least one subscription". Nothing cleans a dead-letter queue, so this stays
// fired until someone resubmits or completes the messages.
resource deadLetters 'Microsoft.Insights/metricAlerts@2026-01-01' = {
  name: 'ma-${namePrefix}-dead-lettered'
  location: 'global'
  tags: tags
  properties: {
    description: 'Messages are waiting in a dead-letter queue (EntityName is the topic; look at each of its subscriptions).'
    severity: 2
    enabled: true
    scopes: [
      serviceBusNamespaceId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'DeadLettered'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: [
      for id in actionGroupIds: {
        actionGroupId: id
      }
    ]
  }
}

// A failed execution is a delivery that threw: the message is abandoned and comes back, and after
// maxDeliveryCount it is dead-lettered. A few are normal under throttling; a steady stream is not.
resource functionFailures 'Microsoft.Insights/metricAlerts@2026-01-01' = {
  name: 'ma-${namePrefix}-function-failures'
  location: 'global'
  tags: tags
  properties: {
    description: 'Function executions are failing (each failure abandons a message, which is redelivered).'
    severity: 2
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'FailedRequests'
          metricNamespace: 'microsoft.insights/components'
          metricName: 'requests/failed'
          operator: 'GreaterThan'
          threshold: functionFailureThreshold
          timeAggregation: 'Count'
        }
      ]
    }
    actions: [
      for id in actionGroupIds: {
        actionGroupId: id
      }
    ]
  }
}

// The app counts every delivery in the OpenTelemetry counter inbox.messages (dimensions consumer
// and outcome), which Azure Monitor stores in customMetrics. A duplicate (or a payload mismatch,
// same MessageId with another body) was absorbed by the inbox; a rising share of them means locks
// expire during processing, a producer resends, or dead letters are being resubmitted. Retried
// attempts are left out: they are not finished deliveries, and they come back.
var duplicateShareQuery = '''
customMetrics
| where name == 'inbox.messages'
| extend consumer = tostring(customDimensions.consumer), outcome = tostring(customDimensions.outcome)
| where outcome != 'retried'
| summarize deliveries = sum(valueSum), duplicates = sumif(valueSum, outcome in ('duplicate', 'payload_mismatch')) by consumer
| where deliveries >= {0}
| project consumer, duplicateSharePercent = round(100.0 * duplicates / deliveries, 2)
'''

resource duplicateShare 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'sqr-${namePrefix}-duplicate-share'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Inbox duplicate share above ${duplicateShareThresholdPercent}%'
    description: 'A consumer sees more duplicate deliveries than usual (inbox.messages, outcome duplicate or payload_mismatch).'
    severity: 3
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT15M'
    windowSize: duplicateShareWindow
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: format(duplicateShareQuery, duplicateShareMinDeliveries)
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'duplicateSharePercent'
          dimensions: [
            {
              name: 'consumer'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: duplicateShareThresholdPercent
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

// Every duplicate the inbox absorbs carries its cause (packages/inbox/src/duplicateCause.ts) as the dimension
// `cause` of inbox.messages. lock_overlap means two deliveries of one message ran at the same time:
// the first was still running when its lock expired and the broker delivered the message again, so
// the handler takes longer than lockDuration (and lock renewal did not hold it). The inbox keeps the
// effect single, but every such overlap is work done twice and a handler racing itself, so the
// threshold is any: more than 0 in 15 minutes, per consumer. Lengthen SERVICEBUS_LOCK_DURATION or
// speed up the handler (README.md, "Why duplicates").
var lockOverlapQuery = '''
customMetrics
| where name == 'inbox.messages'
| extend consumer = tostring(customDimensions.consumer), outcome = tostring(customDimensions.outcome), cause = tostring(customDimensions.cause)
| where outcome == 'duplicate' and cause == 'lock_overlap'
| summarize overlaps = sum(valueSum) by consumer
'''

resource lockOverlap 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'sqr-${namePrefix}-lock-overlap'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Deliveries overlapped: a lock expired while the handler ran'
    description: 'A consumer absorbed a duplicate whose first delivery was still running when this one began (inbox.messages, outcome duplicate, cause lock_overlap): its lock expired under the handler. The handler takes longer than the subscription\'s lockDuration; lengthen it or make the handler faster (README.md, "Why duplicates").'
    severity: 2
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: lockOverlapQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'overlaps'
          dimensions: [
            {
              name: 'consumer'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

// The drift guard (packages/inbox/src/entityDrift.ts) counts every property of the deployed topics and
// subscriptions that differs from the app's settings, at start and before each purge run; unsafe
// drift (a bound past INBOX_RETENTION, duplicate detection off or shorter) stops a starting app and
// pauses the purge of a running one. One such count is enough to page someone: redeploy, or fix
// the settings.
var entityDriftQuery = '''
customMetrics
| where name == 'inbox.entity_drift'
| extend entity = tostring(customDimensions.entity), property = tostring(customDimensions.property), unsafe = tostring(customDimensions.unsafe)
| where unsafe == 'true'
| summarize drifts = sum(valueSum) by entity
'''

resource entityDrift 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'sqr-${namePrefix}-entity-drift'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Service Bus entities drifted from the settings: purge paused'
    description: 'A deployed topic or subscription no longer matches the settings the inbox guarantee was checked with (inbox.entity_drift, unsafe true): a lock, delivery count or TTL that lets a message come back after its marker is purged, or duplicate detection off or shorter. The purge is paused and a restarting app refuses to start. Redeploy (azd provision) or change the settings (README.md, "What can break exactly-once").'
    severity: 1
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: entityDriftQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'drifts'
          dimensions: [
            {
              name: 'entity'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

// The drift guard counts each check it makes (inbox.drift_checks): `unreadable` when it could not
// read the deployed entities (a wrong SERVICEBUS_RESOURCE_ID, no Reader role, Resource Manager
// failing). The purge then waits, keeping every marker, so a guard that stays blind would let
// markers pile up until their TTL backstop, unnoticed. Three unreadable checks in 30 minutes (the
// purge runs every five) is a guard that stays blind, not one failed read.
var driftGuardBlindQuery = '''
customMetrics
| where name == 'inbox.drift_checks'
| where tostring(customDimensions.result) == 'unreadable'
| summarize unreadable = sum(valueSum)
'''

resource driftGuardBlind 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'sqr-${namePrefix}-drift-guard-blind'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'The drift guard cannot read the Service Bus entities: purge paused'
    description: 'The app could not read its deployed topics and subscriptions from Resource Manager at least three times in 30 minutes (inbox.drift_checks, result unreadable), so it cannot tell whether a marker may be purged: the purge waits, keeping every marker. Check SERVICEBUS_RESOURCE_ID and the Reader role the Bicep assigns the app on each topic (infra/README.md, "Alerts").'
    severity: 2
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT30M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: driftGuardBlindQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'unreadable'
          operator: 'GreaterThanOrEqual'
          threshold: 3
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

// The app's Cosmos DB circuit breaker (packages/inbox/src/breaker.ts) reports inbox.breaker_open at every
// export (about a minute): 1 while the instance holds deliveries because Cosmos DB is failing. Open
// at every export for 15 minutes means an outage long enough to eat into the deliveries messages
// have left (the README's arithmetic: about 31 minutes with the defaults), or an instance stuck open.
var breakerOpenQuery = '''
customMetrics
| where name == 'inbox.breaker_open'
| summarize minimumOpen = min(valueMin), exports = count() by instance = cloud_RoleInstance
| where exports >= 10
| project instance, minimumOpen
'''

resource breakerOpen 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'sqr-${namePrefix}-breaker-open'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Cosmos DB circuit breaker open for 15 minutes'
    description: 'An instance has held its deliveries for 15 minutes because Cosmos DB keeps failing (inbox.breaker_open = 1 throughout). Check Cosmos DB; messages are dead-lettered if it lasts past the bound in the README.'
    severity: 1
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: breakerOpenQuery
          timeAggregation: 'Minimum'
          metricMeasureColumn: 'minimumOpen'
          dimensions: [
            {
              name: 'instance'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThanOrEqual'
          threshold: 1
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

// The outbox sweeper (packages/inbox/src/relay.ts) reports outbox.oldest_pending_age once a run (every
// OUTBOX_SWEEP_INTERVAL, a minute by default), on whichever instance ran it, measured before it sends
// (so even while every send fails): the age in seconds of the oldest outbox message not yet sent, 0
// when none is pending. The relay sends a message within seconds of its commit and the sweeper
// resends what is older than OUTBOX_SWEEP_AGE, so a message still pending after the threshold means
// sends keep failing (Service Bus down, the app's Data Sender role missing, a topic deleted): published
// events are not reaching their subscribers. The age only grows while a message waits, so one report
// above the threshold is the signal, whatever the sweep interval; the window spans two runs at PT5M.
var outboxPendingAgeQuery = '''
customMetrics
| where name == 'outbox.oldest_pending_age'
| summarize oldestPendingAgeSeconds = max(valueMax)
'''

resource outboxPendingAge 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'sqr-${namePrefix}-outbox-pending-age'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Outbox messages pending for more than ${outboxPendingAgeThresholdSeconds} s'
    description: 'Messages the consumers published (tx.publish) are not reaching Service Bus: a sweeper run found an outbox message pending for longer than the threshold (outbox.oldest_pending_age). Check the outbox-relay and outbox-sweeper failures and the app\'s Azure Service Bus Data Sender role on the topic.'
    severity: 2
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: outboxPendingAgeQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'oldestPendingAgeSeconds'
          operator: 'GreaterThan'
          threshold: outboxPendingAgeThresholdSeconds
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

// The sweeper (packages/inbox/src/relay.ts) sends a topic's messages only once they have been pending for
// OUTBOX_SWEEP_AGE, so a send of the sweeper that fails (outbox.send_failures, source sweeper) means
// a topic has been refusing or failing for that long: it was deleted, the app lost its Data Sender
// role on it, it is disabled or full, or Service Bus is down. The other topics' messages go on; this
// topic's wait, pending, and are sent once it takes them again. One alert per topic (its dimension).
var outboxTopicFailingQuery = '''
customMetrics
| where name == 'outbox.send_failures'
| extend topic = tostring(customDimensions['topic']), source = tostring(customDimensions['source'])
| where source == 'sweeper'
| summarize failedSends = sum(valueSum) by topic
'''

resource outboxTopicFailing 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'sqr-${namePrefix}-outbox-topic-failing'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'A topic refuses the outbox\'s messages'
    description: 'The outbox sweeper could not send messages pending for longer than OUTBOX_SWEEP_AGE to this topic (outbox.send_failures, source sweeper). Its messages wait, pending; the other topics are not held. Check that the topic exists and is enabled, and the app\'s Azure Service Bus Data Sender role on it; the outbox-sweeper logs name the Service Bus error.'
    severity: 1
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: outboxTopicFailingQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'failedSends'
          dimensions: [
            {
              name: 'topic'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

// Every sweeper run counts the outbox documents set aside as unsendable (outbox.unsendable): a
// message the relay will never send on its own, because what the document holds is not a message
// tx.publish would have accepted, or Service Bus refused its size. It waits for an operator to
// resend or discard it (npm run outbox), so the alert stays on while any is kept.
var outboxUnsendableQuery = '''
customMetrics
| where name == 'outbox.unsendable'
| summarize unsendable = max(valueMax)
'''

resource outboxUnsendable 'Microsoft.Insights/scheduledQueryRules@2026-03-01' = {
  name: 'sqr-${namePrefix}-outbox-unsendable'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Outbox messages set aside as unsendable'
    description: 'The outbox relay set aside messages it can never send (outbox.unsendable): each keeps its reason. List them with `npm run outbox -- list --unsendable`, then resend or discard each (infra/monitoring.md, "Unsendable outbox messages").'
    severity: 1
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: outboxUnsendableQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'unsendable'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: actionGroupIds
    }
  }
}

output actionGroupIds array = actionGroupIds
