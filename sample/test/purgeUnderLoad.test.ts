import { measurePurgeUnderLoad } from '../bench/purgeUnderLoad';

/**
 * The purge-under-load scenario at a small size: behaviour only (speed is what
 * `npm run bench:purge` measures and prints). Consumers and purges share a local server with
 * provisioned throughput; the purge with a budget stays within it as the server counts it.
 */
it('consumers lose no delivery to a purge, and the budgeted purge completes within its budget', async () => {
  const budget = 300;
  const phases = await measurePurgeUnderLoad({
    throughput: 1000,
    markers: 300,
    messages: 150,
    concurrency: 8,
    purgeBudget: budget,
    purgeMaxDurationMs: 60_000,
  });

  // Some deliveries may meet a 429 past the SDK's retries and be redelivered; none runs out of deliveries.
  expect(phases.map((phase) => phase.deadLettered)).toEqual([0, 0, 0]);
  const [, unbudgeted, budgeted] = phases;
  expect(unbudgeted?.purge).toMatchObject({ purged: 300, expiredRemaining: 0, stoppedBy: 'done' });
  expect(budgeted?.purge).toMatchObject({ purged: 300, expiredRemaining: 0, stoppedBy: 'done', budget });
  const usage = budgeted!.purge!.serverUsage;
  // A request's charge is known only once it has run: the run may be one request over its budget.
  // And the purge paces on its own clock from before its first request, the server counts from that
  // request's arrival: on busy cores the two windows differ by up to a request's latency, which
  // one more request's charge covers (a delete batch's charge is worth far more than that latency).
  expect(usage.requestCharge).toBeLessThanOrEqual(
    (budget * (usage.lastAtMs - usage.firstAtMs)) / 1000 + 2 * usage.maxRequestCharge,
  );
  expect(budgeted!.purge!.waitedMs).toBeGreaterThan(0);
}, 180_000);
