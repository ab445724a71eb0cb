import { replayCommand } from '../../scenario/replay';
import { logLine, ScenarioEnvironment, type ScenarioOptions } from '../../scenario/run';

/**
 * A seed replays its run: the same options give the same deliveries, in the same order, with the
 * same outcomes and settlements (model time is virtual and every party takes its turn).
 */
let environment: ScenarioEnvironment;
beforeAll(async () => {
  environment = await ScenarioEnvironment.start();
});
afterAll(async () => {
  await environment.stop();
});

const deliveryLog = async (options: ScenarioOptions): Promise<string[]> => {
  const report = await environment.run(options);
  expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
  return report.deliveryLog.map(logLine);
};

it.each<[string, ScenarioOptions]>([
  ['without faults', { seed: 21, messages: 150, maxConcurrentCalls: 8 }],
  [
    'with every fault, an outage and slow writes',
    {
      seed: 22,
      messages: 150,
      resendInsideWindow: 0.2,
      resendOutsideWindow: 0.2,
      poison: 0.05,
      faults: {
        crashBeforeCommit: 0.05,
        crashAfterCommit: 0.05,
        completionLost: 0.05,
        cosmosThrottle: 0.1,
        cosmosUnavailable: 0.1,
        cosmosDropAfterCommit: 0.05,
        slowHandler: 0.03,
        cosmosOutages: [{ startMs: 30_000, durationMs: 4 * 60_000, kind: 'unavailable' }],
      },
    },
  ],
  [
    'with a slow dependency and delayed retries',
    {
      seed: 23,
      messages: 120,
      faults: {
        completionLost: 0.05,
        slowDependencies: [{ startMs: 0, durationMs: 4 * 60_000 }],
      },
    },
  ],
])(
  '%s: one seed twice gives the same delivery log',
  async (_name, options) => {
    const first = await deliveryLog(options);
    const second = await deliveryLog(options);

    expect(first.length).toBeGreaterThan(options.messages);
    expect(second).toEqual(first);
  },
  300_000,
);

it('the replay command repeats each slow-dependency window in model minutes', () => {
  const command = replayCommand({
    seed: 5,
    messages: 3000,
    faults: {
      slowDependencies: [
        { startMs: 0, durationMs: 5 * 60_000 },
        { startMs: 90_000, durationMs: 30_000 },
      ],
    },
  });

  expect(command).toContain(' --slow-dependency 0:5 --slow-dependency 1.5:0.5');
});
