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
    // The sample's events, documents and consumers, the demo, the scenario model, the benchmarks,
    // the example events, the live test, the sample's tests and the demo's report.
    'sample',
  ],
  /** package.json scripts that run removed files. */
  scripts: ['demo', 'bench', 'bench:purge', 'test:live'],
  /** The CI job that runs the sample's live test (npm run test:live). */
  ciJob: { file: '.github/workflows/ci.yml', job: 'live-tests' },
};
