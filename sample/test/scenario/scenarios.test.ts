import { ScenarioEnvironment, type ScenarioReport } from '../../scenario/run';

/**
 * The whole pipeline offline (local Cosmos server, Service Bus model, host model, the real
 * registered handlers), one fault at a time, with the invariants checked after each run.
 */
let environment: ScenarioEnvironment;
beforeAll(async () => {
  environment = await ScenarioEnvironment.start();
});
afterAll(async () => {
  await environment.stop();
});

const failures = (report: ScenarioReport): string[] =>
  report.invariants.filter((i) => !i.ok).map((i) => `${i.name}: ${i.detail} (seed ${report.seed})`);

describe('scenarios', () => {
  it('without faults: every event applied once, poison dead-lettered', async () => {
    const report = await environment.run({
      messages: 300,
      seed: 11,
      resendInsideWindow: 0,
      resendOutsideWindow: 0,
      poison: 0.03,
    });

    expect(failures(report)).toEqual([]);
    expect(report.accounting.deadLettered.poison).toBeGreaterThan(0);
    expect(report.accounting.deadLettered.exhausted).toBe(0);
    expect(report.accounting.droppedByBroker + report.accounting.absorbedByInbox).toBe(0);
  });

  // Issue 45: a change feed read (a query, which the SDK runs past its operation plugins) ran
  // outside the simulation's turns, model time jumped to the next timer while it was in flight, and
  // after each retried page the relay read one page per model minute: the sweeper sent 75 % of the
  // outbox. Now every request takes its turn (simulationClientOptions), and the relay keeps up.
  it('Cosmos DB write faults: the relay, not the sweeper, sends what the consumers stage, within seconds', async () => {
    const report = await environment.run({
      messages: 500,
      seed: 31337,
      faults: { cosmosUnavailable: 0.01, cosmosDropAfterCommit: 0.01 },
    });

    expect(failures(report)).toEqual([]);
    const { firstSentBy, staged, commitToSend } = report.accounting.outbox;
    expect(staged).toBeGreaterThan(100);
    expect(firstSentBy).toEqual({ relay: staged, sweeper: 0, none: 0 });
    // The relay's page retries wait 5 s and more: well inside OUTBOX_SWEEP_AGE (5 min).
    expect(commitToSend!.max).toBeLessThan(60_000);
  });

  // Issue 45: a write held for minutes (the slow-write fault) that landed on a dispatch mark held
  // the relay, and every page behind it, for as long: the relay gives a mark up after 5 s of model
  // time (the runtime's requestDeadlines, on the model clock here) and tries it again.
  it('slow writes: the relay gives a held dispatch mark up at its deadline and keeps up', async () => {
    const report = await environment.run({ messages: 500, seed: 31337, faults: { slowHandler: 0.02 } });

    expect(failures(report)).toEqual([]);
    const { firstSentBy, staged, commitToSend } = report.accounting.outbox;
    expect(firstSentBy).toEqual({ relay: staged, sweeper: 0, none: 0 });
    expect(commitToSend!.max).toBeLessThan(60_000);
  });

  it('producer resends: the broker drops those inside the window, the inbox absorbs those after it', async () => {
    const report = await environment.run({
      messages: 300,
      seed: 12,
      resendInsideWindow: 0.2,
      resendOutsideWindow: 0.2,
    });

    expect(failures(report)).toEqual([]);
    expect(report.accounting.droppedByBroker).toBeGreaterThan(0);
    expect(report.accounting.absorbedByInbox).toBeGreaterThan(0);
    expect(report.accounting.droppedByBroker + report.accounting.absorbedByInbox).toBe(
      report.accounting.injectedDuplicates,
    );
  });

  it('crashes after commit and lost completions: the redeliveries are duplicates, nothing applies twice', async () => {
    const report = await environment.run({
      messages: 300,
      seed: 13,
      faults: { crashAfterCommit: 0.1, completionLost: 0.1 },
    });

    expect(failures(report)).toEqual([]);
    expect(
      (report.deliveries.bySettlement.crashed ?? 0) +
        (report.deliveries.bySettlement['completion-lost'] ?? 0),
    ).toBeGreaterThan(0);
    expect(report.deliveries.byOutcome.duplicate).toBeGreaterThan(0);
  });

  it('a handler slower than functionTimeout and the lock: given up, redelivered concurrently, one effect', async () => {
    const report = await environment.run({ messages: 120, seed: 14, faults: { slowHandler: 0.08 } });

    expect(failures(report)).toEqual([]);
    // The write outlasts functionTimeout (PT5M) before the lock renewal (PT5M) plus the lock run out.
    expect(report.deliveries.bySettlement['timed-out']).toBeGreaterThan(0);
  });

  it('Cosmos DB throttling, outages and lost responses: retried by redelivery, applied once', async () => {
    const report = await environment.run({
      messages: 300,
      seed: 15,
      faults: {
        cosmosThrottle: 0.2,
        cosmosUnavailable: 0.1,
        cosmosDropAfterCommit: 0.1,
        crashBeforeCommit: 0.05,
      },
    });

    expect(failures(report)).toEqual([]);
    expect(report.deliveries.byOutcome.retried).toBeGreaterThan(0);
  });

  it('a store that never recovers: valid messages are dead-lettered as exhausted, with their reason, and nothing applies', async () => {
    const report = await environment.run({
      messages: 40,
      seed: 16,
      poison: 0,
      resendInsideWindow: 0,
      resendOutsideWindow: 0,
      faults: { cosmosUnavailable: 1 },
    });

    expect(failures(report)).toEqual([]);
    expect(report.accounting.deadLettered.exhausted).toBe(40);
    expect(report.accounting.deadLettered.byReason).toEqual({ MaxDeliveryCountExceeded: 40 });
    expect(report.accounting.effects.payments + report.accounting.effects.reservations).toBe(0);
  });

  it('a 30-minute Cosmos DB outage: the breaker holds deliveries, nothing valid is dead-lettered or lost, processing resumes', async () => {
    const report = await environment.run({
      messages: 150,
      seed: 17,
      poison: 0.02,
      faults: { cosmosOutages: [{ startMs: 0, durationMs: 30 * 60_000 }] },
    });

    expect(failures(report)).toEqual([]);
    expect(report.accounting.deadLettered.exhausted).toBe(0);
    expect(report.accounting.deadLettered.total).toBe(report.accounting.deadLettered.poison);
    expect(report.breaker.opened).toBeGreaterThan(0);
    expect(report.breaker.closed).toBe(report.breaker.opened);
    expect(report.deliveries.byOutcome.retried).toBeGreaterThan(0);
    const [outage] = report.breaker.outages;
    expect(outage?.pendingAtRecovery).toBeGreaterThan(0);
    expect(outage?.resumedAfterMs).not.toBeNull();
    expect(outage?.resumedAfterMs).toBeLessThanOrEqual(60_000);
    expect(report.breaker.survivableOutageSeconds).toBeGreaterThan(30 * 60);
  });

  it("a producer that re-mints MessageIds: the payment applier's event key absorbs every copy, takes no distinct payment for one, pays once", async () => {
    const report = await environment.run({
      messages: 300,
      seed: 18,
      remintIds: 0.3,
      // Copies redelivered, and copies racing their originals.
      faults: { crashAfterCommit: 0.05, completionLost: 0.05, cosmosDropAfterCommit: 0.05 },
    });

    expect(failures(report)).toEqual([]);
    const { reminted } = report.accounting;
    expect(reminted.sends).toBeGreaterThan(30);
    expect(reminted.absorbable).toBeGreaterThan(30);
    expect(reminted.detected).toBe(reminted.absorbable);
    expect(reminted.falsePositives).toBe(0);
    // Each absorbed copy is named as such, and nothing else is.
    const suspected = report.duplicateCauses.counts.suspected_producer_duplicate ?? {};
    expect(Object.keys(suspected)).toEqual(['suspected_producer_duplicate']);
    expect(suspected.suspected_producer_duplicate).toBeGreaterThanOrEqual(reminted.absorbable);
    expect(report.duplicateCauses.diagonal).toBe(true);
  });

  // The payment applier declares delayedRetry in src/topology.json: 3 copies, 60 s then 120 s then
  // 240 s later (+ up to 10 %), so a payment first failing at t is tried last at t + 7 minutes or more.
  it('a slow dependency shorter than the retry schedule: copies ride it out, nothing valid is dead-lettered, each payment applied once', async () => {
    const report = await environment.run({
      messages: 200,
      seed: 31,
      poison: 0.02,
      // Deliveries that scheduled a copy and lost their completion schedule it again: the topic drops it.
      faults: {
        completionLost: 0.05,
        crashAfterCommit: 0.03,
        slowDependencies: [{ startMs: 0, durationMs: 5 * 60_000 }],
      },
    });

    expect(failures(report)).toEqual([]);
    const { delayedRetries, deadLettered, effects } = report.accounting;
    expect(delayedRetries.scheduled).toBeGreaterThan(0);
    expect(delayedRetries.processed).toBeGreaterThan(0);
    expect(delayedRetries.deadLettered).toBe(0);
    // Every copy settled: applied (or found a duplicate), or failed and scheduled the next.
    expect(delayedRetries.processed + delayedRetries.retried).toBe(delayedRetries.scheduled);
    expect(report.delayedRetries).toEqual(delayedRetries);
    expect(deadLettered.exhausted).toBe(0);
    expect(deadLettered.retriesSpent).toBe(0);
    expect(deadLettered.total).toBe(deadLettered.poison);
    expect(effects.payments + effects.unappliedPayments).toBeGreaterThan(0);
    expect(report.duplicateCauses.diagonal).toBe(true);
  });

  it('a slow dependency shorter than a lock: an original that scheduled a copy and lost its completion applies the payment, and its copy is a delayed_retry duplicate', async () => {
    const report = await environment.run({
      messages: 100,
      seed: 31,
      faults: {
        completionLost: 0.3,
        slowDependencies: [{ startMs: 0, durationMs: 20_000 }],
      },
    });

    expect(failures(report)).toEqual([]);
    expect(report.duplicateCauses.diagonal).toBe(true);
    expect(report.duplicateCauses.counts.delayed_retry?.delayed_retry).toBeGreaterThan(0);
  });

  it('a slow dependency that outlasts the retry schedule: the last copy is dead-lettered with its retries spent, which the invariants expect', async () => {
    const report = await environment.run({
      messages: 80,
      seed: 32,
      poison: 0,
      resendOutsideWindow: 0,
      faults: { slowDependencies: [{ startMs: 0, durationMs: 15 * 60_000 }] },
    });

    expect(failures(report)).toEqual([]);
    const { delayedRetries, deadLettered, effects } = report.accounting;
    expect(delayedRetries.deadLettered).toBeGreaterThan(0);
    // Each payment's three copies: two failed and scheduled the next, the third was dead-lettered.
    expect(delayedRetries.retried).toBe(2 * delayedRetries.deadLettered);
    expect(delayedRetries.processed).toBe(0);
    expect(deadLettered.retriesSpent).toBe(delayedRetries.deadLettered);
    expect(deadLettered.exhausted).toBe(deadLettered.retriesSpent);
    expect(deadLettered.byReason).toEqual({ MaxDeliveryCountExceeded: deadLettered.total });
    expect(effects.payments + effects.unappliedPayments).toBe(0);
    // The other consumers did not wait for it.
    expect(effects.reservations + effects.backorders).toBeGreaterThan(0);
  });

  it('without re-minted ids, no delivery is taken for a producer duplicate', async () => {
    const report = await environment.run({
      messages: 200,
      seed: 19,
      resendInsideWindow: 0.2,
      resendOutsideWindow: 0.2,
    });

    expect(failures(report)).toEqual([]);
    expect(report.accounting.reminted).toEqual({ sends: 0, absorbable: 0, detected: 0, falsePositives: 0 });
    expect(report.duplicateCauses.counts.suspected_producer_duplicate).toBeUndefined();
  });
});
