import { bounded, SettingsError } from './errors';

/**
 * The multi-region write guard (issue 25, work in progress): the inbox's exactly-once effect rests
 * on one write region arbitrating each marker. A marker's create meets a 409 only where the first
 * create committed; with several write regions, two deliveries applied in two regions both commit
 * locally, and last-writer-wins conflict resolution later drops one version silently (it does not
 * reach the conflict feed): the business effect happened twice. Nothing says a transactional batch
 * stays whole across that resolution either. So the app refuses an account that accepts writes in
 * more than one region, unless the operator has accepted that (INBOX_ALLOW_MULTIPLE_WRITE_REGIONS).
 */

/** What the guard reads of the account (one `client.getDatabaseAccount()`, a metadata GET). */
export interface WriteRegionFacts {
  enableMultipleWritableLocations: boolean;
  writableLocations: readonly { name: string }[];
}

/** The most regions an error names; an account has a handful, but the list is the service's. */
const MAX_REGIONS_NAMED = 10;

/**
 * Why the app must not run against this account, or undefined when it may: one write region, or
 * several with the opt-out set.
 */
export function writeRegionsProblem(account: WriteRegionFacts, allowMultiple: boolean): string | undefined {
  const regions = account.writableLocations.map((location) => bounded(location.name, 60));
  if (!account.enableMultipleWritableLocations && regions.length <= 1) return undefined;
  if (allowMultiple) return undefined;
  const named = regions.slice(0, MAX_REGIONS_NAMED).join(', ');
  const more = regions.length > MAX_REGIONS_NAMED ? ` and ${regions.length - MAX_REGIONS_NAMED} more` : '';
  return (
    `The Cosmos DB account accepts writes in ${regions.length} regions (${named}${more}): the inbox needs one ` +
    'write region to arbitrate each marker, and with several a message can be applied once in each. ' +
    'Turn multi-region writes off (infra/modules/cosmos.bicep deploys enableMultipleWriteLocations: false), or, ' +
    'to run anyway and accept duplicate effects, set INBOX_ALLOW_MULTIPLE_WRITE_REGIONS=true.'
  );
}

/** Throws a SettingsError when the account fails the guard (the app then refuses to start). */
export function assertWriteRegions(account: WriteRegionFacts, allowMultiple: boolean): void {
  const problem = writeRegionsProblem(account, allowMultiple);
  if (problem !== undefined) throw new SettingsError([problem]);
}
