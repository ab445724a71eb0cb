import { bindingOf } from '@idempotent-consumers/inbox/internal';
import fc from 'fast-check';

import { appTopology } from '../cli/project';
import { type Difference, firstDifference } from './compare';
import { messagesArbitrary } from './messages';
import { type RunFaults, type RunResult, VerifyEnvironment, type VerifyMessage } from './run';
import { oneStatePerVersion } from './versioned';

/**
 * `npm run verify` (issue 43): for a consumer, random messages from its own schema through the
 * faults (run.ts), each run compared with the same messages applied once, in the order the faulty
 * run committed them. fast-check drives the runs from a seed and shrinks a failure to a small case;
 * the seed and the path of that case replay it.
 */
export interface VerifyOptions {
  /** Runs per consumer; default RUNS. */
  runs?: number;
  /** fast-check's seed; default random (printed, so any run can be replayed). */
  seed?: number;
  /** fast-check's path of one case (from a report): with its seed, replays that case alone. */
  path?: string;
  /** At most this many messages per run; default MAX_MESSAGES. */
  maxMessages?: number;
  /** Fields the consumer's documents may hold that change from run to run on purpose, ignored. */
  volatile?: readonly string[];
  /** Real ms a consumer's runs and shrinking may take in all before verify stops with what it found; default 120 s. */
  timeLimitMs?: number;
  /** Told after each run. */
  onRun?: (consumer: string, run: number) => void;
}

export const RUNS = 10;
export const MAX_MESSAGES = 8;

export interface Verdict {
  consumer: string;
  ok: boolean;
  /** Runs made (shrinking included). */
  runs: number;
  seed: number;
  /** Why the consumer was not verified (a schema verify cannot read). */
  skipped?: string;
  failure?: Failure;
  /** Side effects verify cannot compare: external requests that ran under redelivery. */
  warnings: string[];
  elapsedMs: number;
}

export interface Failure {
  /** The likely cause, in words. */
  cause: string;
  difference?: Difference;
  /** What the difference's two sides are. */
  between: 'applied once, under faults' | 'applied once, applied once again';
  /** The smallest case fast-check found: the messages (bounded) and the faults. */
  messages: string;
  faults: RunFaults;
  /** The one command that replays this case. */
  replay: string;
}

export class DifferenceFound extends Error {
  constructor(
    readonly likelyCause: string,
    readonly difference: Difference | undefined,
    /** Between what: the reference run and the faulty one, or the reference run and itself again. */
    readonly between: Failure['between'] = 'applied once, under faults',
  ) {
    super(likelyCause);
  }
}

/**
 * A chance up to `max`, drawn evenly (fast-check's doubles crowd near 0, and its bias towards small
 * values would leave most runs without faults); it still shrinks towards 0.
 */
const rate = (max: number): fc.Arbitrary<number> =>
  fc.noBias(fc.integer({ min: 0, max: 1000 })).map((permille) => (permille / 1000) * max);

/** The faults of a run (run.ts RunFaults), up to rates at which every message still settles. */
export const faultsArbitrary: fc.Arbitrary<RunFaults> = fc.record({
  crashBeforeCommit: rate(0.2),
  crashAfterCommit: rate(0.2),
  completionLost: rate(0.2),
  cosmosThrottle: rate(0.2),
  cosmosUnavailable: rate(0.15),
  cosmosDropAfterCommit: rate(0.15),
  slowWrite: rate(0.1),
  resendInsideWindow: rate(0.3),
  resendAfterWindow: rate(0.3),
  maxConcurrentCalls: fc.noBias(fc.integer({ min: 1, max: 8 })),
  outage: fc.option(
    fc.record({
      startMs: fc.integer({ min: 0, max: 120_000 }),
      durationMs: fc.integer({ min: 30_000, max: 1_200_000 }),
    }),
    { nil: null },
  ),
  restartAtMs: fc.option(fc.integer({ min: 0, max: 120_000 }), { nil: null }),
});

