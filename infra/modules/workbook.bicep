// An Azure Monitor workbook over what the consumers report: deliveries by consumer and outcome, the
// duplicate rate, poison deliveries and dead letters, the inbox size, request charge and processing
// duration. Its content is infra/workbook.json; its queries are those of infra/monitoring.md.

@description('Azure region of the workbook.')
param location string

@description('Tags applied to the workbook.')
param tags object

@description('Resource id of the Application Insights component the app reports to; the workbook opens on it and queries it.')
param applicationInsightsId string

// Named from the resource group alone, so that every deployment updates the same workbook instead of
// adding another (a workbook's name must be a GUID).
resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(resourceGroup().id, 'inbox-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'Inbox: idempotent Service Bus consumers'
    category: 'workbook'
    sourceId: applicationInsightsId
    serializedData: loadTextContent('../workbook.json')
  }
}

output id string = workbook.id
