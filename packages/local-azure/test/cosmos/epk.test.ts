import * as path from 'node:path';

import { effectivePartitionKey, effectivePartitionKeyOfCanonical } from '../../src/cosmos/epk';
import { canonicalKey, type PartitionKeyComponent } from '../../src/cosmos/partitionKey';
import { seededRandom } from '../../src/random';

/**
 * packages/local-azure/src/cosmos/epk.ts against @azure/cosmos's own hashing (utils/hashing/hash.js, not exported by
 * the package, so loaded by file path): the same EPK for every value, on a fixed table and on random
 * values. The random ones come from a seed (EPK_SEED=<n> replays a run; the test name shows it).
 */
type SdkComponent = PartitionKeyComponent | undefined;
type HashPartitionKey = (
  key: SdkComponent[],
  definition: { paths: string[]; kind: 'Hash' | 'MultiHash'; version: number },
) => string;

const sdkDir = require.resolve('@azure/cosmos').replace(/index\.js$/, '');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the SDK does not export it.
const { hashPartitionKey } = require(path.join(sdkDir, 'utils/hashing/hash.js')) as {
  hashPartitionKey: HashPartitionKey;
};

const HASH_V1 = { kind: 'Hash', version: 1 } as const;
const HASH_V2 = { kind: 'Hash', version: 2 } as const;
const MULTI = { kind: 'MultiHash', version: 2 } as const;

function sdk(key: SdkComponent[], definition: { kind: 'Hash' | 'MultiHash'; version: number }): string {
  return hashPartitionKey(key, { paths: key.map((_, i) => `/p${i}`), ...definition });
}

function ours(key: SdkComponent[], definition: { kind: 'Hash' | 'MultiHash'; version: 1 | 2 }): string {
  return effectivePartitionKey(key as PartitionKeyComponent[], definition);
}

const FIXED: SdkComponent[] = [
  '',
  'a',
  'p1',
  'abc',
  'partitionKey',
  // Around MurmurHash's block sizes (4 and 16 bytes with the marker bytes).
  ...Array.from({ length: 20 }, (_, n) => 'x'.repeat(n)),
  'é',
  'naïve café',
  '日本語のキー',
  '😀',
  '😀x😀',
  '\u0000',
  '\uffff',
  '\ud800', // a lone surrogate
  'y'.repeat(99),
  'y'.repeat(100),
  'y'.repeat(101),
  'z'.repeat(1000),
  '😀'.repeat(60), // a surrogate pair cut at 100 code units in version 1
  '/\\"\'{}[]',
  0,
  -0,
  1,
  -1,
  2,
  0.5,
  -2.75,
  0.1,
  Math.PI,
  1e21,
  1e300,
  -1e300,
  5e-324,
  -5e-324,
  Number.MAX_SAFE_INTEGER,
  Number.MIN_SAFE_INTEGER,
  Number.MAX_VALUE,
  -Number.MAX_VALUE,
  2 ** 32 - 1,
  2 ** 32,
  -(2 ** 31),
  true,
  false,
  null,
  {},
  undefined,
];

