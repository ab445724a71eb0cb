// Monitoring as deployed: Application Insights with Entra ID only, the alerts (dead letters, failed
// executions, duplicate share, deliveries overlapping after a lock expired, an open circuit breaker,
// outbox messages left pending, a topic that
// refuses the outbox's messages, unsendable outbox messages) and whom they
// notify, and the workbook.

import { readFileSync } from 'node:fs';
import path from 'node:path';

import {
  appRoleAssignments,
  armGuid,
  at,
  deploymentLocation as location,
  describeInfra,
  environmentName,
  existingActionGroup,
  infraDir,
  moduleOutput,
  only,
  premiumProvisionedVariant,
  resources,
  role,
  roleAssignmentScope,
  roleDefinitionId,
  type Snapshot,
} from '@idempotent-consumers/devkit/internal/testing/bicep';
import { DUPLICATE_CAUSES, METRIC_NAMES } from '@idempotent-consumers/inbox/internal';

/**
 * The scheduled query rule whose name ends with `suffix`, with its one criterion and its query, and
 * whether it reads the app's Application Insights component.
 */
function queryAlert(from: Snapshot, suffix: string) {
  const rule = resources(from, 'Microsoft.Insights/scheduledQueryRules').find((candidate) =>
    String(candidate.name).endsWith(suffix),
  );
  const criterion = at(rule, 'properties.criteria.allOf.0') as Record<string, unknown>;
  const readsApplicationInsights = moduleOutput('monitoring', 'applicationInsightsId').test(
    String(at(rule, 'properties.scopes.0')),
  );
  return { rule, criterion, query: String(criterion['query']), readsApplicationInsights };
}

