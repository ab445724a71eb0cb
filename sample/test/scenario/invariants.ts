import { startProgress } from '@idempotent-consumers/devkit';
import fc from 'fast-check';

import { topology } from '../../../src/topology';
import { replayCommand } from '../../scenario/replay';
import { ScenarioEnvironment, type ScenarioOptions } from '../../scenario/run';

/**
 * Property: whatever the workload and the faults, every invariant holds. Each run is a whole
 * pipeline run offline, deterministic for its options. PROPERTY_RUNS sets how many in all (default
 * RUNS), shared by the PARTS test files that call keepsEveryInvariant, so that jest runs them side by
 * side; more than RUNS show their progress on stderr. A failure prints the demo command that replays
 * that scenario delivery for delivery, and PROPERTY_SEED replays a file's whole fast-check sequence
 * (the failure prints the seed).
 */
const RUNS = 100;
const PARTS = 2;
/**
 * A guard against a run that hangs, not a speed check: real time a part may take per scenario
 * before it stops, failing. A scenario takes about 11 s when the whole suite shares two cores (CI,
 * 2026-12-02: 47 in 540 s), so this is well over three times that; jest's timeout for the part is
 * three minutes more, the longest one scenario may take. How fast scenarios run is the benchmarks'
 * business (npm run bench), not this test's.
 */
const TIME_LIMIT_PER_RUN_MS = 40_000;
const runs = Number(process.env.PROPERTY_RUNS ?? RUNS);
const seed = process.env.PROPERTY_SEED === undefined ? undefined : Number(process.env.PROPERTY_SEED);

/** The topics the app publishes on (src/topology.json `publishers`). */
const publishedTopics = topology.topics.filter((t) => (t.publishers ?? []).length > 0).map((t) => t.name);

const rate = (max: number): fc.Arbitrary<number> => fc.double({ min: 0, max, noNaN: true });

const scenarios: fc.Arbitrary<ScenarioOptions> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  messages: fc.integer({ min: 40, max: 220 }),
  resendInsideWindow: rate(0.3),
  resendOutsideWindow: rate(0.3),
  poison: rate(0.08),
  // A producer that sends payments again under fresh MessageIds: the payment applier's event key.
  remintIds: rate(0.3),
  maxConcurrentCalls: fc.integer({ min: 1, max: 16 }),
  faults: fc.record({
    crashBeforeCommit: rate(0.1),
    crashAfterCommit: rate(0.1),
    completionLost: rate(0.1),
    cosmosThrottle: rate(0.2),
    cosmosUnavailable: rate(0.15),
    cosmosDropAfterCommit: rate(0.1),
    slowHandler: rate(0.03),
    // The outbox relay: failed or unacknowledged sends, an instance dying before its checkpoint, a
    // lost checkpoint, a host stopping mid-page.
    relaySendFailure: rate(0.3),
    relayAckLost: rate(0.2),
    relayCrash: rate(0.2),
    relayCheckpointLost: rate(0.2),
    relayRestart: rate(0.1),
    // At most one window, up to 30 model minutes, of a Cosmos DB outage (503) or of throttling
    // beyond the SDK's retries (429); the circuit breaker holds deliveries through it.
    cosmosOutages: fc.array(
      fc.record({
        startMs: fc.integer({ min: 0, max: 3 * 60_000 }),
        durationMs: fc.integer({ min: 60_000, max: 30 * 60_000 }),
        kind: fc.constantFrom('unavailable' as const, 'throttle' as const),
      }),
      { maxLength: 1 },
    ),
    // At most one window, up to 10 model minutes (several sweeper runs: what the invariant 'topics'
    // needs, at a third of the cost of 30), in which a topic the app publishes on refuses the outbox's
    // sends: the other topic's events must go on. The demo takes longer ones (--topic-refuses).
    topicOutages: fc.array(
      fc.record({
        topic: fc.constantFrom(...publishedTopics),
        startMs: fc.integer({ min: 0, max: 3 * 60_000 }),
        durationMs: fc.integer({ min: 60_000, max: 10 * 60_000 }),
      }),
      { maxLength: publishedTopics.length > 0 ? 1 : 0 },
    ),
    // At most one window, up to 15 model minutes, in which the delayed-retry consumers' dependency
    // times out: shorter than the payment applier's schedule (7 minutes and more) its copies ride it
    // out; longer, the last copy is dead-lettered with its retries spent.
    slowDependencies: fc.array(
      fc.record({
        startMs: fc.integer({ min: 0, max: 3 * 60_000 }),
        durationMs: fc.integer({ min: 60_000, max: 15 * 60_000 }),
      }),
      { maxLength: 1 },
    ),
  }),
});

/** Part `part` (1 to PARTS) of the property test: its share of the runs, in a test of its own. */
export function keepsEveryInvariant(part: number): void {
  const share = Math.floor(runs / PARTS) + (part <= runs % PARTS ? 1 : 0);
  let environment: ScenarioEnvironment;
  beforeAll(async () => {
    environment = await ScenarioEnvironment.start();
  });
  afterAll(async () => {
    await environment.stop();
  });
  const timeLimitMs = share * TIME_LIMIT_PER_RUN_MS;
  it(
    `keeps every invariant over ${share} random workloads and fault schedules (part ${part} of ${PARTS})`,
    async () => {
      await property(environment, share, part, timeLimitMs);
    },
    timeLimitMs + 180_000,
  );
}

async function property(
  environment: ScenarioEnvironment,
  runs: number,
  part: number,
  timeLimitMs: number,
): Promise<void> {
  let ran = 0;
  let deliveries = 0;
  const started = performance.now();
  // Written straight to stderr: jest shows console output only once the test ends.
  const progress =
    runs > RUNS / PARTS
      ? startProgress({
          label: `Property test, part ${part}`,
          total: runs,
          unit: 'scenarios',
          write: (line) => process.stderr.write(`${line}\n`),
          interactive: process.stderr.isTTY,
        })
      : undefined;
  try {
    await fc.assert(
      fc.asyncProperty(scenarios, async (scenario) => {
        const report = await environment.run(scenario);
        ran++;
        progress?.advance();
        deliveries += report.deliveries.total;
        const broken = report.invariants.filter((i) => !i.ok);
        if (broken.length > 0) {
          throw new Error(
            `Scenario seed ${scenario.seed} broke ${broken.map((i) => `${i.name} (${i.detail})`).join('; ')}. ` +
              `Replay: ${replayCommand(scenario)}`,
          );
        }
      }),
      {
        numRuns: runs,
        endOnFailure: true,
        // Stops, failing, before jest's timeout would: a test jest times out goes on running, and
        // keeps the run from exiting.
        interruptAfterTimeLimit: timeLimitMs,
        markInterruptAsFailure: true,
        ...(seed === undefined ? {} : { seed }),
      },
    );
  } finally {
    console.log(
      `Property test, part ${part}: ${ran} scenarios ran (${deliveries} deliveries) in ${((performance.now() - started) / 1000).toFixed(1)} s.`,
    );
  }
}
