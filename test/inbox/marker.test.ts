import { createHash } from 'node:crypto';

import { markerId, markerKey, payloadHash } from '../../src/inbox/marker';

/**
 * Markers already stored in a deployed container must keep matching: a redelivery after an upgrade
 * has to find its marker under the same id, and compare the same payload hash. These values were
 * computed by the implementation that shipped first; any change to them is a breaking change.
 */
describe('marker ids and payload hashes stay what deployed stores hold', () => {
  it.each([
    ['billing.payment-applier', 'payment-1', 'inbox-IZfKAN9FVsiAyIxr-1HwgeNJAoZoGqSFULgeJEFNlGI'],
    [
      'inventory.stock-reserver',
      'order-42 ✓ ünïcødé 😀',
      'inbox-Xfwn12G0dzRTso8k3zELwh1Ij0WduSTknN0V073KMRY',
    ],
    [
      'billing.payment-applier',
      markerKey({ messageIdIsLossy: true }, '12345678901234567000', 'sha256:abc'),
      'inbox-bY9eb0gcfZKl5Td4rLYirARl4wDL107yGorcNOG4_64',
    ],
  ])('markerId(%j, %j)', (consumer, messageId, expected) => {
    expect(markerId(consumer, messageId)).toBe(expected);
  });

  it('hashes the JSON text with keys sorted and no spaces', () => {
    const text = '{"amount":12.5,"currency":"EUR","invoiceId":"INV-1","paymentId":"PAY-1"}';

    expect(payloadHash({ paymentId: 'PAY-1', invoiceId: 'INV-1', amount: 12.5, currency: 'EUR' })).toBe(
      `sha256:${createHash('sha256').update(text).digest('base64url')}`,
    );
  });

  it.each([
    [
      'a payment',
      { paymentId: 'PAY-1', invoiceId: 'INV-1', amount: 12.5, currency: 'EUR' },
      'sha256:FRZCkgD1JKmEB1r8x2A6LMIVvZK-hVKJseHjQgsZIpQ',
    ],
    [
      'the same payment, keys in another order',
      { currency: 'EUR', amount: 12.5, invoiceId: 'INV-1', paymentId: 'PAY-1' },
      'sha256:FRZCkgD1JKmEB1r8x2A6LMIVvZK-hVKJseHjQgsZIpQ',
    ],
    [
      'nesting, unicode, escapes, -0, 1e21, undefined and integer-like keys',
      {
        b: [1, { d: null, c: 'ü😀\u2028"\\' }],
        a: -0,
        e: 1e21,
        f: 0.1,
        g: undefined,
        '10': true,
        '9': false,
      },
      'sha256:acBVW_FPybgW46ZcGcGtM8SUvM0YGF1Dz64HII3Hky4',
    ],
    ['an empty array', [], 'sha256:T1PNoYwrqgwDVLtfmj7L5e0Sq02OEbqHPC8RFhICuUU'],
    ['a string', 'text', 'sha256:Hh0PJR06dvorG_yBFkB4VyYjQDiH2wKYi1BLBJLp8HY'],
    ['null', null, 'sha256:dCNOmK_nSY-12vHzasLXiswzlGT5UHA7jAGYkvmCuQs'],
  ])('payloadHash of %s', (_name, body, expected) => {
    expect(payloadHash(body)).toBe(expected);
  });
});