describe('effective partition key: the same as @azure/cosmos', () => {
  it.each([
    ['Hash v1', HASH_V1],
    ['Hash v2', HASH_V2],
    ['MultiHash, one path', MULTI],
  ] as const)('%s, a fixed table of values', (_, definition) => {
    const mismatches = FIXED.filter((value) => ours([value], definition) !== sdk([value], definition));
    expect(mismatches).toEqual([]);
  });

  it('MultiHash, two and three paths: each component hashed alone, concatenated', () => {
    const keys: SdkComponent[][] = [
      ['tenant', 'user'],
      ['tenant', 'user', 'session'],
      ['', ''],
      [1, 'a', true],
      [null, {}, -2.5],
      ['日本', undefined],
    ];
    for (const key of keys) expect([key, ours(key, MULTI)]).toEqual([key, sdk(key, MULTI)]);
    expect(ours(['a', 'b'], MULTI)).toBe(ours(['a'], MULTI) + ours(['b'], MULTI));
  });

  it('the shape of an EPK: upper-case hex, between "" and "FF"', () => {
    expect(ours(['a'], HASH_V2)).toMatch(/^[0-3][0-9A-F]{31}$/);
    expect(ours(['a', 'b', 'c'], MULTI)).toMatch(/^([0-3][0-9A-F]{31}){3}$/);
    expect(ours(['a'], HASH_V1)).toMatch(/^05[0-9A-F]+$/);
    for (const value of FIXED) expect(ours([value], HASH_V1) < 'FF').toBe(true);
  });

  it('reads a stored canonical key (a missing value is {}), as the SDK hashes undefined', () => {
    expect(effectivePartitionKeyOfCanonical(canonicalKey(['p1']), HASH_V2)).toBe(sdk(['p1'], HASH_V2));
    expect(effectivePartitionKeyOfCanonical(canonicalKey([{}]), HASH_V2)).toBe(sdk([undefined], HASH_V2));
    expect(effectivePartitionKeyOfCanonical(canonicalKey([12.5]), HASH_V1)).toBe(sdk([12.5], HASH_V1));
    expect(effectivePartitionKeyOfCanonical(canonicalKey(['a', 2, null]), MULTI)).toBe(
      sdk(['a', 2, null], MULTI),
    );
  });

  const seed = Number(process.env.EPK_SEED ?? Math.floor(Math.random() * 2 ** 31));
  it(`random values (seed ${seed}; EPK_SEED=${seed} replays it)`, () => {
    const random = seededRandom(seed);
    const mismatches: unknown[] = [];
    for (let n = 0; n < 2000; n++) {
      const value = randomComponent(random);
      for (const definition of [HASH_V1, HASH_V2, MULTI]) {
        if (ours([value], definition) !== sdk([value], definition)) mismatches.push([definition, value]);
      }
      const key = Array.from({ length: 1 + Math.floor(random() * 3) }, () => randomComponent(random));
      if (ours(key, MULTI) !== sdk(key, MULTI)) mismatches.push([MULTI, key]);
    }
    expect(mismatches).toEqual([]);
  });
});

function randomComponent(random: () => number): SdkComponent {
  const kind = Math.floor(random() * 10);
  if (kind <= 3) return randomString(random);
  if (kind === 4) return Math.floor((random() - 0.5) * 2 ** (1 + Math.floor(random() * 60)));
  if (kind === 5) return (random() - 0.5) * 10 ** Math.floor(random() * 40 - 20);
  if (kind === 6) return randomDouble(random);
  if (kind === 7) return random() < 0.5;
  if (kind === 8) return random() < 0.5 ? null : {};
  return undefined;
}

/** Any finite double, from random bits. */
function randomDouble(random: () => number): number {
  const view = new DataView(new ArrayBuffer(8));
  for (;;) {
    view.setUint32(0, Math.floor(random() * 2 ** 32));
    view.setUint32(4, Math.floor(random() * 2 ** 32));
    const value = view.getFloat64(0);
    if (Number.isFinite(value)) return value;
  }
}

/** Lengths around the hash blocks and the 100-character cut; ASCII, BMP, astral and lone surrogates. */
function randomString(random: () => number): string {
  const length = random() < 0.8 ? Math.floor(random() * 40) : 90 + Math.floor(random() * 120);
  let text = '';
  for (let i = 0; i < length; i++) {
    const range = random();
    if (range < 0.6) text += String.fromCharCode(32 + Math.floor(random() * 95));
    else if (range < 0.8) text += String.fromCharCode(0x80 + Math.floor(random() * 0xd780));
    else if (range < 0.95) text += String.fromCodePoint(0x10000 + Math.floor(random() * 0xfffff));
    else text += String.fromCharCode(0xd800 + Math.floor(random() * 0x800));
  }
  return text;
}
