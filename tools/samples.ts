/**
 * Everything that exists only for the sample business: the one list of what `npm run
 * remove:samples` removes.
 */
export const SAMPLE = {
  /** Their subscriptions and their place among a topic's publishers leave src/topology.json (a topic left with neither goes too); their functions (functions/<function>.ts) and tests (test/functions/<function>.test.ts) are deleted. */
  consumers: [
    'billing.payment-applier',
    'inventory.stock-reserver',
    'billing.invoice-status-projector',
    'shipping.shipment-planner',
  ],
  files: [
    // The sample's events, documents and consumers.
    'src/sample',
    // The library tested through the sample consumers (test/inbox tests it with its own consumers).
    'test/functions/deliveryFailures.test.ts',
    'test/functions/telemetry.test.ts',
    // The deployment package run with the sample's invocations.
    'test/package/package.test.ts',
    // The demo, the scenario model and the benchmarks: they run the sample business.
    'offline/demo.ts',
    'offline/scenario',
    'offline/bench',
    'tsconfig.bench.json',
    'test/offline/commands.test.ts',
    'test/offline/benchResults.test.ts',
    'test/offline/purgeUnderLoad.test.ts',
    'test/offline/scenario',
    // A report the demo wrote (the docs' sample-only passages are marked: tools/sampleDocs.ts).
    'docs/sample-demo-report.md',
    // The example events npm run send takes (--file): the sample's events.
    'examples',
    // The live test pays a sample invoice; the tools' tests send the sample's events.
    'tools/liveTests.ts',
    'test/tools/liveTests.test.ts',
    'test/tools/events.test.ts',
    'test/tools/send.test.ts',
    'test/tools/deadLetters.test.ts',
    'test/tools/deadLettersInbox.test.ts',
    // The README walkthrough of npm start sends the sample's events.
    'test/offline/start/walkthrough.test.ts',
    // The test of this removal.
    'test/scaffold/removeSamples.test.ts',
  ],
  /** package.json scripts that run removed files. */
  scripts: ['demo', 'bench', 'bench:purge', 'test:live'],
  /** The CI job that runs the sample's live test (npm run test:live). */
  ciJob: { file: '.github/workflows/ci.yml', job: 'live-tests' },
};
