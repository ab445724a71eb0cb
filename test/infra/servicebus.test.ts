// Service Bus as deployed: a namespace with local auth off, every declared topic and subscription
// with its filter and the app's receiver role scoped to it, the app's sender role on the topics a
// consumer publishes to or where a subscription declares delayedRetry and nowhere else, Premium when
// asked; and modules/servicebus.bicep evaluated on its own with other declarations than
// src/topology.json, delayed retry's filter compared with the local peer's.

import path from 'node:path';

import { RETRY_COPIES } from '@idempotent-consumers/devkit';
import {
  appRoleAssignments,
  armGuid,
  at,
  declaredSubscriptions,
  deploymentLocation as location,
  describeInfra,
  developerId,
  fakeScope,
  infraDir,
  only,
  premiumProvisionedVariant,
  publishedTopics,
  resources,
  role,
  roleAssignments,
  roleAssignmentScope,
  roleDefinitionId,
  sendingTopics,
  type Snapshot,
  type Topology,
  topology,
} from '@idempotent-consumers/devkit/internal/testing/bicep';
import { RETRY_PROPERTIES, RETRY_SUBJECT } from '@idempotent-consumers/inbox/internal';
import { type RuleFilter, subjectsFilter } from '@idempotent-consumers/local-azure';

/** Parameters of modules/servicebus.bicep, evaluated on its own with other declarations than src/. */
const serviceBusModuleParameters = (topics: Topology['topics']): Record<string, unknown> => ({
  namespaceName: 'sb-declarations',
  location,
  tags: {},
  sku: 'Standard',
  topics,
  lockDuration: 'PT1M',
  maxDeliveryCount: 10,
  messageTimeToLive: 'P14D',
  duplicateDetectionWindow: 'PT1H',
  appPrincipalId: developerId,
  appCanReadRuntimeProperties: false,
  developer: { id: '', type: 'User' },
  testPrincipalId: '',
  publicNetworkAccess: 'Enabled',
  workspaceId: `/subscriptions/${fakeScope.subscriptionId}/resourceGroups/rg-declarations/providers/Microsoft.OperationalInsights/workspaces/log-declarations`,
});
const severalSubjectsTopics: Topology['topics'] = [
  {
    name: 'orders',
    subscriptions: [
      {
        name: 'audit',
        consumer: 'audit.recorder',
        subjects: ['OrderCreated', "Order's Note", 'OrderShipped'],
      },
    ],
  },
  {
    name: 'payments',
    subscriptions: [{ name: 'ledger', consumer: 'ledger', subjects: ['PaymentReceived'] }],
  },
];
const publishingTopics: Topology['topics'] = [
  {
    name: 'orders',
    publishers: ['ledger'],
    subscriptions: [{ name: 'audit', consumer: 'audit.recorder', subjects: ['OrderCreated'] }],
  },
  {
    name: 'payments',
    publishers: [],
    subscriptions: [{ name: 'ledger', consumer: 'ledger', subjects: ['PaymentReceived'] }],
  },
  {
    name: 'refunds',
    subscriptions: [{ name: 'ledger-refunds', consumer: 'ledger', subjects: ['RefundIssued'] }],
  },
];
/**
 * Delayed retry (packages/inbox/src/delayedRetry.ts) on some subscriptions: on a topic without publishers
 * (orders), on a topic with publishers too (refunds: still one send right), and none on payments.
 */
const retryingTopics: Topology['topics'] = [
  {
    name: 'orders',
    subscriptions: [
      {
        name: 'audit.recorder',
        consumer: 'audit.recorder',
        subjects: ['OrderCreated', "Order's Note"],
        delayedRetry: { attempts: 3, firstDelaySeconds: 30 },
      },
      {
        name: 'shipping.planner',
        consumer: 'shipping.planner',
        subjects: ['OrderCreated'],
        delayedRetry: { attempts: 1, firstDelaySeconds: 5, maxDelaySeconds: 5, afterDeliveries: 1 },
      },
      { name: 'billing.one', consumer: 'billing.one', subjects: ['OrderShipped'] },
      { name: 'billing.two', consumer: 'billing.two', subjects: ['OrderCreated', 'OrderShipped'] },
    ],
  },
  {
    name: 'payments',
    subscriptions: [{ name: 'ledger', consumer: 'ledger', subjects: ['PaymentReceived'] }],
  },
  {
    name: 'refunds',
    publishers: ['ledger'],
    subscriptions: [
      {
        name: 'ledger.refunds',
        consumer: 'ledger.refunds',
        subjects: ['RefundIssued'],
        delayedRetry: { attempts: 2, firstDelaySeconds: 60 },
      },
    ],
  },
];
const noSubjectTopics: Topology['topics'] = [
  { name: 'orders', subscriptions: [{ name: 'nothing', consumer: 'nobody', subjects: [] }] },
];

