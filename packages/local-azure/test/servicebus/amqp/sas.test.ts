import { createHmac } from 'node:crypto';

import { isServiceBusError, ServiceBusClient } from '@azure/service-bus';

import { PeerError } from '../../../src/servicebus/amqp/errors';
import { checkToken, covers, LOCAL_KEY, SAS_TOKEN_TYPE } from '../../../src/servicebus/amqp/sas';
import { PAYMENTS, TOPIC, usePeer } from '../../../src/testing/peer';

/**
 * Shared access signatures as the local peer checks them: the check itself, and what
 * @azure/service-bus sees when a connection string has the wrong key or an expired token. (The
 * .NET client's view of the same refusals: packages/local-azure/test/engines/serviceBus.test.ts.)
 */
const NOW = Date.UTC(2026, 11, 2, 12);
const inAnHour = NOW / 1000 + 3600;

/** Signs as a client does: encode(resource)\nexpiry under the key's UTF-8 bytes. */
function sign(
  resource: string,
  expiry: number,
  options: { key?: string; keyName?: string; encode?: (text: string) => string } = {},
): string {
  const encode = options.encode ?? encodeURIComponent;
  const sr = encode(resource);
  const sig = createHmac('sha256', options.key ?? LOCAL_KEY.value)
    .update(`${sr}\n${expiry}`)
    .digest('base64');
  return `SharedAccessSignature sr=${sr}&sig=${encodeURIComponent(sig)}&se=${expiry}&skn=${options.keyName ?? LOCAL_KEY.name}`;
}

const refusal = (run: () => unknown): string => {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(PeerError);
    expect((error as PeerError).condition).toBe('amqp:unauthorized-access');
    return (error as Error).message;
  }
  throw new Error('the token was accepted');
};

describe('checkToken', () => {
  it('accepts a token signed with the key and grants its resource path until it expires', () => {
    expect(
      checkToken(SAS_TOKEN_TYPE, sign('sb://127.0.0.1:5672/Orders/Subscriptions/Billing', inAnHour), NOW),
    ).toEqual({
      path: 'orders/subscriptions/billing',
      expiresAt: inAnHour * 1000,
    });
  });

  it('checks the resource as the token spells it: .NET encodes a space as +, JavaScript as %20', () => {
    const dotnet = (text: string): string => encodeURIComponent(text).replace(/%20/g, '+');
    expect(checkToken(SAS_TOKEN_TYPE, sign('sb://host/a b', inAnHour, { encode: dotnet }), NOW).path).toBe(
      'a b',
    );
    expect(checkToken(SAS_TOKEN_TYPE, sign('sb://host/a b', inAnHour), NOW).path).toBe('a b');
  });

  it('refuses a token signed with another key, naming an invalid signature', () => {
    expect(
      refusal(() => checkToken(SAS_TOKEN_TYPE, sign('sb://h/t', inAnHour, { key: 'other' }), NOW)),
    ).toMatch(/^InvalidSignature/);
  });

  it('refuses a token whose resource or expiry was changed after signing', () => {
    const token = sign('sb://h/orders', inAnHour);
    expect(refusal(() => checkToken(SAS_TOKEN_TYPE, token.replace('orders', 'payments'), NOW))).toMatch(
      /^InvalidSignature/,
    );
    expect(
      refusal(() => checkToken(SAS_TOKEN_TYPE, token.replace(`se=${inAnHour}`, `se=${inAnHour + 1}`), NOW)),
    ).toMatch(/^InvalidSignature/);
  });

  it('refuses a token at and after its expiry, saying when it expired', () => {
    const token = sign('sb://h/t', inAnHour);
    expect(checkToken(SAS_TOKEN_TYPE, token, inAnHour * 1000 - 1).expiresAt).toBe(inAnHour * 1000);
    expect(refusal(() => checkToken(SAS_TOKEN_TYPE, token, inAnHour * 1000))).toBe(
      'ExpiredToken: The token expired at 2026-12-02T13:00:00.000Z.',
    );
  });

  it('refuses a key name the namespace does not have, bounding the name it echoes', () => {
    const name = 'x'.repeat(500);
    const message = refusal(() =>
      checkToken(SAS_TOKEN_TYPE, sign('sb://h/t', inAnHour, { keyName: name }), NOW),
    );
    expect(message).toContain(`'${'x'.repeat(64)}…'`);
    expect(message).toContain(`the local peer's is '${LOCAL_KEY.name}'`);
    expect(message.length).toBeLessThan(200);
  });

  it.each([
    [
      'an Azure AD token',
      'jwt',
      'eyJ0eXAiOiJKV1QifQ.e30.sig',
      /shared access signatures \(servicebus.windows.net:sastoken\) only, not 'jwt'/,
    ],
    ['no token', SAS_TOKEN_TYPE, undefined, /missing/],
    [
      'a token longer than any signature',
      SAS_TOKEN_TYPE,
      `SharedAccessSignature sr=${'a'.repeat(5000)}`,
      /longer/,
    ],
    ['another scheme', SAS_TOKEN_TYPE, 'Bearer abc', /does not start with 'SharedAccessSignature'/],
    [
      'a token without a signature',
      SAS_TOKEN_TYPE,
      `SharedAccessSignature sr=x&se=${inAnHour}&skn=${LOCAL_KEY.name}`,
      /lacks one of sr, sig, se and skn/,
    ],
    [
      'an expiry that is not a number',
      SAS_TOKEN_TYPE,
      sign('sb://h/t', inAnHour).replace(/se=\d+/, 'se=soon'),
      /not a number of seconds/,
    ],
    [
      'a resource that is not URL-encoded (signed as it is)',
      SAS_TOKEN_TYPE,
      sign('sb://h/%E0%A4%A', inAnHour, { encode: (text) => text }),
      /not URL-encoded/,
    ],
  ])('refuses %s with a reason', (_, type, token, reason) => {
    expect(refusal(() => checkToken(type, token, NOW))).toMatch(reason);
  });
});