export async function verifyConsumer(
  environment: VerifyEnvironment,
  consumerName: string,
  options: VerifyOptions = {},
): Promise<Verdict> {
  const started = performance.now();
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  const consumer = environment.consumers().get(consumerName);
  const verdict = (fields: Partial<Verdict>): Verdict => ({
    consumer: consumerName,
    ok: true,
    runs: 0,
    seed,
    warnings: [],
    elapsedMs: performance.now() - started,
    ...fields,
  });
  if (consumer === undefined) throw new Error(`No consumer named '${consumerName}' is registered.`);
  let messages: fc.Arbitrary<VerifyMessage>;
  try {
    const { subjects } = bindingOf(consumerName, appTopology());
    messages = fc.record({
      subject: subjects.length === 0 ? fc.constant(consumerName) : fc.constantFrom(...subjects),
      body: messagesArbitrary(consumerName, consumer.schema, consumer.examples),
    });
  } catch (error) {
    return verdict({ ok: false, skipped: (error as Error).message });
  }
  const volatile = options.volatile ?? [];
  const external = new Map<string, number>();
  let runs = 0;
  const property = fc.asyncProperty(
    fc
      .array(messages, { minLength: 1, maxLength: options.maxMessages ?? MAX_MESSAGES })
      .map((bodies) => (consumer.kind === 'versioned' ? oneStatePerVersion(consumer, bodies) : bodies)),
    faultsArbitrary,
    fc.integer({ min: 1, max: 2 ** 31 - 1 }),
    async (bodies, faults, runSeed) => {
      runs++;
      const result = await environment.run(consumerName, bodies, faults, runSeed, volatile);
      options.onRun?.(consumerName, runs);
      for (const [messageId, count] of result.outside.http) {
        const once = result.referenceOutside.http.get(messageId) ?? 0;
        if (count > once) external.set(messageId, Math.max(external.get(messageId) ?? 0, count));
      }
      const problem = judge(result);
      if (problem) throw problem;
    },
  );
  const details = await fc.check(property, {
    numRuns: options.runs ?? RUNS,
    seed,
    ...(options.path === undefined ? {} : { path: options.path }),
    interruptAfterTimeLimit: options.timeLimitMs ?? 120_000,
    markInterruptAsFailure: false,
  });
  const warnings = [...external.entries()].map(
    ([messageId, count]) =>
      `${messageId}: the handler's own HTTP requests ran ${count} times for one message, more than when it runs once (redelivery repeats them: not exactly-once)`,
  );
  if (!details.failed) return verdict({ runs, warnings });
  const [bodies, faults] = details.counterexample as [VerifyMessage[], RunFaults, number];
  const found = details.errorInstance;
  const cause =
    found instanceof DifferenceFound
      ? found.likelyCause
      : `the run failed: ${found instanceof Error ? found.message : String(found)}`.slice(0, 500);
  return verdict({
    ok: false,
    runs,
    warnings,
    failure: {
      cause,
      ...(found instanceof DifferenceFound && found.difference !== undefined
        ? { difference: found.difference }
        : {}),
      between: found instanceof DifferenceFound ? found.between : 'applied once, under faults',
      messages: bounded(bodies),
      faults,
      replay: `npm run verify -- ${consumerName} --seed ${details.seed} --path ${details.counterexamplePath ?? ''}`,
    },
  });
}

/**
 * Verifies consumers by name (every registered one when `names` is empty), on a verify environment
 * of their own, started and stopped here: what a consumer's test calls, as `npm run verify` does.
 */
export async function verifyConsumers(
  names: readonly string[],
  options: VerifyOptions = {},
): Promise<Verdict[]> {
  let environment = await VerifyEnvironment.start();
  try {
    const verdicts: Verdict[] = [];
    for (const name of names.length > 0 ? names : [...environment.consumers().keys()]) {
      verdicts.push(await verifyConsumer(environment, name, options));
      environment = await renewedIfBroken(environment);
    }
    return verdicts;
  } finally {
    await environment.stop();
  }
}

