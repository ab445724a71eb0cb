// Public network access of Service Bus, Cosmos DB, storage and the function app: one parameter,
// Enabled by default because the template creates no virtual network integration or private
// endpoints for the app to reach its services through (and azd deploys through the app's public SCM
// endpoint). Disabled is passed to all four, and refused with a Standard namespace, which has no
// private endpoints.

import { at, describeInfra, only } from '@idempotent-consumers/devkit/internal/testing/bicep';

const publicServices = [
  'Microsoft.ServiceBus/namespaces',
  'Microsoft.DocumentDB/databaseAccounts',
  'Microsoft.Storage/storageAccounts',
  'Microsoft.Web/sites',
];

describeInfra(
  'public network access',
  (azd) => ({
    disabledPremium: { parameters: azd({ PUBLIC_NETWORK_ACCESS: 'Disabled', SERVICEBUS_SKU: 'Premium' }) },
    disabledStandard: { parameters: azd({ PUBLIC_NETWORK_ACCESS: 'Disabled' }) },
  }),
  ({ compiled, evaluated, refusal }) => {
    const access = (variant: 'defaults' | 'disabledPremium'): Record<string, unknown> =>
      Object.fromEntries(
        publicServices.map((type) => [
          type,
          at(only(evaluated(variant), type), 'properties.publicNetworkAccess'),
        ]),
      );

    it('is one parameter, Enabled or Disabled, Enabled by default', () => {
      const parameter = compiled().template.parameters['publicNetworkAccess'];

      expect(parameter).toMatchObject({
        type: 'string',
        defaultValue: 'Enabled',
        allowedValues: ['Enabled', 'Disabled'],
      });
      expect(String(at(parameter, 'metadata.description'))).toContain('virtual network integration');
    });

    it('is Enabled on Service Bus, Cosmos DB, storage and the function app with the azd defaults', () => {
      expect(access('defaults')).toEqual(Object.fromEntries(publicServices.map((type) => [type, 'Enabled'])));
    });

    it('is Disabled on all four when PUBLIC_NETWORK_ACCESS=Disabled, with a Premium namespace', () => {
      expect(access('disabledPremium')).toEqual(
        Object.fromEntries(publicServices.map((type) => [type, 'Disabled'])),
      );
    });

    it('refuses Disabled with a Standard namespace, saying why', () => {
      expect(refusal('disabledStandard')).toContain(
        'publicNetworkAccess (PUBLIC_NETWORK_ACCESS) Disabled needs serviceBusSku (SERVICEBUS_SKU) Premium: a Standard namespace has no private endpoints',
      );
    });
  },
);
