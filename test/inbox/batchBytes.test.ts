import fc from 'fast-check';

import { jsonBytesBound } from '../../src/inbox/jsonBytes';

/** What the batch size check counted before the bound: the exact bytes, or the error JSON.stringify throws. */
function exactBytes(value: unknown): number | Error {
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? '');
  } catch (error) {
    return error as Error;
  }
}

describe('jsonBytesBound', () => {
  const runs = { numRuns: 500 };

  it('is never below the bytes of the JSON, for JSON documents with any text and any number', () => {
    const documents = fc.jsonValue({ stringUnit: 'binary' });
    const numbers = fc.array(fc.double(), { maxLength: 20 });
    fc.assert(
      fc.property(fc.oneof(documents, numbers), (value) => {
        expect(jsonBytesBound(value)).toBeGreaterThanOrEqual(exactBytes(value) as number);
      }),
      runs,
    );
  });

  it('is never below the bytes, and is Infinity where JSON.stringify throws, for any value', () => {
    const values = fc.anything({
      key: fc.string({ unit: 'binary' }),
      stringUnit: 'binary',
      withBigInt: true,
      withBoxedValues: true,
      withDate: true,
      withMap: true,
      withNullPrototype: true,
      withSparseArray: true,
      withTypedArray: true,
    });
    fc.assert(
      fc.property(values, (value) => {
        const exact = exactBytes(value);
        if (exact instanceof Error) expect(jsonBytesBound(value)).toBe(Infinity);
        else expect(jsonBytesBound(value)).toBeGreaterThanOrEqual(exact);
      }),
      runs,
    );
  });

  it('covers the longest number text and escaped control characters and lone surrogates', () => {
    const value = [-0.0000037191301872534835, '\u0000\u001f\ud800', { '\udc00': -1.7976931348623157e308 }];

    expect(jsonBytesBound(value)).toBeGreaterThanOrEqual(exactBytes(value) as number);
  });

  it('gives up (Infinity) on a value that contains itself, rather than walking forever', () => {
    const cycle: unknown[] = [];
    cycle.push(cycle);

    expect(jsonBytesBound(cycle)).toBe(Infinity);
  });

  it('defers to toJSON and non-plain objects (Infinity), whose JSON it cannot bound', () => {
    expect(jsonBytesBound({ at: new Date(0) })).toBe(Infinity);
    expect(jsonBytesBound({ toJSON: () => 'x'.repeat(10) })).toBe(Infinity);
    expect(jsonBytesBound([new Map()])).toBe(Infinity);
  });
});
