import { CosmosClient } from '@azure/cosmos';
import { ensureAppContainer } from '/work/main/local/cosmos/appContainer';
import { startInWorker } from '/work/main/local/cosmos/threadHost';
(async () => {
  const cosmos = await startInWorker({ port: 0 });
  const client = new CosmosClient({ endpoint: cosmos.endpoint, key: cosmos.key });
  const db = (await client.databases.createIfNotExists({ id: 'app' })).database;
  const c = await ensureAppContainer(db, 'state');
  const now = 1_700_000_000;
  for (let i = 0; i < 10000; i += 50) await Promise.all(Array.from({length:50},(_,j)=>{const k=i+j; return c.items.create(k%2===0?{id:`m${k}`,partitionKey:`p${Math.floor(k/10)}`,type:'inbox-marker',consumer:'x',messageId:`m${k}`,processedAt:'t',processedAtEpochSeconds:now-k}:{id:`s${k}`,partitionKey:`p${Math.floor(k/10)}`,type:'s'})}));
  const qs = {
    count: 'SELECT VALUE COUNT(1) FROM c WHERE c.type = "inbox-marker" AND c.consumer = "x"',
    min: 'SELECT VALUE MIN(c.processedAtEpochSeconds) FROM c WHERE c.type = "inbox-marker" AND c.consumer = "x"',
    group: 'SELECT c.type, COUNT(1) AS n, MIN(c.processedAtEpochSeconds) AS oldest, MIN(c.pendingSinceEpochSeconds) AS pending FROM c WHERE c.consumer = "x" AND (c.type = "inbox-marker" OR (c.type = "outbox" AND IS_DEFINED(c.pendingSinceEpochSeconds))) GROUP BY c.type',
    top: 'SELECT TOP 20 c.partitionKey, c.messageId, c.processedAt FROM c WHERE c.type = "inbox-marker" AND c.consumer = "x" ORDER BY c.processedAtEpochSeconds DESC',
  };
  for (const [name, q] of Object.entries(qs)) {
    for (let r = 0; r < 3; r++) { const t = performance.now(); const { resources } = await c.items.query(q).fetchAll(); console.log(name, Math.round(performance.now() - t), JSON.stringify(resources).slice(0, 120)); }
  }
  await cosmos.stop(); process.exit(0);
})();