describeInfra(
  'Service Bus',
  (azd) => {
    const serviceBusModule = {
      templateFile: path.join(infraDir, 'modules', 'servicebus.bicep'),
      resourceGroup: 'rg-declarations',
    };
    return {
      premiumProvisioned: premiumProvisionedVariant(azd),
      severalSubjects: {
        parameters: serviceBusModuleParameters(severalSubjectsTopics),
        options: serviceBusModule,
      },
      publishing: { parameters: serviceBusModuleParameters(publishingTopics), options: serviceBusModule },
      retrying: { parameters: serviceBusModuleParameters(retryingTopics), options: serviceBusModule },
      noSubject: { parameters: serviceBusModuleParameters(noSubjectTopics), options: serviceBusModule },
    };
  },
  ({ defaults, evaluated, refusal }) => {
    const premiumProvisioned = (): Snapshot => evaluated('premiumProvisioned');

    describe('with the defaults of main.parameters.json', () => {
      it('is a Standard namespace with local (SAS) auth off and TLS 1.2', () => {
        const namespace = only(defaults(), 'Microsoft.ServiceBus/namespaces');

        expect(namespace.sku).toMatchObject({ name: 'Standard', tier: 'Standard' });
        expect(namespace.properties).toMatchObject({ disableLocalAuth: true, minimumTlsVersion: '1.2' });
      });

      it('creates every declared topic with duplicate detection on and a PT1H window', () => {
        const topics = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics');

        expect(topics.map((topic) => topic.name.split('/')[1]).sort()).toEqual(
          topology.topics.map((topic) => topic.name).sort(),
        );
        for (const topic of topics) {
          expect(topic.properties).toMatchObject({
            requiresDuplicateDetection: true,
            duplicateDetectionHistoryTimeWindow: 'PT1H',
          });
        }
      });

      it('creates exactly the declared subscriptions, with lock, delivery count, TTL and dead-lettering', () => {
        const subscriptions = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics/subscriptions');

        expect(
          subscriptions.map((subscription) => subscription.name.split('/').slice(1).join('/')).sort(),
        ).toEqual(declaredSubscriptions.map((declared) => `${declared.topic}/${declared.name}`).sort());
        for (const subscription of subscriptions) {
          expect(subscription.properties).toMatchObject({
            lockDuration: 'PT1M',
            maxDeliveryCount: 10,
            defaultMessageTimeToLive: 'P14D',
            deadLetteringOnMessageExpiration: true,
          });
        }
      });

      it('replaces the catch-all $Default rule of each subscription with a filter on its subjects', () => {
        const rules = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules');

        expect(rules).toHaveLength(declaredSubscriptions.length);
        for (const declared of declaredSubscriptions) {
          const rule = rules.find((candidate) =>
            candidate.name.endsWith(`/${declared.topic}/${declared.name}/$Default`),
          );
          const retries =
            declared.delayedRetry === undefined
              ? ''
              : ` OR sys.Label = '${RETRY_SUBJECT}' AND ${RETRY_PROPERTIES.for} = '${declared.name}'`;
          const filter =
            declared.subjects.length === 1 && retries === ''
              ? { filterType: 'CorrelationFilter', correlationFilter: { label: declared.subjects[0] } }
              : {
                  filterType: 'SqlFilter',
                  sqlFilter: {
                    sqlExpression: `sys.Label IN (${declared.subjects.map((s) => `'${s}'`).join(', ')})${retries}`,
                  },
                };

          expect({ subscription: declared.name, properties: rule?.properties }).toEqual({
            subscription: declared.name,
            properties: filter,
          });
        }
      });

      it('lets the app receive from each subscription, scoped to that subscription only', () => {
        const receivers = appRoleAssignments(defaults()).filter(
          (assignment) =>
            at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataReceiver),
        );

        expect(receivers.map(roleAssignmentScope).sort()).toEqual(
          resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics/subscriptions')
            .map((subscription) => subscription.id)
            .sort(),
        );
        for (const receiver of receivers) {
          expect(at(receiver, 'properties.principalType')).toBe('ServicePrincipal');
        }
      });

      it('lets the app send to each topic a consumer publishes to (or one of whose subscriptions declares delayedRetry), scoped to that topic only', () => {
        const topics = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics');
        const senders = appRoleAssignments(defaults()).filter(
          (assignment) =>
            at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataSender),
        );

        expect(sendingTopics()).toEqual(expect.arrayContaining(publishedTopics));
        expect(senders.map(roleAssignmentScope).sort()).toEqual(
          topics
            .filter((topic) => sendingTopics().includes(topic.name.split('/')[1] ?? ''))
            .map((topic) => topic.id)
            .sort(),
        );
        for (const sender of senders) {
          const principal = String(at(sender, 'properties.principalId'));

          expect(at(sender, 'properties.principalType')).toBe('ServicePrincipal');
          expect(sender.name).toBe(
            `[guid('${roleAssignmentScope(sender)}', ${principal.slice(1, -1)}, '${roleDefinitionId(role.serviceBusDataSender)}')]`,
          );
        }
      });

      it('grants the app Reader on each topic, so the drift guard can read it and its subscriptions, and nothing else there', () => {
        const topics = resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics');
        const readers = roleAssignments(defaults()).filter(
          (assignment) => at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.reader),
        );

        expect(topics.length).toBeGreaterThan(0);
        expect(readers.map(roleAssignmentScope).sort()).toEqual(topics.map((topic) => topic.id).sort());
        expect(appRoleAssignments(defaults())).toEqual(expect.arrayContaining(readers));
        for (const reader of readers) expect(at(reader, 'properties.principalType')).toBe('ServicePrincipal');
      });

      it('grants nothing at namespace scope, only Data Sender and Reader on a topic, and no Data Owner unless asked', () => {
        const namespaceId = only(defaults(), 'Microsoft.ServiceBus/namespaces').id;
        const onServiceBus = roleAssignments(defaults()).filter((assignment) =>
          roleAssignmentScope(assignment).startsWith(namespaceId),
        );
        const aboveSubscriptions = onServiceBus.filter(
          (assignment) => !roleAssignmentScope(assignment).includes('/subscriptions/', namespaceId.length),
        );

        expect(onServiceBus.map(roleAssignmentScope)).not.toContain(namespaceId);
        expect(aboveSubscriptions.length).toBeGreaterThan(0);
        for (const assignment of aboveSubscriptions) {
          expect(roleAssignmentScope(assignment)).toMatch(new RegExp(`^${namespaceId}/topics/[^/]+$`));
          expect([roleDefinitionId(role.serviceBusDataSender), roleDefinitionId(role.reader)]).toContain(
            at(assignment, 'properties.roleDefinitionId'),
          );
        }
        expect(
          roleAssignments(defaults()).filter(
            (assignment) =>
              at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataOwner),
          ),
        ).toEqual([]);
      });
    });

    describe('with Premium and Data Owner for scaling', () => {
      it('creates a Premium namespace of one messaging unit', () => {
        expect(only(premiumProvisioned(), 'Microsoft.ServiceBus/namespaces').sku).toEqual({
          name: 'Premium',
          tier: 'Premium',
          capacity: 1,
        });
      });

      it('adds Data Owner for the app on each subscription, still not on the namespace', () => {
        const owners = appRoleAssignments(premiumProvisioned()).filter(
          (assignment) =>
            at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataOwner),
        );

        expect(owners.map(roleAssignmentScope).sort()).toEqual(
          resources(premiumProvisioned(), 'Microsoft.ServiceBus/namespaces/topics/subscriptions')
            .map((subscription) => subscription.id)
            .sort(),
        );
      });
    });

    describe('modules/servicebus.bicep with other declarations', () => {
      it('keeps one $Default rule per subscription, a SQL filter when there are several subjects', () => {
        const rules = resources(
          evaluated('severalSubjects'),
          'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules',
        );

        expect(rules.map((rule) => [rule.name, rule.properties])).toEqual([
          [
            'sb-declarations/orders/audit/$Default',
            {
              filterType: 'SqlFilter',
              sqlFilter: { sqlExpression: "sys.Label IN ('OrderCreated', 'Order''s Note', 'OrderShipped')" },
            },
          ],
          [
            'sb-declarations/payments/ledger/$Default',
            { filterType: 'CorrelationFilter', correlationFilter: { label: 'PaymentReceived' } },
          ],
        ]);
      });

      it('puts each subscription under its own topic, and scopes its receiver role to it', () => {
        const subscriptions = resources(
          evaluated('severalSubjects'),
          'Microsoft.ServiceBus/namespaces/topics/subscriptions',
        );
        const receivers = roleAssignments(evaluated('severalSubjects')).filter(
          (assignment) =>
            at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataReceiver),
        );

        expect(subscriptions.map((subscription) => subscription.name)).toEqual([
          'sb-declarations/orders/audit',
          'sb-declarations/payments/ledger',
        ]);
        expect(receivers.map(roleAssignmentScope)).toEqual(
          subscriptions.map((subscription) => subscription.id),
        );
        expect(receivers.map((receiver) => receiver.name)).toEqual(
          subscriptions.map((subscription) =>
            armGuid(subscription.id, developerId, roleDefinitionId(role.serviceBusDataReceiver)),
          ),
        );
      });

      it('grants no send right when no topic declares a publisher', () => {
        expect(
          roleAssignments(evaluated('severalSubjects')).map((assignment) =>
            at(assignment, 'properties.roleDefinitionId'),
          ),
        ).toEqual([
          roleDefinitionId(role.serviceBusDataReceiver),
          roleDefinitionId(role.serviceBusDataReceiver),
          // Reader on each of its two topics (the drift guard's).
          roleDefinitionId(role.reader),
          roleDefinitionId(role.reader),
        ]);
      });

      it('grants Data Sender on the topics with publishers only, not on one whose list is empty or absent', () => {
        const topics = resources(evaluated('publishing'), 'Microsoft.ServiceBus/namespaces/topics');
        const senders = roleAssignments(evaluated('publishing')).filter(
          (assignment) =>
            at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataSender),
        );
        const orders = topics.find((topic) => topic.name === 'sb-declarations/orders');

        expect(topics).toHaveLength(3);
        expect(senders.map(roleAssignmentScope)).toEqual([orders?.id]);
        expect(senders.map((sender) => sender.name)).toEqual([
          armGuid(String(orders?.id), developerId, roleDefinitionId(role.serviceBusDataSender)),
        ]);
        expect(senders.map((sender) => at(sender, 'properties.principalId'))).toEqual([developerId]);
      });

      describe('with delayedRetry on some subscriptions', () => {
        const retryCopies = (name: string): string =>
          ` OR sys.Label = '${RETRY_SUBJECT}' AND ${RETRY_PROPERTIES.for} = '${name}'`;
        /** The local peer's $Default (packages/local-azure/src/servicebus/rules.ts), as the ARM rule's properties. */
        const asArm = (filter: RuleFilter): unknown =>
          filter.kind === 'correlation'
            ? { filterType: 'CorrelationFilter', correlationFilter: { label: filter.subject } }
            : filter.kind === 'sql'
              ? { filterType: 'SqlFilter', sqlFilter: { sqlExpression: filter.expression } }
              : filter;
        const rules = (): [string, unknown][] =>
          resources(evaluated('retrying'), 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules').map(
            (rule) => [rule.name, rule.properties],
          );

        it('gives such a subscription a SQL $Default of its subjects or the delayed copies for it, whatever its number of subjects', () => {
          expect(retryCopies('x')).toBe(" OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'x'");
          expect(rules()).toEqual([
            [
              'sb-declarations/orders/audit.recorder/$Default',
              {
                filterType: 'SqlFilter',
                sqlFilter: {
                  sqlExpression:
                    "sys.Label IN ('OrderCreated', 'Order''s Note') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'audit.recorder'",
                },
              },
            ],
            [
              'sb-declarations/orders/shipping.planner/$Default',
              {
                filterType: 'SqlFilter',
                sqlFilter: {
                  sqlExpression:
                    "sys.Label IN ('OrderCreated') OR sys.Label = 'inbox.retry' AND inboxRetryFor = 'shipping.planner'",
                },
              },
            ],
            [
              'sb-declarations/orders/billing.one/$Default',
              { filterType: 'CorrelationFilter', correlationFilter: { label: 'OrderShipped' } },
            ],
            [
              'sb-declarations/orders/billing.two/$Default',
              {
                filterType: 'SqlFilter',
                sqlFilter: { sqlExpression: "sys.Label IN ('OrderCreated', 'OrderShipped')" },
              },
            ],
            [
              'sb-declarations/payments/ledger/$Default',
              { filterType: 'CorrelationFilter', correlationFilter: { label: 'PaymentReceived' } },
            ],
            [
              'sb-declarations/refunds/ledger.refunds/$Default',
              {
                filterType: 'SqlFilter',
                sqlFilter: {
                  sqlExpression: `sys.Label IN ('RefundIssued')${retryCopies('ledger.refunds')}`,
                },
              },
            ],
          ]);
        });

        it('is the filter the local peer gives each subscription, with delayedRetry or without', () => {
          const declared = retryingTopics.flatMap((topic) =>
            topic.subscriptions.map((subscription) => ({ topic: topic.name, ...subscription })),
          );

          expect(declared.filter((subscription) => subscription.delayedRetry !== undefined)).toHaveLength(3);
          expect(rules()).toEqual(
            declared.map((subscription) => [
              `sb-declarations/${subscription.topic}/${subscription.name}/$Default`,
              asArm(
                subjectsFilter(
                  subscription.subjects,
                  subscription.delayedRetry === undefined
                    ? undefined
                    : { copies: RETRY_COPIES, for: subscription.name },
                ),
              ),
            ]),
          );
        });

        it('grants Data Sender once on each topic with a delayedRetry subscription or publishers, not on the others', () => {
          const topics = resources(evaluated('retrying'), 'Microsoft.ServiceBus/namespaces/topics');
          const senders = roleAssignments(evaluated('retrying')).filter(
            (assignment) =>
              at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(role.serviceBusDataSender),
          );
          const topicId = (name: string): string =>
            String(topics.find((topic) => topic.name === `sb-declarations/${name}`)?.id);

          expect(sendingTopics({ topics: retryingTopics })).toEqual(['orders', 'refunds']);
          expect(senders.map(roleAssignmentScope)).toEqual([topicId('orders'), topicId('refunds')]);
          expect(senders.map((sender) => sender.name)).toEqual(
            ['orders', 'refunds'].map((name) =>
              armGuid(topicId(name), developerId, roleDefinitionId(role.serviceBusDataSender)),
            ),
          );
          expect(senders.map((sender) => at(sender, 'properties.principalId'))).toEqual([
            developerId,
            developerId,
          ]);
          expect(senders.map((sender) => at(sender, 'properties.principalType'))).toEqual([
            'ServicePrincipal',
            'ServicePrincipal',
          ]);
        });

        it('grants nothing else: a receiver per subscription, Reader per topic, as without delayedRetry', () => {
          const assignments = roleAssignments(evaluated('retrying'));
          const count = (id: string): number =>
            assignments.filter(
              (assignment) => at(assignment, 'properties.roleDefinitionId') === roleDefinitionId(id),
            ).length;

          expect(new Set(assignments.map((assignment) => assignment.name)).size).toBe(assignments.length);
          expect(count(role.serviceBusDataReceiver)).toBe(6);
          expect(count(role.reader)).toBe(3);
          expect(count(role.serviceBusDataSender)).toBe(2);
          expect(assignments).toHaveLength(6 + 3 + 2);
        });
      });

      it('refuses a subscription that declares no subject', () => {
        expect(refusal('noSubject')).toContain(
          'src/topology.json: subscription orders/nothing declares no subjects.',
        );
      });
    });
  },
);
