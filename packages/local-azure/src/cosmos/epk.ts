import { badRequest } from './errors';
import { type RequestHeaders, single } from './http';
import type { PartitionKeyComponent, PartitionKeyDefinition } from './partitionKey';

/**
 * The effective partition key (EPK) of a partition key value: the hex string Cosmos DB orders
 * logical partitions by, and that feed ranges (`x-ms-start-epk` / `x-ms-end-epk`, a container's
 * partition key ranges) bound. It follows @azure/cosmos 4.x, src/utils/hashing/ (hash.ts, v1.ts,
 * v2.ts, multiHash.ts, murmurHash.ts, encoding/number.ts, encoding/string.ts, encoding/prefix.ts),
 * itself a port of Microsoft.Azure.Documents' PartitionKeyInternal.GetEffectivePartitionKeyString:
 *
 * - Hash, version 2: MurmurHash3 x64 128-bit (seed 0) over the components' binary encoding; the
 *   128 bits written high half first (h2 then h1, big-endian), the top two bits cleared, as 32
 *   upper-case hex digits.
 * - MultiHash (hierarchical keys): the version 2 EPK of each component alone, concatenated, so that
 *   a prefix of the key bounds the range `[EPK(prefix), EPK(prefix) + 'FF')`.
 * - Hash, version 1: MurmurHash3 x86 32-bit (seed 0) over the first component's encoding, then
 *   that hash and the component itself in the order-preserving binary encoding, as upper-case hex.
 *
 * '' is the smallest EPK and 'FF' the end of the whole range; EPKs compare as plain strings.
 * Everything here is iterative and bounded by the input's length.
 */

/** The start and end of the whole EPK range. */
export const MIN_EPK = '';
export const MAX_EPK = 'FF';

/** Type markers of the binary encoding (encoding/prefix.ts, `BytePrefix`). */
const UNDEFINED = 0x00;
const NULL = 0x01;
const FALSE = 0x02;
const TRUE = 0x03;
const NUMBER = 0x05;
const STRING = 0x08;
const INFINITY = 0xff;

/** Version 1 hashes and encodes at most this many UTF-16 code units of a string (v1.ts). */
const V1_MAX_STRING_CHARS = 100;

const UINT64 = (1n << 64n) - 1n;
const SIGN_BIT = 1n << 63n;

export function effectivePartitionKey(
  components: readonly PartitionKeyComponent[],
  definition: Pick<PartitionKeyDefinition, 'kind' | 'version'>,
): string {
  if (definition.kind === 'MultiHash') return components.map((component) => hashV2([component])).join('');
  return definition.version === 2 ? hashV2(components) : hashV1(components[0]);
}

/** The EPK of a stored item's canonical partition key text (a JSON array, see partitionKey.ts). */
export function effectivePartitionKeyOfCanonical(
  canonical: string,
  definition: Pick<PartitionKeyDefinition, 'kind' | 'version'>,
): string {
  return effectivePartitionKey(JSON.parse(canonical) as PartitionKeyComponent[], definition);
}

// ---------------------------------------------------------------------------------------------
// Version 2 (v2.ts)

function hashV2(components: readonly PartitionKeyComponent[]): string {
  const bytes = new ByteWriter();
  for (const component of components) writeV2HashInput(bytes, component);
  const [h1, h2] = murmur3x64x128(bytes.toBytes());
  // The SDK writes h1 then h2 little-endian and reverses all 16 bytes: h2 then h1, big-endian.
  // The first byte keeps its low six bits only (`reverseBuff[0] &= 0x3f`).
  return (hex64(h2 & (UINT64 >> 2n)) + hex64(h1)).toUpperCase();
}

/** v2.ts `prefixKeyByType`: a type marker, then the value; a string ends with 0xFF, untruncated. */
function writeV2HashInput(bytes: ByteWriter, component: PartitionKeyComponent): void {
  if (typeof component === 'string') {
    bytes.byte(STRING);
    bytes.bytes(utf8(component));
    bytes.byte(INFINITY);
  } else {
    writeScalarHashInput(bytes, component);
  }
}

// ---------------------------------------------------------------------------------------------
// Version 1 (v1.ts)

function hashV1(component: PartitionKeyComponent | undefined): string {
  const value = typeof component === 'string' ? component.substring(0, V1_MAX_STRING_CHARS) : component;
  const input = new ByteWriter();
  // v1.ts `prefixKeyByType`: a string ends with 0x00 here, and only its first 100 chars count.
  if (typeof value === 'string') {
    input.byte(STRING);
    input.bytes(utf8(value));
    input.byte(UNDEFINED);
  } else {
    writeScalarHashInput(input, value);
  }
  const hash = murmur3x86x32(input.toBytes());

  const output = new ByteWriter();
  writeNumberForBinaryEncoding(output, hash);
  // v1.ts `encodeByType`.
  if (typeof value === 'string') writeStringForBinaryEncoding(output, value);
  else if (typeof value === 'number') writeNumberForBinaryEncoding(output, value);
  else writeScalarHashInput(output, value);
  return hexOf(output.toBytes()).toUpperCase();
}

