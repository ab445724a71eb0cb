import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { type ProjectCopy, unusedConsumer, useProjectCopy } from '../../src/testing/projectCopy';

/**
 * `npm run verify` catches the ways a handler breaks exactly-once that the library cannot see
 * (issue 43), and names each: consumers planted with one defect each, added to a copy of the project
 * with new:consumer and then given the planted handler, are verified beside the sample's, which pass.
 * The run is seeded, so its output is the same each time.
 */
const copy = useProjectCopy();

/** A planted consumer's source: its module state and imports, and its handler's body. */
interface Planted {
  name: string;
  /** What the report must say the likely cause is. */
  cause: RegExp;
  imports?: string;
  state?: string;
  /** An inbox consumer's handler body; */
  handle?: string;
  /** or a versioned consumer's `project` body. */
  project?: string;
}

const OWN_CLIENT = `let client: CosmosClient | undefined;
/** A Cosmos DB client of the handler's own, on the app's container: not the library's. */
const own = () =>
  (client ??= new CosmosClient({ endpoint: process.env.COSMOS_ENDPOINT!, key: process.env.COSMOS_KEY! }))
    .database(process.env.COSMOS_DATABASE!)
    .container(process.env.COSMOS_CONTAINER!);`;

const PLANTED: readonly Planted[] = [
  {
    name: 'planted.counter',
    cause: /^state kept between deliveries/,
    state: 'let applied = 0;',
    handle: `applied += 1;
    tx.upsert({ id: event.id, partitionKey: tx.partitionKey, type: 'planted', applied });`,
  },
  {
    name: 'planted.own-write',
    cause: /^a read or write outside the batch/,
    imports: "import { CosmosClient } from '@azure/cosmos';",
    state: OWN_CLIENT,
    handle: `const audit = own();
    const { resource } = await audit.item(\`audit-\${event.id}\`, tx.partitionKey).read<{ runs: number }>();
    await audit.items.upsert({ id: \`audit-\${event.id}\`, partitionKey: tx.partitionKey, runs: (resource?.runs ?? 0) + 1 });
    tx.upsert({ id: event.id, partitionKey: tx.partitionKey, type: 'planted', quantity: event.quantity });`,
  },
  {
    name: 'planted.own-send',
    cause: /^a send outside tx\.publish/,
    imports: "import { ServiceBusClient, type ServiceBusSender } from '@azure/service-bus';",
    state: `let sender: ServiceBusSender | undefined;
/** A Service Bus sender of the handler's own, not tx.publish. */
const own = () => (sender ??= new ServiceBusClient(process.env.ServiceBusConnection!).createSender('planted-events'));`,
    handle: `await own().sendMessages({ body: { id: event.id }, messageId: \`notified-\${event.id}\` });
    tx.upsert({ id: event.id, partitionKey: tx.partitionKey, type: 'planted', quantity: event.quantity });`,
  },
  {
    name: 'planted.clock',
    cause: /^a nondeterministic value: a time/,
    handle: `tx.upsert({ id: event.id, partitionKey: tx.partitionKey, type: 'planted', at: Date.now() });`,
  },
  {
    name: 'planted.outside-read',
    cause: /^a read or write outside the batch/,
    imports: "import { CosmosClient } from '@azure/cosmos';",
    state: OWN_CLIENT,
    handle: `const { resource } = await own().item(event.id, tx.partitionKey).read<{ total: number }>();
    tx.upsert({ id: event.id, partitionKey: tx.partitionKey, type: 'planted', total: (resource?.total ?? 0) + event.quantity });`,
  },
  {
    name: 'planted.versioned-counter',
    cause: /^state kept between deliveries/,
    state: 'let projected = 0;',
    project: `projected += 1;
    return { id: event.id, partitionKey: \`planted:\${event.id}\`, version: event.quantity, projected };`,
  },
];

function plant(project: ProjectCopy, planted: Planted): string {
  const own = unusedConsumer(project, {
    name: planted.name,
    topic: 'planted-events',
    subject: `Planted${PLANTED.indexOf(planted)}`,
  });
  const added = project.tool('packages/devkit/src/tools/newConsumer.ts', [
    ...['--name', own.name, '--topic', own.topic, '--subject', own.subject],
  ]);
  expect([own.name, added.status, added.stderr]).toEqual([own.name, 0, '']);
  const functionFile = readFileSync(path.join(project.root, 'functions', `${own.function}.ts`), 'utf8');
  const identifier = /import \{ (\w+) \} from '\.\.\/src\/consumers\//.exec(functionFile)?.[1];
  expect(identifier).toBeDefined();
  writeFileSync(
    path.join(project.root, 'src', 'consumers', `${own.function}.ts`),
    `import { ${planted.project === undefined ? 'defineInboxConsumer' : 'defineVersionedConsumer'} } from '@idempotent-consumers/inbox';
import { z } from 'zod';
${planted.imports ?? ''}

const Event = z.object({ id: z.string().regex(/^[a-z0-9-]{1,40}$/), quantity: z.number().int().positive().max(1000) });
${planted.state ?? ''}

export const ${identifier} = ${
      planted.project === undefined
        ? `defineInboxConsumer({
  name: '${own.name}',
  schema: Event,
  partitionKey: (event) => \`planted:\${event.id}\`,
  async handle(event, tx) {
    ${planted.handle}
  },
});`
        : `defineVersionedConsumer({
  name: '${own.name}',
  schema: Event,
  project(event) {
    ${planted.project}
  },
});`
    }
`,
  );
  return own.name;
}

describe('npm run verify on planted defects', () => {
  it('names the cause of each, with the command that replays it, and passes the sample', () => {
    const names = PLANTED.map((planted) => plant(copy(), planted));

    const verified = copy().tool('packages/devkit/src/tools/verify.ts', ['--seed', '7', '--runs', '20']);

    const lines = verified.stdout.split('\n');
    for (const [index, planted] of PLANTED.entries()) {
      const line =
        lines.find((text) => text.startsWith(`✗ ${names[index]}: `)) ?? `${names[index]}: not reported`;
      expect([names[index], line.slice(`✗ ${names[index]}: `.length)]).toEqual([
        names[index],
        expect.stringMatching(planted.cause),
      ]);
      const replay = lines.slice(lines.indexOf(line)).find((text) => text.startsWith('  replay: '));
      expect(replay).toMatch(
        new RegExp(`^  replay: npm run verify -- ${names[index]} --seed \\d+ --path [\\d:]+$`),
      );
    }
    // The sample's four consumers, while the sample is in the project.
    const samples = existsSync(path.join(copy().root, 'sample'))
      ? [
          'billing.invoice-status-projector',
          'billing.payment-applier',
          'inventory.stock-reserver',
          'shipping.shipment-planner',
        ]
      : [];
    for (const sample of samples)
      expect(lines.find((text) => text.includes(` ${sample}: `))).toMatch(
        new RegExp(`^✓ ${sample}: \\d+ runs`),
      );
    expect(verified.status).toBe(1);
  }, 600_000);
});