describe('covers', () => {
  const grant = { path: 'orders/subscriptions/billing', expiresAt: NOW + 1 };

  it('covers the entity and what lies under it, ignoring case, segment by segment', () => {
    expect(covers([grant], 'Orders/Subscriptions/Billing', NOW)).toBe(true);
    expect(covers([grant], 'orders/subscriptions/billing/$deadletterqueue/$management', NOW)).toBe(true);
    expect(covers([grant], 'orders/subscriptions/billing2', NOW)).toBe(false);
    expect(covers([grant], 'orders', NOW)).toBe(false);
  });

  it('covers everything with a namespace-wide token, and nothing once a token has expired', () => {
    expect(covers([{ path: '', expiresAt: NOW + 1 }], 'any/thing', NOW)).toBe(true);
    expect(covers([grant], 'orders/subscriptions/billing', NOW + 1)).toBe(false);
    expect(covers([], 'orders', NOW)).toBe(false);
  });
});

describe('@azure/service-bus against the peer’s checks', () => {
  const fixture = usePeer();
  const withKey = (key: string): string =>
    fixture.peer.connectionString.replace(`SharedAccessKey=${LOCAL_KEY.value}`, `SharedAccessKey=${key}`);
  const withToken = (token: string): string =>
    `Endpoint=sb://${fixture.peer.host}:${fixture.peer.port};SharedAccessSignature=${token};UseDevelopmentEmulator=true;`;

  async function sendWith(connectionString: string): Promise<unknown> {
    const client = new ServiceBusClient(connectionString, { retryOptions: { maxRetries: 0 } });
    try {
      await client
        .createSender(TOPIC)
        .sendMessages({ body: 'x', messageId: `sas-${Math.random()}`, subject: 'PaymentReceived' });
      return 'sent';
    } catch (error) {
      return error;
    } finally {
      await client.close();
    }
  }

  it('refuses a connection string with the wrong key as UnauthorizedAccess, and nothing arrives', async () => {
    const refused = await sendWith(withKey('not-the-key'));

    expect(isServiceBusError(refused) && refused.code).toBe('UnauthorizedAccess');
    expect((refused as Error).message).toMatch(/InvalidSignature/);
    expect(fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity.activeCount).toBe(0);
  });

  it('refuses an expired shared access signature, and accepts the same one unexpired', async () => {
    const resource = `sb://${fixture.peer.host}:${fixture.peer.port}/${TOPIC}`;
    const now = Math.floor(Date.now() / 1000);

    const expired = await sendWith(withToken(sign(resource, now - 60)));
    expect(isServiceBusError(expired) && expired.code).toBe('UnauthorizedAccess');
    expect((expired as Error).message).toMatch(/ExpiredToken/);

    expect(await sendWith(withToken(sign(resource, now + 3600)))).toBe('sent');
    expect(fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity.activeCount).toBe(1);
  });

  it('detaches a link once its token has expired with no renewed one: the next send is refused, nothing more arrives', async () => {
    const resource = `sb://${fixture.peer.host}:${fixture.peer.port}/${TOPIC}`;
    const expiry = Math.floor(Date.now() / 1000) + 2;
    const client = new ServiceBusClient(withToken(sign(resource, expiry)), {
      retryOptions: { maxRetries: 0 },
    });
    const message = (id: string) => ({ body: 'x', messageId: id, subject: 'PaymentReceived' });
    try {
      const sender = client.createSender(TOPIC);
      await sender.sendMessages(message('before-expiry'));
      // Past the expiry, with a second's margin for the peer's check to have run.
      await new Promise((resolve) => setTimeout(resolve, expiry * 1000 + 1000 - Date.now()));
      const refused = await sender.sendMessages(message('after-expiry')).then(
        () => 'sent',
        (error: unknown) => error,
      );

      expect(isServiceBusError(refused) && refused.code).toBe('UnauthorizedAccess');
      expect((refused as Error).message).toMatch(/ExpiredToken/);
      expect(fixture.peer.broker.subscription(TOPIC, PAYMENTS).entity.activeCount).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('refuses a link to an entity the token does not cover', async () => {
    const resource = `sb://${fixture.peer.host}:${fixture.peer.port}/another-topic`;
    const refused = await sendWith(withToken(sign(resource, Math.floor(Date.now() / 1000) + 3600)));

    expect(isServiceBusError(refused) && refused.code).toBe('UnauthorizedAccess');
    expect((refused as Error).message).toMatch(`Unauthorized access to '${TOPIC}'`);
  });
});
