import { formatDuration } from '@idempotent-consumers/inbox/internal';

import type { ScenarioOptions } from './run';

/**
 * The demo's options and their defaults, and the demo command that replays a scenario: the seed
 * and every option whose value differs from the demo's default, faults and outages included. A run
 * is deterministic (simulation.ts), so the command gives the same deliveries in the same order.
 */
export const demoDefaults = {
  messages: 3000,
  concurrency: 16,
  duplicateWindow: 'PT1H',
  rates: {
    'resend-inside': 0.05,
    'resend-outside': 0.03,
    poison: 0.01,
    remint: 0.01,
    'crash-before': 0.01,
    'crash-after': 0.01,
    'completion-lost': 0.01,
    'cosmos-429': 0.02,
    'cosmos-503': 0.01,
    'cosmos-drop': 0.01,
    slow: 0.002,
    'relay-send-fail': 0.02,
    'relay-ack-lost': 0.01,
    'relay-crash': 0.01,
    'relay-checkpoint-lost': 0.01,
    'relay-restart': 0.005,
  },
} as const;

export type RateFlag = keyof typeof demoDefaults.rates;

/** Each rate flag's value in a scenario (the workload's own defaults where it leaves one out). */
const rateIn: Record<RateFlag, (options: ScenarioOptions) => number> = {
  'resend-inside': (o) => o.resendInsideWindow ?? 0.05,
  'resend-outside': (o) => o.resendOutsideWindow ?? 0.03,
  poison: (o) => o.poison ?? 0.01,
  remint: (o) => o.remintIds ?? 0,
  'crash-before': (o) => o.faults?.crashBeforeCommit ?? 0,
  'crash-after': (o) => o.faults?.crashAfterCommit ?? 0,
  'completion-lost': (o) => o.faults?.completionLost ?? 0,
  'cosmos-429': (o) => o.faults?.cosmosThrottle ?? 0,
  'cosmos-503': (o) => o.faults?.cosmosUnavailable ?? 0,
  'cosmos-drop': (o) => o.faults?.cosmosDropAfterCommit ?? 0,
  slow: (o) => o.faults?.slowHandler ?? 0,
  'relay-send-fail': (o) => o.faults?.relaySendFailure ?? 0,
  'relay-ack-lost': (o) => o.faults?.relayAckLost ?? 0,
  'relay-crash': (o) => o.faults?.relayCrash ?? 0,
  'relay-checkpoint-lost': (o) => o.faults?.relayCheckpointLost ?? 0,
  'relay-restart': (o) => o.faults?.relayRestart ?? 0,
};

export function replayCommand(options: ScenarioOptions): string {
  const flags = [`--seed ${options.seed}`];
  if (options.messages !== demoDefaults.messages) flags.push(`--messages ${options.messages}`);
  const concurrency = options.maxConcurrentCalls ?? 16;
  if (concurrency !== demoDefaults.concurrency) flags.push(`--concurrency ${concurrency}`);
  const window = formatDuration((options.duplicateWindowMs ?? 3_600_000) / 1000);
  if (window !== demoDefaults.duplicateWindow) flags.push(`--duplicate-window ${window}`);
  for (const [flag, fallback] of Object.entries(demoDefaults.rates) as [RateFlag, number][]) {
    const value = rateIn[flag](options);
    // Full precision: String() of a double parses back to the same double.
    if (value !== fallback) flags.push(`--${flag} ${String(value)}`);
  }
  for (const { startMs, durationMs, kind } of options.faults?.cosmosOutages ?? []) {
    const flag = kind === 'throttle' ? 'cosmos-throttling' : 'cosmos-outage';
    flags.push(`--${flag} ${String(startMs / 60_000)}:${String(durationMs / 60_000)}`);
  }
  for (const { topic, startMs, durationMs } of options.faults?.topicOutages ?? []) {
    flags.push(`--topic-refuses ${topic}:${String(startMs / 60_000)}:${String(durationMs / 60_000)}`);
  }
  for (const { startMs, durationMs } of options.faults?.slowDependencies ?? []) {
    flags.push(`--slow-dependency ${String(startMs / 60_000)}:${String(durationMs / 60_000)}`);
  }
  return `npm run demo -- ${flags.join(' ')}`;
}
