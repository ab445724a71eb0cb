// The user-assigned identity the function app uses for everything: host storage, deployment package,
// Service Bus, Cosmos DB and Application Insights ingestion. Being user-assigned, it exists before the
// app, so every role assignment is in place before the host first starts.

@description('Name of the user-assigned managed identity.')
param name string

@description('Azure region.')
param location string

@description('Tags applied to the identity.')
param tags object

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2024-11-30' = {
  name: name
  location: location
  tags: tags
}

output id string = identity.id
output name string = identity.name
output clientId string = identity.properties.clientId
output principalId string = identity.properties.principalId
