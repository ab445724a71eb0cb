// Who gets access, and to what: the app only the roles granted next to each resource (see
// servicebus, cosmos, functionapp and monitoring tests), the developer (principalId: the principal
// azd provisions as) and the service principal of the CI live tests (testPrincipalId). Neither may write
// to the deployment container: a package written there runs as the app, with all the app's data
// access. The live tests get exactly what sample/liveTests.ts does, read from its source.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import {
  appRoleAssignments,
  armGuid,
  at,
  declaredSubscriptions,
  describeInfra,
  developerId,
  grants,
  moduleOutput,
  only,
  type PredictedResource,
  resources,
  role,
  roleAssignments,
  roleAssignmentScope,
  roleDefinitionId,
  sendingTopics,
  type Snapshot,
} from '@idempotent-consumers/devkit/internal/testing/bicep';

const testPrincipalId = '7e2c1b0e-2222-4333-8444-955566667777';
/** Azure RBAC roles that can write blobs (Storage Blob Data Contributor is not used by the template). */
const blobWriters = [role.storageBlobDataOwner, 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'].map(roleDefinitionId);
const cosmosAction = (action: string): string => `Microsoft.DocumentDB/databaseAccounts/${action}`;
const itemAction = (action: string): string => cosmosAction(`sqlDatabases/containers/${action}`);

/**
 * The calls sample/liveTests.ts can make and the permission each needs. Every call the file makes
 * must be here; the test fails on a data call it does not know.
 */
const liveTestCalls = [
  { call: /\.items\s*\.create\b/, cosmos: itemAction('items/create') },
  { call: /\.item\([^)]*\)\s*\.read\b/, cosmos: itemAction('items/read') },
  { call: /\.items\s*\.query\b/, cosmos: itemAction('executeQuery') },
  { call: /\.items\s*\.upsert\b/, cosmos: itemAction('items/upsert') },
  { call: /\.(replace|patch)\(/, cosmos: itemAction('items/replace') },
  { call: /\.delete\(/, cosmos: itemAction('items/delete') },
  { call: /\.createSender\(/, serviceBus: role.serviceBusDataSender },
  { call: /\.createReceiver\(/, serviceBus: role.serviceBusDataReceiver },
] as const;
// npm run remove:samples removes the sample's live test: its roles are then checked against the next.
const liveTestsFile = path.join(PROJECT_ROOT, 'sample', 'liveTests.ts');
const liveTestsSource = existsSync(liveTestsFile) ? readFileSync(liveTestsFile, 'utf8') : '';
const liveTestsUse = liveTestCalls.filter(({ call }) => call.test(liveTestsSource));
const describeLiveTests = liveTestsSource === '' ? describe.skip : describe;

describeInfra(
  'roles of the developer and of the live tests',
  (azd) => ({
    withPrincipals: {
      parameters: azd({ AZURE_PRINCIPAL_ID: developerId, AZURE_TEST_PRINCIPAL_ID: testPrincipalId }),
    },
    developerRolesOff: {
      parameters: azd({ AZURE_PRINCIPAL_ID: developerId, GRANT_DEVELOPER_ROLES: 'false' }),
    },
  }),
  ({ compiled, defaults, evaluated }) => {
    const withPrincipals = (): Snapshot => evaluated('withPrincipals');
    const assignedTo = (principal: string): PredictedResource[] =>
      roleAssignments(withPrincipals()).filter(
        (assignment) => at(assignment, 'properties.principalId') === principal,
      );
    const cosmosAssignmentOf = (principal: string): PredictedResource | undefined =>
      resources(withPrincipals(), 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments').find(
        (assignment) => at(assignment, 'properties.principalId') === principal,
      );
    const topicIds = (): string[] =>
      resources(withPrincipals(), 'Microsoft.ServiceBus/namespaces/topics').map((topic) => topic.id);
    const deploymentContainer = (): PredictedResource =>
      only(withPrincipals(), 'Microsoft.Storage/storageAccounts/blobServices/containers');

    describe('the developer (AZURE_PRINCIPAL_ID)', () => {
      it('sends to and receives from each topic, publishes telemetry and reads the deployment container: nothing else at Azure RBAC level', () => {
        const component = only(withPrincipals(), 'Microsoft.Insights/components');

        expect(grants(assignedTo(developerId)).sort()).toEqual(
          [
            ...topicIds().flatMap((topic) => [
              [topic, roleDefinitionId(role.serviceBusDataSender)],
              [topic, roleDefinitionId(role.serviceBusDataReceiver)],
            ]),
            [component.id, roleDefinitionId(role.monitoringMetricsPublisher)],
            [deploymentContainer().id, roleDefinitionId(role.storageBlobDataReader)],
          ].sort(),
        );
      });

      it('gets that read role only after the app has its blob role, so that the postprovision hook waits on the later one', () => {
        const storage = at(compiled().template, 'resources.storage.properties.template');
        const owner = at(storage, 'resources.appOwnsBlobs.properties.roleDefinitionId');

        expect(at(storage, 'resources.developerReadsPackages.dependsOn')).toContain('appOwnsBlobs');
        expect(owner).toBe("[variables('blobDataOwner')]");
        expect(at(storage, 'variables.blobDataOwner')).toContain('.storageBlobDataOwner)]');
      });

      it('is a Cosmos DB Built-in Data Contributor on the database, to run the functions locally against Azure', () => {
        const account = only(withPrincipals(), 'Microsoft.DocumentDB/databaseAccounts');
        const scope = `${account.id}/dbs/app`;
        const definition = `${account.id}/sqlRoleDefinitions/${role.cosmosBuiltInDataContributor}`;
        const assignment = cosmosAssignmentOf(developerId);

        expect(assignment?.properties).toEqual({
          roleDefinitionId: definition,
          principalId: developerId,
          scope,
        });
        expect(assignment?.name).toBe(`${account.name}/${armGuid(scope, developerId, definition)}`);
      });

      it('gets no role at all with GRANT_DEVELOPER_ROLES=false (production, a CI principal), whoever azd signs in as', () => {
        const off = evaluated('developerRolesOff');
        const toDeveloper = (assignment: PredictedResource): boolean =>
          at(assignment, 'properties.principalId') === developerId;

        expect(assignedTo(developerId).length).toBeGreaterThan(0);
        expect(roleAssignments(off).filter(toDeveloper)).toEqual([]);
        expect(
          resources(off, 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments').filter(toDeveloper),
        ).toEqual([]);
        expect(roleAssignments(off).length).toBeGreaterThan(0);
      });

      it('records their principal type and names each assignment guid(scope, principal, role)', () => {
        for (const assignment of assignedTo(developerId)) {
          const definition = String(at(assignment, 'properties.roleDefinitionId'));

          expect(at(assignment, 'properties.principalType')).toBe('User');
          expect(assignment.name).toBe(armGuid(roleAssignmentScope(assignment), developerId, definition));
        }
      });
    });

    describeLiveTests('the CI live tests (AZURE_TEST_PRINCIPAL_ID)', () => {
      it('are found making only calls whose permissions this test knows', () => {
        const dataCalls =
          liveTestsSource.match(/\.(items|item\([^)]*\))\s*\.\w+|\.create(Sender|Receiver)\(/g) ?? [];

        expect(dataCalls.length).toBeGreaterThan(0);
        for (const dataCall of dataCalls) {
          expect({ dataCall, known: liveTestCalls.some(({ call }) => call.test(dataCall)) }).toEqual({
            dataCall,
            known: true,
          });
        }
      });

      it('send to each topic (the narrowest scope of a send), as a service principal: nothing else at Azure RBAC level', () => {
        const serviceBusRoles = liveTestsUse.flatMap((use) => ('serviceBus' in use ? [use.serviceBus] : []));

        expect(serviceBusRoles).toEqual([role.serviceBusDataSender]);
        expect(grants(assignedTo(testPrincipalId)).sort()).toEqual(
          topicIds()
            .flatMap((topic) =>
              serviceBusRoles.map((serviceBusRole) => [topic, roleDefinitionId(serviceBusRole)]),
            )
            .sort(),
        );
        for (const assignment of assignedTo(testPrincipalId)) {
          const definition = String(at(assignment, 'properties.roleDefinitionId'));

          expect(at(assignment, 'properties.principalType')).toBe('ServicePrincipal');
          expect(assignment.name).toBe(armGuid(roleAssignmentScope(assignment), testPrincipalId, definition));
        }
      });

      it('hold a custom Cosmos DB role of exactly the data actions sample/liveTests.ts needs, on the container only', () => {
        const account = only(withPrincipals(), 'Microsoft.DocumentDB/databaseAccounts');
        const definition = only(withPrincipals(), 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions');
        const containerScope = `${account.id}/dbs/app/colls/state`;
        const needed = liveTestsUse.flatMap((use) => ('cosmos' in use ? [use.cosmos] : []));

        expect(needed).toEqual([
          itemAction('items/create'),
          itemAction('items/read'),
          itemAction('executeQuery'),
        ]);
        expect(definition.properties).toMatchObject({
          type: 'CustomRole',
          assignableScopes: [containerScope],
        });
        expect(at(definition, 'properties.permissions')).toEqual([
          { dataActions: [cosmosAction('readMetadata'), ...needed] },
        ]);
        expect(cosmosAssignmentOf(testPrincipalId)?.properties).toEqual({
          roleDefinitionId: definition.id,
          principalId: testPrincipalId,
          scope: containerScope,
        });
      });
    });

    it('lets nobody but the app write to the deployment container, at its scope or any scope above it', () => {
      const writers = roleAssignments(withPrincipals()).filter(
        (assignment) =>
          blobWriters.includes(String(at(assignment, 'properties.roleDefinitionId'))) &&
          deploymentContainer().id.startsWith(roleAssignmentScope(assignment)),
      );

      expect(writers.length).toBeGreaterThan(0);
      for (const writer of writers) {
        expect(String(at(writer, 'properties.principalId'))).toMatch(moduleOutput('identity', 'principalId'));
      }
    });

    it('grants nothing but the app its roles when neither principal is set', () => {
      const principals = [
        ...roleAssignments(defaults()),
        ...resources(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments'),
      ].map((assignment) => String(at(assignment, 'properties.principalId')));

      expect(principals.length).toBeGreaterThan(0);
      for (const principal of principals) {
        expect(principal).toMatch(moduleOutput('identity', 'principalId'));
      }
      expect(resources(defaults(), 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions')).toEqual([]);
    });

    describe('the app', () => {
      it('grants the app only the roles above, each named guid(scope, principal, role)', () => {
        const assignments = appRoleAssignments(defaults());

        expect(assignments).toHaveLength(roleAssignments(defaults()).length);
        expect(assignments).toHaveLength(
          declaredSubscriptions.length +
            sendingTopics().length +
            resources(defaults(), 'Microsoft.ServiceBus/namespaces/topics').length +
            3,
        );
        for (const assignment of assignments) {
          const principal = String(at(assignment, 'properties.principalId'));
          const definition = String(at(assignment, 'properties.roleDefinitionId'));

          expect(assignment.name).toBe(
            `[guid('${roleAssignmentScope(assignment)}', ${principal.slice(1, -1)}, '${definition}')]`,
          );
        }
      });
    });
  },
);