/**
 * encoding/string.ts `writeStringForBinaryEncoding`, for a string of at most 100 UTF-16 code units
 * (version 1 truncates before it gets here, so the SDK's branch for longer strings never runs): a
 * marker, each UTF-8 byte plus one (0xFF stays), and a terminating 0x00.
 */
function writeStringForBinaryEncoding(bytes: ByteWriter, value: string): void {
  bytes.byte(STRING);
  for (const byte of utf8(value)) bytes.byte(byte < 0xff ? byte + 1 : byte);
  bytes.byte(UNDEFINED);
}

/**
 * encoding/number.ts `writeNumberForBinaryEncodingBigInt`: a marker, then the double's bits made
 * order-preserving as an unsigned 64-bit integer, written as its top byte, then seven bits per
 * byte with the low bit set meaning "more follows", trailing zeros left out.
 */
function writeNumberForBinaryEncoding(bytes: ByteWriter, value: number): void {
  const raw = doubleBits(value);
  // encodeNumberAsUInt64: positive numbers get the sign bit set, negative ones are negated
  // (two's complement), so that the unsigned order is the numeric order.
  let payload = raw < SIGN_BIT ? raw ^ SIGN_BIT : -raw & UINT64;
  bytes.byte(NUMBER);
  bytes.byte(Number(payload >> 56n));
  payload = (payload << 8n) & UINT64;
  let pending: number | undefined;
  do {
    if (pending !== undefined) bytes.byte(pending);
    pending = Number(payload >> 56n) | 0x01;
    payload = (payload << 7n) & UINT64;
  } while (payload !== 0n);
  const last = pending & 0xfe;
  if (last !== 0) bytes.byte(last);
}

// ---------------------------------------------------------------------------------------------
// Shared by both versions

/** Numbers, booleans, null and "no value" (`{}` in a canonical key, or undefined). */
function writeScalarHashInput(
  bytes: ByteWriter,
  component: Exclude<PartitionKeyComponent, string> | undefined,
): void {
  if (typeof component === 'number') {
    bytes.byte(NUMBER);
    // doubleToByteArrayBigInt: the IEEE 754 bits, least significant byte first.
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, component, true);
    bytes.bytes(new Uint8Array(view.buffer));
  } else if (component === true) {
    bytes.byte(TRUE);
  } else if (component === false) {
    bytes.byte(FALSE);
  } else if (component === null) {
    bytes.byte(NULL);
  } else {
    bytes.byte(UNDEFINED);
  }
}

function doubleBits(value: number): bigint {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value);
  return view.getBigUint64(0);
}

/** UTF-8 as TextEncoder writes it (a lone surrogate becomes U+FFFD), as the SDK does. */
const encoder = new TextEncoder();
const utf8 = (text: string): Uint8Array => encoder.encode(text);

const hex64 = (value: bigint): string => value.toString(16).padStart(16, '0');

function hexOf(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += byte.toString(16).padStart(2, '0');
  return text;
}

/** A growable byte buffer. */
class ByteWriter {
  private buffer = new Uint8Array(64);
  private length = 0;

  byte(value: number): void {
    this.reserve(1);
    this.buffer[this.length++] = value;
  }

  bytes(values: Uint8Array): void {
    this.reserve(values.length);
    this.buffer.set(values, this.length);
    this.length += values.length;
  }

  toBytes(): Uint8Array {
    return this.buffer.subarray(0, this.length);
  }

  private reserve(count: number): void {
    if (this.length + count <= this.buffer.length) return;
    const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.length + count));
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
  }
}

// ---------------------------------------------------------------------------------------------
// MurmurHash3 (Austin Appleby's reference, as murmurHash.ts ports it)

const C1_64 = 0x87c37b91114253d5n;
const C2_64 = 0x4cf5ad432745937fn;

const rotl64 = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (64n - r))) & UINT64;
const mul64 = (a: bigint, b: bigint): bigint => (a * b) & UINT64;
const add64 = (a: bigint, b: bigint): bigint => (a + b) & UINT64;

