import fc from 'fast-check';

import { jsonBytesBound } from '../src/jsonBytes';

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

  it('is finite for JSON documents, and at most 25 times their bytes (a number of one digit counts as 25)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), (value) => {
        const bound = jsonBytesBound(value);
        expect(Number.isFinite(bound)).toBe(true);
        expect(bound).toBeLessThanOrEqual(25 * (exactBytes(value) as number));
      }),
      runs,
    );
  });

  it.each([
    ['an empty array', [], 2],
    ['an empty object', {}, 2],
    ['a string: 6 bytes a unit, and its quotes', 'ab', 14],
    ['a number: its longest text', 7, 25],
    ['true, false and undefined: 5', [true, false, undefined], 2 + 3 + 15],
    ['null: 4', null, 4],
    ['an array: brackets and a comma each', ['a', 1], 2 + 2 + 8 + 25],
    ['an object: braces, and a key as "…": and a comma', { ab: null }, 2 + 16 + 4],
    ['an object without a prototype', Object.assign(Object.create(null) as object, { a: 1 }), 2 + 10 + 25],
  ])('counts %s exactly as the formula says', (_name, value, bound) => {
    expect(jsonBytesBound(value)).toBe(bound);
  });

  it('walks 100,000 values, and gives up (Infinity) on the next', () => {
    expect(jsonBytesBound(new Array<number>(99_999).fill(0))).toBe(2 + 99_999 * 26);
    expect(jsonBytesBound(new Array<number>(100_000).fill(0))).toBe(Infinity);
  });

  it("defers to an array's own toJSON, which JSON.stringify calls instead of writing its items", () => {
    const array = Object.assign([1], { toJSON: () => 'x'.repeat(100) });

    expect(exactBytes(array)).toBe(102);
    expect(jsonBytesBound(array)).toBe(Infinity);
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
