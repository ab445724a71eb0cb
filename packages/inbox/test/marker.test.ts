import { createHash } from 'node:crypto';

import fc from 'fast-check';

import { canonicalJson, markerId, markerKey, payloadHash } from '../src/marker';

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

/**
 * The canonical JSON that hashed every payload until the walk became non-recursive, kept here as
 * the reference: the new one must give the same text for every value this one accepts.
 */
function recursiveCanonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(recursiveCanonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${recursiveCanonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

describe('canonicalJson', () => {
  const runs = { numRuns: 500 };

  it('writes what the recursive version wrote, for JSON bodies with any UTF-16 text', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), (body) => {
        expect(canonicalJson(body)).toBe(recursiveCanonicalJson(body));
      }),
      runs,
    );
  });

  it('writes what the recursive version wrote, for any value it accepted', () => {
    const values = fc.anything({
      key: fc.string({ unit: 'binary' }),
      stringUnit: 'binary',
      withBoxedValues: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withObjectString: true,
      withSparseArray: true,
      withTypedArray: true,
    });
    fc.assert(
      fc.property(values, (value) => {
        expect(canonicalJson(value)).toBe(recursiveCanonicalJson(value));
      }),
      runs,
    );
  });

  it('does not depend on the order keys were written in', () => {
    const entries = fc.uniqueArray(fc.tuple(fc.string({ unit: 'binary' }), fc.jsonValue()), {
      selector: ([key]) => key,
    });
    fc.assert(
      fc.property(entries, (pairs) => {
        const forwards = Object.fromEntries(pairs);
        const backwards = Object.fromEntries([...pairs].reverse());

        expect(canonicalJson(backwards)).toBe(canonicalJson(forwards));
      }),
      runs,
    );
  });

  it('writes holes, undefined, -0, non-finite numbers and dates as before', () => {
    const value = {
      // eslint-disable-next-line no-sparse-arrays
      z: [1, , undefined, -0, NaN, Infinity],
      a: new Date(0),
      m: undefined,
      s: 'é\u2028\ud800',
    };

    expect(canonicalJson(value)).toBe(recursiveCanonicalJson(value));
    expect(canonicalJson(value)).toBe('{"a":{},"s":"é\u2028\\ud800","z":[1,,null,0,null,null]}');
  });

  it.each([3_000, 100_000])('handles arrays and objects nested %i deep, as JSON.parse does', (depth) => {
    const arrays = `${'['.repeat(depth)}${']'.repeat(depth)}`;
    const objects = `${'{"k":'.repeat(depth)}1${'}'.repeat(depth)}`;

    expect(canonicalJson(JSON.parse(arrays))).toBe(arrays);
    expect(canonicalJson(JSON.parse(objects))).toBe(objects);
  });

  it('refuses a value that contains itself, and writes one shared twice', () => {
    const shared = { b: 1 };
    const cycle: Record<string, unknown> = { a: [shared, shared] };
    (cycle.a as unknown[]).push(cycle);

    expect(() => canonicalJson(cycle)).toThrow(TypeError);
    expect(canonicalJson({ a: [shared, shared] })).toBe('{"a":[{"b":1},{"b":1}]}');
  });

  it('refuses a cycle that starts deep down, and writes a value shared deep down', () => {
    const nest = (depth: number, inner: unknown[]): unknown[] => {
      let outer = inner;
      for (let i = 0; i < depth; i++) outer = [outer];
      return outer;
    };
    const loop: unknown[] = [];
    const deepCycle = nest(40, [nest(5, loop)]);
    loop.push(deepCycle);
    const shared = { b: 1 };
    const deepShared = nest(40, [shared, [shared]]);

    expect(() => canonicalJson(deepCycle)).toThrow(TypeError);
    expect(canonicalJson(deepShared)).toBe(recursiveCanonicalJson(deepShared));
  });

  it('fails on a BigInt, as the recursive version did', () => {
    expect(() => recursiveCanonicalJson({ n: 1n })).toThrow(TypeError);
    expect(() => canonicalJson({ n: 1n })).toThrow(TypeError);
  });
});