function fmix64(k: bigint): bigint {
  k ^= k >> 33n;
  k = mul64(k, 0xff51afd7ed558ccdn);
  k ^= k >> 33n;
  k = mul64(k, 0xc4ceb9fe1a85ec53n);
  k ^= k >> 33n;
  return k;
}

/** MurmurHash3_x64_128 with seed 0: the two 64-bit halves [h1, h2]. */
function murmur3x64x128(data: Uint8Array): [bigint, bigint] {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const blocks = Math.floor(data.length / 16) * 16;
  let h1 = 0n;
  let h2 = 0n;
  for (let i = 0; i < blocks; i += 16) {
    let k1 = view.getBigUint64(i, true);
    let k2 = view.getBigUint64(i + 8, true);

    k1 = mul64(rotl64(mul64(k1, C1_64), 31n), C2_64);
    h1 ^= k1;
    h1 = add64(mul64(add64(rotl64(h1, 27n), h2), 5n), 0x52dce729n);

    k2 = mul64(rotl64(mul64(k2, C2_64), 33n), C1_64);
    h2 ^= k2;
    h2 = add64(mul64(add64(rotl64(h2, 31n), h1), 5n), 0x38495ab5n);
  }

  // The tail: up to 15 bytes, little-endian, the first eight into k1 and the rest into k2.
  let k1 = 0n;
  let k2 = 0n;
  for (let i = blocks; i < data.length; i++) {
    const shifted = BigInt(data[i] ?? 0) << BigInt(((i - blocks) % 8) * 8);
    if (i - blocks < 8) k1 |= shifted;
    else k2 |= shifted;
  }
  const tail = data.length - blocks;
  if (tail > 8) h2 ^= mul64(rotl64(mul64(k2, C2_64), 33n), C1_64);
  if (tail > 0) h1 ^= mul64(rotl64(mul64(k1, C1_64), 31n), C2_64);

  const length = BigInt(data.length);
  h1 ^= length;
  h2 ^= length;
  h1 = add64(h1, h2);
  h2 = add64(h2, h1);
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 = add64(h1, h2);
  h2 = add64(h2, h1);
  return [h1, h2];
}

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h;
}

const rotl32 = (x: number, r: number): number => (x << r) | (x >>> (32 - r));

/** MurmurHash3_x86_32 with seed 0, as an unsigned 32-bit number. */
function murmur3x86x32(data: Uint8Array): number {
  const C1 = 0xcc9e2d51;
  const C2 = 0x1b873593;
  const blocks = Math.floor(data.length / 4) * 4;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let h = 0;
  for (let i = 0; i < blocks; i += 4) {
    let k = view.getUint32(i, true);
    k = Math.imul(rotl32(Math.imul(k, C1), 15), C2);
    h ^= k;
    h = (Math.imul(rotl32(h, 13), 5) + 0xe6546b64) | 0;
  }
  let k = 0;
  for (let i = blocks; i < data.length; i++) k |= (data[i] ?? 0) << ((i - blocks) * 8);
  if (data.length > blocks) h ^= Math.imul(rotl32(Math.imul(k, C1), 15), C2);
  h ^= data.length;
  return fmix32(h) >>> 0;
}

/** Effective partition keys are upper-case hex; a feed range bound is at most a few of them long. */
const EPK_BOUND = /^[0-9A-F]{0,200}$/;

/**
 * The feed range a change feed read or a query names with `x-ms-start-epk` / `x-ms-end-epk`, or
 * undefined (the whole container, and no hashing). A missing bound is open. Each item's EPK is computed once per request
 * and partition key, and only for items the other conditions kept.
 */
export function feedRange(
  headers: RequestHeaders,
  definition: PartitionKeyDefinition,
): { includes(partitionKey: string): boolean } | undefined {
  const startHeader = single(headers['x-ms-start-epk']);
  const endHeader = single(headers['x-ms-end-epk']);
  if (startHeader === undefined && endHeader === undefined) return undefined;
  const start = epkBound(startHeader ?? '', 'x-ms-start-epk');
  const end = endHeader === undefined ? undefined : epkBound(endHeader, 'x-ms-end-epk');
  const seen = new Map<string, boolean>();
  return {
    includes(partitionKey) {
      let inside = seen.get(partitionKey);
      if (inside === undefined) {
        const epk = effectivePartitionKeyOfCanonical(partitionKey, definition);
        inside = epk >= start && (end === undefined || epk < end);
        seen.set(partitionKey, inside);
      }
      return inside;
    },
  };
}

function epkBound(value: string, header: string): string {
  const upper = value.trim().toUpperCase();
  if (!EPK_BOUND.test(upper)) {
    throw badRequest(`${header} '${value.slice(0, 40)}' is not an effective partition key.`);
  }
  return upper;
}
