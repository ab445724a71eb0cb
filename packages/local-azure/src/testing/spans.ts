import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  type IdGenerator,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

import { seededRandom } from '../random';
import { testHooks } from './hooks';

/**
 * The spans the code under test ends, kept in memory (no Azure): a tracer provider registered as
 * the global one for the test file, as the Azure Monitor distro registers its own in Azure. With a
 * seed, trace and span ids come from packages/local-azure/src/random.ts's seeded generator, so a replayed seed makes
 * the same ids.
 */
export function useSpanExporter(seed?: number): {
  exporter: InMemorySpanExporter;
  reseed: (seed: number) => void;
} {
  const exporter = new InMemorySpanExporter();
  let random = seededRandom(seed ?? 1);
  const seeded = seed !== undefined;
  const hex = (digits: number): string =>
    Array.from({ length: digits }, () => Math.floor(random() * 16).toString(16)).join('');
  const idGenerator: IdGenerator = {
    generateTraceId: () => hex(32),
    generateSpanId: () => hex(16),
  };
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
    ...(seeded ? { idGenerator } : {}),
  });
  const { afterAll, beforeAll, beforeEach } = testHooks();
  beforeAll(() => {
    trace.setGlobalTracerProvider(provider);
  });
  afterAll(async () => {
    trace.disable();
    await provider.shutdown();
  });
  beforeEach(() => exporter.reset());
  return {
    exporter,
    reseed: (next) => {
      random = seededRandom(next);
    },
  };
}

/** The ended spans of that name. */
export function spansNamed(exporter: InMemorySpanExporter, name: string): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((span) => span.name === name);
}
