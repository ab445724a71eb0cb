import { CONDITIONS, PeerError } from './errors';

/**
 * Lock tokens travel in two byte orders. As a delivery tag Service Bus sends the GUID the way .NET
 * lays it out in memory (the first three groups little-endian), and @azure/service-bus reorders the
 * bytes before printing it; in $management requests (renew-lock, update-disposition) the SDK sends
 * it as an AMQP uuid in RFC 4122 order. The broker model's lock token is the RFC string.
 */
const DOTNET_ORDER = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15] as const;

export function deliveryTagOf(lockToken: string): Buffer {
  return reorder(rfcBytesOf(lockToken));
}

export function lockTokenOfDeliveryTag(tag: Buffer | string): string {
  const bytes = typeof tag === 'string' ? Buffer.from(tag) : tag;
  if (bytes.length !== 16)
    throw new PeerError(CONDITIONS.messageLockLost, 'The delivery tag is not a lock token.');
  return uuidString(reorder(bytes));
}

/** A lock token as the SDK sends it to $management: an AMQP uuid (16 bytes, RFC order). */
export function lockTokenOfUuid(value: unknown): string {
  if (typeof value === 'string') return value.toLowerCase();
  if (Buffer.isBuffer(value) && value.length === 16) return uuidString(value);
  throw new PeerError(CONDITIONS.invalidField, 'A lock token must be a uuid.');
}

function rfcBytesOf(uuid: string): Buffer {
  const hex = uuid.replace(/-/g, '');
  if (!/^[0-9a-f]{32}$/i.test(hex)) throw new Error(`'${uuid}' is not a uuid.`);
  return Buffer.from(hex, 'hex');
}

function reorder(bytes: Buffer): Buffer {
  return Buffer.from(DOTNET_ORDER.map((index) => bytes[index] ?? 0));
}

function uuidString(bytes: Buffer): string {
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
