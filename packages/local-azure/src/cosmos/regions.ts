import type { AccountState } from './account';
import type { StoredItem } from './items';

/**
 * A multi-region-write account's replication, as Cosmos DB's default conflict resolution does it
 * (last writer wins on `_ts`): each write region commits on its own, and `replicate` brings every
 * region to the same items. Between two replications the regions do not see each other's writes,
 * which is replication lag held open for as long as a test needs.
 *
 * An item written in one region since the last replication is copied to the others. An item
 * written in several is a conflict: the version with the highest `_ts` wins everywhere (on equal
 * `_ts`, the region listed first), and the others are dropped without a trace, as Azure's
 * last-writer-wins drops them (they never reach the conflicts feed). A delete wins over any write
 * of the same item, as Azure documents for last-writer-wins. Databases and containers are not
 * replicated: create them before adding a region.
 */
export class Replication {
  /** What each region held after the last replication, by container then item key. */
  private synced: Map<string, Map<string, StoredItem>>[] = [];

  constructor(private readonly regions: () => readonly AccountState[]) {
    this.remember();
  }

  /** Replicates every region's writes to the others; returns how many items were in conflict. */
  replicate(): number {
    let conflicts = 0;
    const [first] = this.regions();
    for (const [databaseId, database] of first?.databases ?? []) {
      for (const containerId of database.containers.keys()) {
        const path = `${databaseId}/${containerId}`;
        const holders = this.regions().map((region) =>
          region.databases.get(databaseId)?.containers.get(containerId),
        );
        if (holders.some((container) => container === undefined)) continue;
        const containers = holders as NonNullable<(typeof holders)[number]>[];
        const bases = containers.map(
          (_, index) => this.synced[index]?.get(path) ?? new Map<string, StoredItem>(),
        );
        const keys = new Set(
          [...bases, ...containers.map((container) => container.items)].flatMap((items) => [...items.keys()]),
        );
        for (const key of keys) {
          const changed = containers.filter(
            (container, index) => container.items.get(key) !== bases[index]?.get(key),
          );
          if (changed.length === 0) continue;
          if (changed.length > 1) conflicts++;
          const versions = changed.map((container) => container.items.get(key));
          const winner = versions.includes(undefined) ? undefined : latest(versions as StoredItem[]);
          for (const container of containers) {
            const held = container.items.get(key);
            if (winner === undefined) container.items.delete(key);
            else if (held !== winner) container.items.set(key, { ...winner, lsn: container.nextLsn() });
          }
        }
      }
    }
    this.remember();
    return conflicts;
  }

  /** Takes what the regions hold now as replicated (after a region is added, or a replication). */
  remember(): void {
    this.synced = this.regions().map((region) => {
      const held = new Map<string, Map<string, StoredItem>>();
      for (const [databaseId, database] of region.databases) {
        for (const [containerId, container] of database.containers) {
          held.set(`${databaseId}/${containerId}`, new Map(container.items));
        }
      }
      return held;
    });
  }
}

/** The version last-writer-wins keeps: the highest `_ts`, the first listed on a tie. */
function latest(versions: readonly StoredItem[]): StoredItem {
  return versions.reduce((best, version) => (timestamp(version) > timestamp(best) ? version : best));
}

const timestamp = (stored: StoredItem): number => Number(stored.document._ts ?? 0);
