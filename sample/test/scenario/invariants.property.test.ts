import fc from 'fast-check';

import { startProgress } from '../../../cli/progress';
import { topology } from '../../../src/topology';
import { replayCommand } from '../../scenario/replay';
import { ScenarioEnvironment, type ScenarioOptions } from '../../scenario/run';

/**
 * Property: whatever the workload and the faults, every invariant holds. Each run is a whole
 * pipeline run offline, deterministic for its options. PROPERTY_RUNS sets how many (default RUNS;
 * more show their progress on stderr); a failure prints the demo command that replays that scenario
 * delivery for delivery, and PROPERTY_SEED replays fast-check's whole sequence (it prints the seed).
 */
const RUNS = 100;
const runs = Number(process.env.PROPERTY_RUNS ?? RUNS);
const seed = process.env.PROPERTY_SEED === undefined ? undefined : Number(process.env.PROPERTY_SEED);

let environment: ScenarioEnvironment;
beforeAll(async () => {
  environment = await ScenarioEnvironment.start();
});
afterAll(async () => {
  await environment.stop();
});

/** The topics the app publishes on (src/topology.json `publishers`). */
const publishedTopics = topology.topics.filter((t) => (t.publishers ?? []).length > 0).map((t) => t.name);

const rate = (max: number): fc.Arbitrary<number> => fc.double({ min: 0, max, noNaN: true });

const scenarios: fc.Arbitrary<ScenarioOptions> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  messages: fc.integer({ min: 40, max: 220 }),
  resendInsideWindow: rate(0.3),
  resendOutsideWindow: rate(0.3),
  poison: rate(0.08),
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
    // At most one window, up to 30 model minutes, in which a topic the app publishes on refuses the
    // outbox's sends: the other topic's events must go on (the invariant 'topics').
    topicOutages: fc.array(
      fc.record({
        topic: fc.constantFrom(...publishedTopics),
        startMs: fc.integer({ min: 0, max: 3 * 60_000 }),
        durationMs: fc.integer({ min: 60_000, max: 30 * 60_000 }),
      }),
      { maxLength: publishedTopics.length > 0 ? 1 : 0 },
    ),
  }),
});

it(`keeps every invariant over ${runs} random workloads and fault schedules`, async () => {
  let ran = 0;
  let deliveries = 0;
  const started = performance.now();
  // Written straight to stderr: jest shows console output only once the test ends.
  const progress =
    runs > RUNS
      ? startProgress({
          label: 'Property test',
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
      { numRuns: runs, endOnFailure: true, ...(seed === undefined ? {} : { seed }) },
    );
  } finally {
    console.log(
      `Property test: ${ran} scenarios ran (${deliveries} deliveries) in ${((performance.now() - started) / 1000).toFixed(1)} s.`,
    );
  }
}, 600_000);
