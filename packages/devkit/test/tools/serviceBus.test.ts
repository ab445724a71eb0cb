import { connectServiceBus } from '../../src/tools/serviceBus';

describe('connecting to Service Bus', () => {
  it('uses identity for a namespace, whichever way it is written', () => {
    const short = connectServiceBus({ SERVICEBUS_NAMESPACE: 'contoso' });
    const full = connectServiceBus({ SERVICEBUS_NAMESPACE: 'sb://contoso.servicebus.windows.net/' });

    expect(short.description).toBe('contoso.servicebus.windows.net (signed in with DefaultAzureCredential)');
    expect(full.description).toBe(short.description);
    expect(short.client.fullyQualifiedNamespace).toBe('contoso.servicebus.windows.net');
    void short.client.close();
    void full.client.close();
  });

  it('refuses to guess when both a namespace and a connection string are set', () => {
    expect(() =>
      connectServiceBus({
        SERVICEBUS_NAMESPACE: 'contoso',
        SERVICEBUS_CONNECTION_STRING: 'Endpoint=sb://localhost;UseDevelopmentEmulator=true;',
      }),
    ).toThrow(/not both/);
  });
});
