import type { CauseTable } from '../../scenario/causes';
import { ScenarioEnvironment, type ScenarioOptions } from '../../scenario/run';

/**
 * Duplicate causes over the whole pipeline offline (issue 24): the demo's scenario with faults that
 * make each cause happen, and the table of the cause the run injected (sample/scenario/causes.ts:
 * from the host's deliveries, the outbox's sends and the producer's late resends) against the
 * cause the inbox named on each duplicate's log line. The table must be diagonal; a seed replays
 * its run, attribution included.
 */
let environment: ScenarioEnvironment;
beforeAll(async () => {
  environment = await ScenarioEnvironment.start();
});
afterAll(async () => {
  await environment.stop();
});

const SEEDS = (process.env.CAUSE_DEMO_SEEDS ?? '31,32,33').split(',').map(Number);

/**
 * The broker's duplicate window is short (the app is given the same value), so that the outbox's
 * retries and the sweeper's resends pass it, as the settings check warns they would
 * (OUTBOX_SWEEP_AGE + OUTBOX_SWEEP_INTERVAL over SERVICEBUS_DUPLICATE_WINDOW): with PT1H every
 * relay resend is dropped by the broker and no `relay_resend` reaches a consumer.
 */
const scenario = (seed: number): ScenarioOptions => ({
  seed,
  messages: 200,
  duplicateWindowMs: 20_000,
  resendInsideWindow: 0.1,
  resendOutsideWindow: 0.15,
  // suspected_producer_duplicate: payments sent again under a fresh MessageId, which the payment
  // applier's event key absorbs.
  remintIds: 0.1,
  faults: {
    // redelivery: the batch committed, then the lock ran out or the host let go of the message.
    crashAfterCommit: 0.05,
    completionLost: 0.05,
    // A batch that commits and loses its response (`retried`): abandoned and at once redelivered.
    cosmosDropAfterCommit: 0.05,
    // lock_overlap: a write slower than functionTimeout; the host gives up and redelivers.
    slowHandler: 0.05,
    // relay_resend: sends the relay saw fail after Service Bus took them, retried after the window
    // (failed sends in between lengthen the retry policy's backoff).
    relayAckLost: 0.4,
    relaySendFailure: 0.3,
    relayCrash: 0.2,
    relayCheckpointLost: 0.2,
  },
});

/** The causes the scenario makes happen: each at least once over the seeds, most in every seed. */
const CAUSES = [
  'lock_overlap',
  'redelivery',
  'relay_resend',
  'resend_after_window',
  'suspected_producer_duplicate',
];

/** The causes the seeds' tables had on their diagonal. */
const happened = new Set<string>();

/** The causes on the table's diagonal, with their counts. */
const diagonalOf = (table: CauseTable): Record<string, number> =>
  Object.fromEntries(Object.entries(table.counts).map(([cause, row]) => [cause, row[cause] ?? 0]));

describe('duplicate causes in the demo scenario: injected against named is diagonal', () => {
  it.each(SEEDS)(
    'seed %i (replay it with CAUSE_DEMO_SEEDS=<seed> npx jest sample/test/scenario/causes.test.ts)',
    async (seed) => {
      const report = await environment.run(scenario(seed));
      const table = report.duplicateCauses;

      // The seed is in what is compared, so a failure names what to replay.
      expect({ seed, offDiagonal: table.offDiagonal, diagonal: table.diagonal }).toEqual({
        seed,
        offDiagonal: [],
        diagonal: true,
      });
      // Only the causes the faults make, most of them in every run (relay_resend needs a relay
      // retry to come after the window, which a seed may not draw): checked over the seeds below.
      const produced = Object.entries(diagonalOf(table))
        .filter(([, count]) => count > 0)
        .map(([cause]) => cause);
      expect({ seed, others: produced.filter((cause) => !CAUSES.includes(cause)) }).toEqual({
        seed,
        others: [],
      });
      expect(produced.length).toBeGreaterThanOrEqual(3);
      for (const cause of produced) happened.add(cause);
      expect(report.ok).toBe(true);
    },
    180_000,
  );

  it('over the seeds, the faults made each cause happen: the diagonal is not that of an empty table', () => {
    expect([...happened].sort()).toEqual(CAUSES);
  });

  it('replays a seed: the same duplicates, injected and named the same way', async () => {
    const seed = SEEDS[0] ?? 31;
    const first = await environment.run(scenario(seed));
    const again = await environment.run(scenario(seed));

    expect(first.duplicateCauses.duplicates).toBeGreaterThan(0);
    expect(again.duplicateCauses).toEqual(first.duplicateCauses);
    expect(again.deliveries.digest).toBe(first.deliveries.digest);
  }, 360_000);
});
