// The function app's own limits and credentials: Flex Consumption's scale-out bound (40 to 1000,
// refused outside it when the template is evaluated, before anything is created), and no basic
// (user name and password) publishing credentials on its SCM and FTP endpoints.

import {
  at,
  azdEnvironment,
  azdParameters,
  describeWithBicep,
  evaluateVariants,
  locateBicep,
  only,
  resources,
} from './bicep';

const bicep = locateBicep();

describeWithBicep(bicep)('the function app', () => {
  const { compiled, evaluated, refusal } = evaluateVariants(bicep, (template) => {
    const base = azdParameters(template, azdEnvironment);
    return {
      defaults: { parameters: base },
      lowestMaximum: { parameters: { ...base, functionMaximumInstanceCount: 40 } },
      belowLowestMaximum: { parameters: { ...base, functionMaximumInstanceCount: 39 } },
      belowLowestMaximumFromAzd: {
        parameters: azdParameters(template, { ...azdEnvironment, FUNCTION_MAXIMUM_INSTANCE_COUNT: '39' }),
      },
    };
  });
  const maximumInstanceCount = (variant: 'defaults' | 'lowestMaximum'): unknown =>
    at(
      only(evaluated(variant), 'Microsoft.Web/sites'),
      'properties.functionAppConfig.scaleAndConcurrency.maximumInstanceCount',
    );

  describe('maximum instance count', () => {
    it('accepts 40 to 1000 and defaults to 100', () => {
      expect(compiled().template.parameters['functionMaximumInstanceCount']).toMatchObject({
        type: 'int',
        defaultValue: 100,
        minValue: 40,
        maxValue: 1000,
      });
      expect(maximumInstanceCount('defaults')).toBe(100);
      expect(maximumInstanceCount('lowestMaximum')).toBe(40);
    });

    it('refuses 39, given as a parameter or as FUNCTION_MAXIMUM_INSTANCE_COUNT in the azd environment', () => {
      for (const variant of ['belowLowestMaximum', 'belowLowestMaximumFromAzd'] as const) {
        expect(refusal(variant)).toContain(
          'is too small to assign to a target for which the minimum allowable value is 40',
        );
      }
    });
  });

  it('allows no basic-authentication publishing on its SCM (Kudu) and FTP endpoints', () => {
    const site = only(evaluated('defaults'), 'Microsoft.Web/sites');
    const policies = resources(
      evaluated('defaults'),
      'Microsoft.Web/sites/basicPublishingCredentialsPolicies',
    );

    expect(policies.map((policy) => [policy.name, policy.properties]).sort()).toEqual([
      [`${site.name}/ftp`, { allow: false }],
      [`${site.name}/scm`, { allow: false }],
    ]);
    expect(at(site, 'properties.siteConfig.ftpsState')).toBe('Disabled');
  });
});
