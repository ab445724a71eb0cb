// Built-in role definition ids used by this template, in one place so that every assignment and the
// infra tests name the same role. Ids are the same in every Azure cloud and tenant.

@export()
@description('Azure RBAC built-in role definition ids (Microsoft.Authorization/roleDefinitions).')
var azureRoles = {
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
  serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419'
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageBlobDataReader: '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
  reader: 'acdd72a7-3385-48ef-bd42-f606fba81ae7'
}

@export()
@description('Cosmos DB data-plane built-in role definition ids (Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions).')
var cosmosRoles = {
  builtInDataContributor: '00000000-0000-0000-0000-000000000002'
}

@export()
@description('Who else gets data-plane access besides the app: the deploying user, or nobody.')
type developerPrincipal = {
  @description('Object id of the user or service principal; empty to skip every developer role.')
  id: string

  @description('Principal type recorded on the role assignments.')
  type: 'User' | 'ServicePrincipal' | 'Group'
}