/** The environment, or a new one when a run left it unusable (one that did not settle), so that the next consumer is verified on its own. */
export async function renewedIfBroken(environment: VerifyEnvironment): Promise<VerifyEnvironment> {
  if (environment.broken === undefined) return environment;
  await environment.stop();
  return VerifyEnvironment.start();
}

/** What a run shows, most telling first: a value that changes by itself, then state outside the batch. */
export function judge(result: RunResult): DifferenceFound | undefined {
  const unstable = firstDifference(result.reference, result.referenceAgain);
  if (unstable)
    return new DifferenceFound(
      `${unstableCause(unstable)}: the same messages applied once each, in the same order, wrote different documents`,
      unstable,
      'applied once, applied once again',
    );
  // A message the handler refuses applied once (a business rule) may end in the dead-letter queue.
  const dead = result.deadLettered.find(({ messageId }) => !result.referenceFailed.includes(messageId));
  if (dead !== undefined)
    return new DifferenceFound(
      `a message the handler applies when it runs once was dead-lettered under faults (${dead.messageId}: ${dead.reason}): it fails when it runs again`,
      undefined,
    );
  const refused = result.referenceFailed.find((messageId) => result.committed.includes(messageId));
  if (refused !== undefined)
    return new DifferenceFound(
      `${refused} committed under faults but fails applied once, in the order the faulty run committed them: the handler depends on something outside the batch`,
      undefined,
    );
  const repeated = [...result.outside.serviceBus].find(
    ([messageId, count]) => count > (result.referenceOutside.serviceBus.get(messageId) ?? 0),
  );
  if (repeated !== undefined)
    return new DifferenceFound(
      `a send outside tx.publish: the handler sent ${repeated[1]} messages with a Service Bus client of its own for ${repeated[0]} (${result.referenceOutside.serviceBus.get(repeated[0]) ?? 0} when it runs once); tx.publish sends once, with the batch`,
      undefined,
    );
  const difference = firstDifference(result.reference, result.faulty);
  if (difference === undefined) return undefined;
  const outsideCosmos = [...result.outside.cosmos.values()].reduce((sum, count) => sum + count, 0);
  if (outsideCosmos > 0)
    return new DifferenceFound(
      `a read or write outside the batch: the handler made ${outsideCosmos} Cosmos DB requests with a client of its own, which a redelivery repeats and a failed batch does not undo`,
      difference,
    );
  return new DifferenceFound(
    'state kept between deliveries (a module-level variable or cache): the documents depend on how often the handler ran, which redelivery changes',
    difference,
  );
}

const ISO_TIME = /^"?\d{4}-\d\d-\d\dT\d\d:\d\d/;
const RANDOM_ID = /[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}|[0-9a-z]{16,}/i;

/** What a value that differs between two identical runs likely is: a time, a random id, or state the handler keeps. */
function unstableCause({ expected, actual }: Difference): string {
  const values = [expected, actual];
  if (values.every((value) => ISO_TIME.test(value) || (/^\d+(\.\d+)?$/.test(value) && Number(value) > 1e9)))
    return "a nondeterministic value: a time the handler reads (Date.now(), new Date()) rather than the delivery's enqueuedTimeUtc";
  if (values.some((value) => RANDOM_ID.test(value)))
    return 'a nondeterministic value: a random id (randomUUID(), Math.random()) rather than one derived from the message';
  return 'state kept between deliveries (a module-level variable or cache): what the handler writes depends on what ran before';
}

/** The messages as a report shows them: JSON, at most 1,000 characters. */
function bounded(messages: VerifyMessage[]): string {
  const text = JSON.stringify(messages);
  return text.length > 1000 ? `${text.slice(0, 1000)}… (${messages.length} messages)` : text;
}
