import { hash } from 'node:crypto';

import type { Delivery } from './delivery';

/**
 * The inbox marker: proof that one consumer applied one message's effect. It lives in the same
 * logical partition as the business documents the message changes, and is created in the same
 * transactional batch, first; a second delivery's batch fails on it (409) and writes nothing.
 */
// Stryker disable next-line StringLiteral: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing)
export const MARKER_TYPE = 'inbox-marker';

/** A type literal rather than an interface, so that a marker is itself a Cosmos DB document body. */
export type Marker = {
  /** `inbox-` + base64url(SHA-256(consumer, messageId)): deterministic, 49 characters, legal for Cosmos DB. */
  id: string;
  partitionKey: string;
  type: typeof MARKER_TYPE;
  consumer: string;
  /** As the delivery carried it; any characters, up to 128 of them. */
  messageId: string;
  /** SHA-256 of the canonical JSON body, to tell a redelivery from a different message reusing the id. */
  payloadHash: string;
  /** The handler's alternative, when it took one (for example `backorder`). */
  alternative?: string;
  processedAt: string;
  processedAtEpochSeconds: number;
  /** When the purge timer may delete the marker: processedAt + retention. */
  expiresAtEpochSeconds: number;
  deliveryCount: number;
  enqueuedTimeUtc?: string;
  /** Cosmos DB TTL backstop in seconds (retention + backstop), when enabled. */
  ttl?: number;
};

export function markerId(consumer: string, messageId: string): string {
  // The NUL keeps ('ab', 'c') apart from ('a', 'bc'). Between two strings it also stops a lone
  // surrogate pairing across them, so one string hashes to the bytes of the parts hashed in turn.
  return `inbox-${hash('sha256', `${consumer}\u0000${messageId}`, 'base64url')}`;
}

/**
 * The key the marker is stored under. Normally (consumer, MessageId). When the host could only hand
 * a MessageId that several texts map to (a number, a JSON literal: see Delivery.messageIdIsLossy),
 * different messages can share it, so the payload hash joins the key: a redelivery still maps to
 * the same marker (same body), and two different messages do not suppress each other.
 */
export function markerKey(
  delivery: Pick<Delivery, 'messageIdIsLossy'>,
  messageId: string,
  payloadHash: string,
): string {
  return delivery.messageIdIsLossy ? `${messageId}\u0000${payloadHash}` : messageId;
}

/** SHA-256 over JSON with sorted keys, so a producer that re-serialises the same event is not a mismatch. */
export function payloadHash(body: unknown): string {
  return `sha256:${hash('sha256', canonicalJson(body), 'base64url')}`;
}

/** A container being written by canonicalJson: its sorted keys when it is an object, and the next position. */
interface Open {
  container: object;
  keys: string[] | undefined;
  next: number;
  /** An object's keys whose value is undefined are left out, so its commas depend on what was written. */
  written: number;
}

/** Past this depth canonicalJson starts looking for a value that contains itself (a cycle goes deeper forever). */
const CYCLE_CHECK_DEPTH = 32;

/**
 * JSON with every object's keys in UTF-16 code unit order and no whitespace. It walks the value with
 * an explicit stack, so a body nested thousands of levels deep (JSON.parse accepts it) cannot
 * overflow the call stack. Arrays write `null` for undefined and nothing for holes; objects leave out
 * undefined values; every other value is written as JSON.stringify writes it, `null` when that gives
 * nothing. Objects are walked by their own enumerable keys (a Date is `{}`).
 */
export function canonicalJson(value: unknown): string {
  const open: Open[] = [];
  let onPath: Set<object> | undefined;
  let text = '';
  let next = value;
  for (;;) {
    if (typeof next === 'object' && next !== null) {
      // Stryker disable next-line ConditionalExpression,EqualityOperator: equivalent: when the cycle check starts changes only its cost, not what it finds
      if (onPath === undefined && open.length >= CYCLE_CHECK_DEPTH)
        // Stryker disable next-line ArrowFunction: equivalent: a cycle missed above the check depth is found on its next turn
        onPath = new Set(open.map((ancestor) => ancestor.container));
      // Stryker disable next-line StringLiteral: message text only
      if (onPath?.has(next)) throw new TypeError('Converting circular structure to canonical JSON');
      onPath?.add(next);
      const isArray = Array.isArray(next);
      open.push({
        container: next,
        keys: isArray ? undefined : Object.keys(next).sort(),
        next: 0,
        written: 0,
      });
      text += isArray ? '[' : '{';
      // Stryker disable next-line ConditionalExpression,StringLiteral: equivalent: JSON.stringify writes a string as quoted() does, more slowly
    } else if (typeof next === 'string') {
      text += quoted(next);
    } else {
      text += JSON.stringify(next) ?? 'null';
    }
    // Find the next value to write, closing every container that has none left.
    for (;;) {
      const top = open[open.length - 1];
      if (top === undefined) return text;
      if (top.keys === undefined) {
        const array = top.container as unknown[];
        const index = top.next++;
        if (index < array.length) {
          if (index > 0) text += ',';
          if (!(index in array)) continue;
          next = array[index];
          break;
        }
        text += ']';
      } else {
        const object = top.container as Record<string, unknown>;
        let key = top.keys[top.next++];
        while (key !== undefined && object[key] === undefined) key = top.keys[top.next++];
        if (key !== undefined) {
          text += `${top.written++ > 0 ? ',' : ''}${quoted(key)}:`;
          next = object[key];
          break;
        }
        text += '}';
      }
      open.pop();
      onPath?.delete(top.container);
    }
  }
}

/** Characters JSON.stringify escapes (and, to keep the test simple, every surrogate, paired or not). */
// Stryker disable Regex: static: evaluated once when the module loads, where a mutant cannot be switched on (packages/devkit/src/build/README.md#mutation-testing); marker.test.ts pins the escapes
// eslint-disable-next-line no-control-regex -- JSON escapes the control characters U+0000 to U+001F
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
// Stryker restore Regex

/** JSON.stringify(text), without its cost for the usual text that needs no escape. */
function quoted(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

export interface MarkerInput {
  consumer: string;
  messageId: string;
  key: string;
  partitionKey: string;
  payloadHash: string;
  delivery: Delivery;
  now: Date;
  retentionSeconds: number;
  ttlBackstopSeconds: number | undefined;
  alternative?: string;
}

/** The marker document. Optional fields it does not have are `undefined`, which JSON leaves out. */
export function buildMarker(input: MarkerInput): Marker {
  const processedAtEpochSeconds = Math.floor(input.now.getTime() / 1000);
  return {
    id: markerId(input.consumer, input.key),
    partitionKey: input.partitionKey,
    type: MARKER_TYPE,
    consumer: input.consumer,
    messageId: input.messageId,
    payloadHash: input.payloadHash,
    alternative: input.alternative,
    processedAt: input.now.toISOString(),
    processedAtEpochSeconds,
    expiresAtEpochSeconds: processedAtEpochSeconds + input.retentionSeconds,
    deliveryCount: input.delivery.deliveryCount,
    enqueuedTimeUtc: input.delivery.enqueuedTimeUtc
      ? input.delivery.enqueuedTimeUtc.toISOString()
      : undefined,
    ttl:
      input.ttlBackstopSeconds === undefined ? undefined : input.retentionSeconds + input.ttlBackstopSeconds,
  };
}