describeInfra(
  'monitoring',
  (azd) => ({
    notifying: premiumProvisionedVariant(azd),
    outboxThresholdSet: { parameters: { ...azd(), outboxPendingAgeThreshold: 'PT40M' } },
    dailyCapSet: { parameters: azd({ LOG_DAILY_CAP_GB: '2' }) },
  }),
  ({ defaults, evaluated }) => {
    describe('the Log Analytics daily ingestion cap', () => {
      const dailyQuota = (from: Snapshot): unknown =>
        at(
          only(from, 'Microsoft.OperationalInsights/workspaces'),
          'properties.workspaceCapping.dailyQuotaGb',
        );

      it('is off by default (-1: no cap), so that no alert goes quiet for a bill', () => {
        expect(dailyQuota(defaults())).toBe(-1);
      });

      it('is the GB a day LOG_DAILY_CAP_GB sets', () => {
        expect(dailyQuota(evaluated('dailyCapSet'))).toBe(2);
      });
    });

    describe('with the defaults of main.parameters.json', () => {
      describe('Application Insights', () => {
        it('refuses local (instrumentation key) auth and lets the app publish with its identity', () => {
          const component = only(defaults(), 'Microsoft.Insights/components');
          const publishers = appRoleAssignments(defaults()).filter(
            (assignment) => roleAssignmentScope(assignment) === component.id,
          );

          expect(component.properties).toMatchObject({ DisableLocalAuth: true });
          expect(publishers.map((assignment) => at(assignment, 'properties.roleDefinitionId'))).toEqual([
            roleDefinitionId(role.monitoringMetricsPublisher),
          ]);
        });
      });

      describe('alerts', () => {
        it('alerts on any dead-lettered message, per entity of the namespace', () => {
          const alert = resources(defaults(), 'Microsoft.Insights/metricAlerts').find((candidate) =>
            moduleOutput('serviceBus', 'id').test(String(at(candidate, 'properties.scopes.0'))),
          );

          expect(at(alert, 'properties.criteria.allOf')).toEqual([
            expect.objectContaining({
              metricNamespace: 'Microsoft.ServiceBus/namespaces',
              metricName: 'DeadletteredMessages',
              dimensions: [{ name: 'EntityName', operator: 'Include', values: ['*'] }],
              operator: 'GreaterThan',
              threshold: 0,
            }),
          ]);
        });

        it('alerts on failed function executions from Application Insights', () => {
          const alert = resources(defaults(), 'Microsoft.Insights/metricAlerts').find((candidate) =>
            moduleOutput('monitoring', 'applicationInsightsId').test(
              String(at(candidate, 'properties.scopes.0')),
            ),
          );

          expect(at(alert, 'properties.criteria.allOf')).toEqual([
            expect.objectContaining({
              metricNamespace: 'microsoft.insights/components',
              metricName: 'requests/failed',
              operator: 'GreaterThan',
              threshold: 5,
            }),
          ]);
        });

        it("alerts when a consumer's duplicate share of inbox.messages exceeds the threshold", () => {
          const { rule, criterion, query, readsApplicationInsights } = queryAlert(
            defaults(),
            '-duplicate-share',
          );

          expect(readsApplicationInsights).toBe(true);
          expect(query).toMatch(/^customMetrics\n\| where name == 'inbox\.messages'/);
          expect(query).toContain('tostring(customDimensions.outcome)');
          expect(query).toContain('tostring(customDimensions.consumer)');
          expect(query).toContain("outcome in ('duplicate', 'payload_mismatch')");
          expect(query).toContain('deliveries >= 20');
          expect(criterion).toMatchObject({
            metricMeasureColumn: 'duplicateSharePercent',
            operator: 'GreaterThan',
            threshold: 5,
            dimensions: [{ name: 'consumer', operator: 'Include', values: ['*'] }],
          });
          expect(at(rule, 'properties.windowSize')).toBe('PT1H');
        });

        it('alerts, per consumer, on any delivery that overlapped another in 15 minutes (inbox.messages, cause lock_overlap)', () => {
          const { rule, criterion, query, readsApplicationInsights } = queryAlert(
            defaults(),
            '-lock-overlap',
          );

          expect(readsApplicationInsights).toBe(true);
          expect(query).toContain(`where name == '${METRIC_NAMES.messages}'`);
          expect(query).toContain('cause = tostring(customDimensions.cause)');
          // The cause the app names, on the outcome it names it for.
          expect(DUPLICATE_CAUSES).toContain('lock_overlap');
          expect(query).toContain("where outcome == 'duplicate' and cause == 'lock_overlap'");
          expect(query).toContain('overlaps = sum(valueSum) by consumer');
          // The documented threshold: any overlap (more than 0) in 15 minutes.
          expect(criterion).toMatchObject({
            metricMeasureColumn: 'overlaps',
            timeAggregation: 'Total',
            operator: 'GreaterThan',
            threshold: 0,
            dimensions: [{ name: 'consumer', operator: 'Include', values: ['*'] }],
          });
          expect(at(rule, 'properties.windowSize')).toBe('PT15M');
          expect(at(rule, 'properties.evaluationFrequency')).toBe('PT5M');
        });

        it('alerts, per entity, on any unsafe drift of the deployed Service Bus entities (inbox.entity_drift, unsafe true)', () => {
          const { rule, criterion, query, readsApplicationInsights } = queryAlert(
            defaults(),
            '-entity-drift',
          );

          expect(readsApplicationInsights).toBe(true);
          expect(query).toContain(`where name == '${METRIC_NAMES.entityDrift}'`);
          expect(query).toContain('unsafe = tostring(customDimensions.unsafe)');
          expect(query).toContain("where unsafe == 'true'");
          expect(query).toContain('drifts = sum(valueSum) by entity');
          expect(criterion).toMatchObject({
            metricMeasureColumn: 'drifts',
            timeAggregation: 'Total',
            operator: 'GreaterThan',
            threshold: 0,
            dimensions: [{ name: 'entity', operator: 'Include', values: ['*'] }],
          });
          expect(at(rule, 'properties.severity')).toBe(1);
          expect(at(rule, 'properties.windowSize')).toBe('PT15M');
        });

        it('alerts when the drift guard could not read the deployed entities three times in 30 minutes (inbox.drift_checks, unreadable)', () => {
          const { rule, criterion, query, readsApplicationInsights } = queryAlert(
            defaults(),
            '-drift-guard-blind',
          );

          expect(readsApplicationInsights).toBe(true);
          expect(query).toContain(`where name == '${METRIC_NAMES.driftChecks}'`);
          expect(query).toContain("where tostring(customDimensions.result) == 'unreadable'");
          expect(query).toContain('unreadable = sum(valueSum)');
          expect(criterion).toMatchObject({
            metricMeasureColumn: 'unreadable',
            timeAggregation: 'Total',
            operator: 'GreaterThanOrEqual',
            threshold: 3,
          });
          expect(at(rule, 'properties.severity')).toBe(2);
          expect(at(rule, 'properties.windowSize')).toBe('PT30M');
          expect(at(rule, 'properties.evaluationFrequency')).toBe('PT5M');
        });

        it('alerts when an instance keeps its Cosmos DB circuit breaker open for 15 minutes (inbox.breaker_open)', () => {
          const { rule, criterion, query, readsApplicationInsights } = queryAlert(
            defaults(),
            '-breaker-open',
          );

          expect(readsApplicationInsights).toBe(true);
          // The app's own metric name, not a copy of it.
          expect(query).toContain(`where name == '${METRIC_NAMES.breakerOpen}'`);
          expect(query).toContain('min(valueMin)');
          expect(criterion).toMatchObject({
            metricMeasureColumn: 'minimumOpen',
            operator: 'GreaterThanOrEqual',
            threshold: 1,
            dimensions: [{ name: 'instance', operator: 'Include', values: ['*'] }],
          });
          expect(at(rule, 'properties.windowSize')).toBe('PT15M');
          expect(at(rule, 'properties.actions')).toEqual({ actionGroups: [] });
        });

        it('alerts when a sweeper run finds an outbox message pending for more than 15 minutes (outbox.oldest_pending_age), whatever the sweep interval', () => {
          const { rule, criterion, query, readsApplicationInsights } = queryAlert(
            defaults(),
            '-outbox-pending-age',
          );

          expect(readsApplicationInsights).toBe(true);
          expect(query).toContain(`where name == '${METRIC_NAMES.outboxOldestPendingAge}'`);
          // The age only grows while a message waits: one report above the threshold is the signal,
          // with no count of runs that a longer OUTBOX_SWEEP_INTERVAL would never reach.
          expect(query).toContain('oldestPendingAgeSeconds = max(valueMax)');
          expect(query).not.toContain('count()');
          expect(criterion).toMatchObject({
            metricMeasureColumn: 'oldestPendingAgeSeconds',
            timeAggregation: 'Maximum',
            operator: 'GreaterThan',
            threshold: 900,
          });
          // One sweeper per app, on whichever instance the timer ran: not split by instance.
          expect(criterion['dimensions']).toBeUndefined();
          expect(rule?.properties).toMatchObject({
            windowSize: 'PT10M',
            evaluationFrequency: 'PT5M',
            severity: 2,
            autoMitigate: true,
            actions: { actionGroups: [] },
          });
        });

        it('alerts, naming the topic, when the sweeper cannot send a topic the messages pending longer than OUTBOX_SWEEP_AGE (outbox.send_failures)', () => {
          const { rule, criterion, query, readsApplicationInsights } = queryAlert(
            defaults(),
            '-outbox-topic-failing',
          );

          expect(readsApplicationInsights).toBe(true);
          expect(query).toContain(`where name == '${METRIC_NAMES.outboxSendFailures}'`);
          // The relay's failures are its own retries' business; a sweeper's means the topic has been
          // failing for at least OUTBOX_SWEEP_AGE.
          expect(query).toContain("where source == 'sweeper'");
          expect(query).toContain('summarize failedSends = sum(valueSum) by topic');
          expect(criterion).toMatchObject({
            metricMeasureColumn: 'failedSends',
            operator: 'GreaterThan',
            threshold: 0,
            dimensions: [{ name: 'topic', operator: 'Include', values: ['*'] }],
          });
          expect(rule?.properties).toMatchObject({ windowSize: 'PT15M', severity: 1, autoMitigate: true });
        });

        it('alerts while any outbox message is kept unsendable (outbox.unsendable, measured by every sweeper run)', () => {
          const { rule, criterion, query, readsApplicationInsights } = queryAlert(
            defaults(),
            '-outbox-unsendable',
          );

          expect(readsApplicationInsights).toBe(true);
          expect(query).toContain(`where name == '${METRIC_NAMES.outboxUnsendable}'`);
          expect(query).toContain('unsendable = max(valueMax)');
          expect(criterion).toMatchObject({
            metricMeasureColumn: 'unsendable',
            timeAggregation: 'Maximum',
            operator: 'GreaterThan',
            threshold: 0,
          });
          expect(String(at(rule, 'properties.description'))).toContain('npm run outbox -- list --unsendable');
          expect(rule?.properties).toMatchObject({ severity: 1, autoMitigate: true });
        });

        it('takes the outbox age threshold as an ISO-8601 duration, in seconds', () => {
          const { criterion, rule } = queryAlert(evaluated('outboxThresholdSet'), '-outbox-pending-age');

          expect(criterion['threshold']).toBe(2400);
          expect(at(rule, 'properties.displayName')).toBe('Outbox messages pending for more than 2400 s');
        });

        it('notifies nobody until an action group or an e-mail is given', () => {
          expect(resources(defaults(), 'Microsoft.Insights/actionGroups')).toEqual([]);
          for (const alert of resources(defaults(), 'Microsoft.Insights/metricAlerts')) {
            expect(at(alert, 'properties.actions')).toEqual([]);
          }
        });
      });

      describe('workbook', () => {
        it('deploys infra/workbook.json as a shared workbook opened on the Application Insights component', () => {
          const workbook = only(defaults(), 'Microsoft.Insights/workbooks');

          expect(workbook.kind).toBe('shared');
          expect(workbook.location).toBe(location);
          expect(workbook.tags?.['azd-env-name']).toBe(environmentName);
          expect(String(at(workbook, 'properties.sourceId'))).toMatch(
            moduleOutput('monitoring', 'applicationInsightsId'),
          );
          expect(at(workbook, 'properties.category')).toBe('workbook');
          expect(at(workbook, 'properties.serializedData')).toBe(
            readFileSync(path.join(infraDir, 'workbook.json'), 'utf8'),
          );
        });

        it('is named by a GUID of its resource group, so that a redeployment updates the same workbook', () => {
          const workbook = only(defaults(), 'Microsoft.Insights/workbooks');
          const resourceGroup = only(defaults(), 'Microsoft.Resources/resourceGroups');

          expect(workbook.name).toBe(armGuid(resourceGroup.id, 'inbox-workbook'));
          expect(workbook.id).toBe(
            `${resourceGroup.id}/providers/Microsoft.Insights/workbooks/${workbook.name}`,
          );
        });
      });
    });

    describe('with an action group and an e-mail address', () => {
      it('sends every alert to the given action group and to one created for the e-mail address', () => {
        const notifying = evaluated('notifying');
        const group = only(notifying, 'Microsoft.Insights/actionGroups');
        const expected = [existingActionGroup, group.id];

        expect(at(group, 'properties.emailReceivers.0.emailAddress')).toBe('ops@example.com');
        for (const alert of resources(notifying, 'Microsoft.Insights/metricAlerts')) {
          expect(at(alert, 'properties.actions')).toEqual(
            expected.map((actionGroupId) => ({ actionGroupId })),
          );
        }
        const rules = resources(notifying, 'Microsoft.Insights/scheduledQueryRules');
        expect(rules).toHaveLength(8);
        for (const rule of rules) {
          expect(at(rule, 'properties.actions')).toEqual({ actionGroups: expected });
        }
      });
    });
  },
);
