import type { Container } from '@azure/cosmos';

import { ConcurrencyConflictError, storeStatusOf } from './errors';
import type { BusinessDocument } from './transaction';

/**
 * Natural idempotency: the message says "this is the state at version v", so writing it only when
 * the stored version is older makes repeats and late arrivals harmless, without a marker.
 */
export interface VersionedDocument extends BusinessDocument {
  partitionKey: string;
  /** Monotonic per document; a write with a version ≤ the stored one is a no-op. */
  version: number;
}

export interface VersionedWrite {
  result: 'written' | 'stale';
  /** Version stored before this write, if any. */
  previousVersion: number | undefined;
  requestCharge: number;
  requests: number;
}

/**
 * Reads the current version, then creates (if absent) or replaces with the read ETag. Losing a race
 * (409 on create, 412 on replace) means someone else wrote first: read again and decide again.
 */
export async function writeIfNewer(
  container: Container,
  document: VersionedDocument,
  maxAttempts = 5,
): Promise<VersionedWrite> {
  let requestCharge = 0;
  let requests = 0;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const item = container.item(document.id, document.partitionKey);
    const current = await item.read<VersionedDocument>();
    requests++;
    requestCharge += current.requestCharge;
    const previousVersion = current.resource?.version;
    // Stryker disable next-line ConditionalExpression: equivalent: undefined >= a version is false anyway
    if (previousVersion !== undefined && previousVersion >= document.version) {
      return { result: 'stale', previousVersion, requestCharge, requests };
    }
    try {
      requests++;
      const written = current.resource
        ? await item.replace(document, { accessCondition: { type: 'IfMatch', condition: current.etag } })
        : await container.items.create(document);
      requestCharge += written.requestCharge;
      return { result: 'written', previousVersion, requestCharge, requests };
    } catch (error) {
      const status = storeStatusOf(error);
      if (status !== 409 && status !== 412) throw error;
    }
  }
  throw new ConcurrencyConflictError(
    `Could not write version ${document.version} of '${document.id}' in ${maxAttempts} attempts: other writers kept winning.`,
  );
}
