/** The most characters JSON.stringify writes for a number: `-0.0000037191301872534835`. */
const MAX_NUMBER_CHARS = 25;
/** Values a bound walks before it gives up (a cycle never ends; JSON.stringify reports it). */
const MAX_BOUND_VALUES = 100_000;

/**
 * An upper bound of `Buffer.byteLength(JSON.stringify(value))` for plain data (strings, numbers,
 * booleans, null, arrays and plain objects), walked with an explicit stack; Infinity for anything
 * else (toJSON, dates, class instances, BigInt, functions, symbols) and for very large values.
 * A UTF-16 unit takes at most 6 bytes (`\u001f`); undefined counts as `null`; a key as `"…":` and a comma.
 */
export function jsonBytesBound(value: unknown): number {
  const pending: unknown[] = [value];
  let bytes = 0;
  for (let walked = 0; pending.length > 0; walked++) {
    if (walked === MAX_BOUND_VALUES) return Infinity;
    const next = pending.pop();
    switch (typeof next) {
      case 'string':
        bytes += 6 * next.length + 2;
        break;
      case 'number':
        bytes += MAX_NUMBER_CHARS;
        break;
      case 'boolean':
      case 'undefined':
        bytes += 5;
        break;
      case 'object': {
        if (next === null) {
          bytes += 4;
          break;
        }
        if (typeof (next as { toJSON?: unknown }).toJSON === 'function') return Infinity;
        if (Array.isArray(next)) {
          bytes += 2 + next.length;
          for (let index = 0; index < next.length; index++) pending.push(next[index]);
          break;
        }
        const prototype = Object.getPrototypeOf(next) as unknown;
        if (prototype !== Object.prototype && prototype !== null) return Infinity;
        bytes += 2;
        // for…in also visits inherited enumerable keys, which JSON leaves out: the bound only grows.
        for (const key in next) {
          bytes += 6 * key.length + 4;
          pending.push((next as Record<string, unknown>)[key]);
        }
        break;
      }
      default:
        return Infinity;
    }
  }
  return bytes;
}
