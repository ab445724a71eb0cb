// The sample's walkthrough (sample/README.md, "The walkthrough: `npm start`"), run as a user runs it: `npm start` in
// one process group, the second terminal's commands one by one through bash, the first terminal's
// output checked after each, then Ctrl+C (SIGINT to the group) and a clean stop. The commands are
// read from sample/README.md, so the docs and this test cannot drift apart; only free ports, a temporary
// build folder, a temporary settings file (LOCAL_RUN_FILE) and --watch (which a terminal gets by
// default; this test's output is no terminal) are added. It runs in a copy of the project: the
// walkthrough adds a consumer, and npm start's watch mode must see it. Consumers of the user's own
// may be there too: those that would change what it shows leave the copy first (clashing).

import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { StartedApp, userEnvironment } from '@idempotent-consumers/devkit/internal/testing/npmStart';
import { useProjectCopy } from '@idempotent-consumers/devkit/internal/testing/projectCopy';
import { SAMPLE } from '@idempotent-consumers/devkit/internal/tools/samples';
import type { Topology } from '@idempotent-consumers/inbox/internal';

import { readMarkdown } from '../../test/support/markdown';

const run = promisify(execFile);
const HEADING = '## The walkthrough: `npm start`';
const work = mkdtempSync(join(tmpdir(), 'walkthrough-'));
const runFile = join(work, 'local-run.json');
const copy = useProjectCopy();

const env = userEnvironment(runFile);

/** The walkthrough's two code blocks: the first terminal's command and the second's. */
function walkthrough(): { start: string; commands: string[] } {
  const readme = readMarkdown('sample/README.md');
  const heading = readme.prose.find(({ text }) => text === HEADING);
  if (!heading) throw new Error(`sample/README.md has no heading '${HEADING}'.`);
  const [first, second] = readme.blocks.filter((block) => block.line > heading.line);
  const lines = (text = ''): string[] =>
    text
      .split('\n')
      .map((line) => line.replace(/\s+#.*$/, '').trim())
      .filter(Boolean);
  const [start, ...more] = lines(first?.text);
  if (start === undefined || more.length > 0)
    throw new Error('The first block must be the one npm start line.');
  return { start, commands: lines(second?.text) };
}

/** What the first terminal must show after each command (keyed by the command, as the README has it). */
const SHOWS: Record<string, RegExp[]> = {
  'npm run send -- --file sample/examples/events.jsonl --allow-invalid': [
    /messageId=payment-PAY-1 trace=[0-9a-f]{32}: alternative \(unapplied-payment\) → completed in \d+ ms; wrote invoice:INV-1: create unapplied:PAY-1$/m,
    /duplicate detection dropped messageId=payment-PAY-1 \(the same MessageId was sent within PT20S/,
    /delivery 10 messageId=payment-PAY-2 trace=[0-9a-f]{32}: poison \(PoisonMessageError: .*schema.*\) → abandoned/,
    /dead-lettered #\d+ messageId=payment-PAY-2 \(MaxDeliveryCountExceeded; body \d+ bytes, sha256 [0-9a-f]{12}\)/,
    /delivery 10 messageId=payment-PAY-3 trace=[0-9a-f]{32}: poison \(PoisonMessageError: The body is not JSON/,
    /dead-lettered #\d+ messageId=payment-PAY-3 \(MaxDeliveryCountExceeded/,
    /totals: .*poison 20, .*dead-lettered 2, .*\| inbox markers 1, messages waiting 0, in dead-letter queues 2/,
  ],
  'npm run peek -- billing.payment-applier --dead-letter': [],
  'npm run dead-letters -- list billing.payment-applier': [],
  'sleep 20': [],
  // After the window Service Bus delivers it again; the inbox marker makes it a duplicate.
  'npm run send -- payment --invoice INV-1 --payment PAY-1 --amount 12.50 --currency EUR': [
    /billing-payment-applier #\d+ delivery 1 messageId=payment-PAY-1 trace=[0-9a-f]{32}: duplicate \(resend_after_window\) → completed/,
  ],
  'npm run dead-letters -- resubmit billing.payment-applier --all --include-poison': [
    // The copies go through the consumer again and, still broken, come back.
    /totals: .*duplicate 1, poison 40, .*dead-lettered 4, .*inbox markers 1, .*in dead-letter queues 2/,
  ],
  // The backorder and its event commit together; the relay sends the event, the planner applies it.
  'npm run send -- order --order ORD-1 --product SKU-1 --quantity 2': [
    /inventory-stock-reserver #\d+ delivery 1 messageId=order-ORD-1 trace=[0-9a-f]{32}: alternative \(backorder\) → completed/,
    /outbox-relay \(change feed, \d+ changes, 1 attempt\) succeeded: Relayed 1 outbox messages/,
    /shipping-shipment-planner #\d+ delivery 1 messageId=[0-9a-f]{32} trace=[0-9a-f]{32}: processed → completed/,
    /totals: .*inbox markers 3, messages waiting 0, in dead-letter queues 2/,
    // The planner's ShipmentPlanned: no subscription here takes it, as src/topology.json declares.
    /shipping-events: no subscription takes messageId=[0-9a-f]{32} \(subject ShipmentPlanned\); .*dropped it, on purpose/,
  ],
  // Sent where no subscription takes it: accepted, dropped, and said so on both sides.
  'npm run send -- order --order ORD-2 --product SKU-1 --quantity 1 --topic shipping-events': [
    /shipping-events: no subscription takes messageId=order-ORD-2 \(subject OrderCreated\); Service Bus accepted it and dropped it/,
    /totals: .*taken by no subscription 2 \|/,
  ],
  // Watch mode: the consumer's files restart the app with it and its subscription...
  'npm run new:consumer -- --name loyalty.points-keeper --topic business-events --subject PointsEarned': [
    /Changed: .*functions\/loyalty-points-keeper\.ts.*\. Rebuilding\.\.\./,
    /Restarted in [\d.]+ s: \d+ functions \(added: loyalty-points-keeper\); topics and subscriptions: added business-events\/Subscriptions\/loyalty\.points-keeper\./,
  ],
  // ... which takes the event and applies it once...
  'npm run send -- --subject PointsEarned --body \'{"id":"A-1","quantity":2}\'': [
    /loyalty-points-keeper #\d+ delivery 1 messageId=PointsEarned-[0-9a-f]{40} trace=[0-9a-f]{32}: processed → completed in \d+ ms; wrote loyalty\.points-keeper:A-1: create A-1$/m,
  ],
  // ... and its removal restarts it without them.
  'npm run new:consumer -- --remove loyalty.points-keeper': [
    /Restarted in [\d.]+ s: \d+ functions \(removed: loyalty-points-keeper\); topics and subscriptions: removed business-events\/Subscriptions\/loyalty\.points-keeper\./,
  ],
};

/**
 * The consumers of the copy, not the sample's, that would change what the walkthrough shows: the one
 * it adds, by name, and any that reads a subject it sends, or the sample's consumers read or
 * publish. A user who followed the README and kept its consumer has the first.
 */
function clashing(command: string): string[] {
  const [, added, subject] = /--name (\S+) --topic \S+ --subject (\S+)/.exec(command) ?? [];
  const declared = JSON.parse(copy().read('src/topology.json')) as Topology;
  const subscriptions = declared.topics.flatMap((t) => t.subscriptions);
  const isSample = (name: string): boolean => SAMPLE.consumers.includes(name);
  const walkthroughSubjects = new Set([
    subject,
    ...subscriptions.filter((s) => isSample(s.name)).flatMap((s) => s.subjects),
    ...declared.topics.flatMap((t) => t.unsubscribedSubjects ?? []),
  ]);
  return subscriptions
    .filter(
      (s) => !isSample(s.name) && (s.name === added || s.subjects.some((x) => walkthroughSubjects.has(x))),
    )
    .map((s) => s.name);
}

let app: StartedApp | undefined;

afterAll(() => app?.kill());

const shown = (pattern: RegExp, from: number): Promise<number> => app!.shown(pattern, from, 60_000);

it('runs the README walkthrough against npm start', async () => {
  const { start, commands } = walkthrough();
  expect(start).toBe('npm start -- --duplicate-window PT20S');
  const adding = commands.find((command) => command.startsWith('npm run new:consumer -- --name'));
  expect(adding).toBeDefined();
  for (const name of clashing(adding!)) {
    const removed = copy().tool('packages/devkit/src/tools/newConsumer.ts', ['--remove', name, '--force']);
    expect([name, removed.status, removed.stderr]).toEqual([name, 0, '']);
  }

  app = new StartedApp(
    'bash',
    [
      '-c',
      `exec ${start} --cosmos-port 0 --servicebus-port 0 --console-port 0 --app '${join(work, 'app')}' --watch`,
    ],
    { cwd: copy().root, env },
  );
  let at = await shown(/^Ready\. Press Ctrl\+C to stop\.$/m, 0);
  expect(app.output).toContain('duplicate detection PT20S');
  expect(app.output).toMatch(
    /outbox sweeper: resends what is pending after PT15S, every PT5S \(fitted to the PT20S window/,
  );
  expect(JSON.parse(readFileSync(runFile, 'utf8'))).toMatchObject({
    environment: { SERVICEBUS_DUPLICATE_WINDOW: 'PT20S' },
  });

  const printed: Record<string, string> = {};
  const warned: Record<string, string> = {};
  for (const command of commands) {
    expect(Object.keys(SHOWS)).toContain(command);
    const { stdout, stderr } = await run('bash', ['-c', command], { cwd: copy().root, env });
    printed[command] = stdout;
    warned[command] = stderr;
    if (command.startsWith('npm run ') && !command.startsWith('npm run new:consumer'))
      expect(stderr).toContain('Using the app npm start runs');
    const expected = SHOWS[command] ?? [];
    // The broker and the triggers run side by side: the lines of one step come in either order.
    const from = at;
    for (const pattern of expected) at = Math.max(at, await shown(pattern, from));
  }

  // The second terminal's own output: the dead letters, seen without being taken, and resubmitted.
  const peek = printed['npm run peek -- billing.payment-applier --dead-letter'] ?? '';
  expect(peek).toMatch(/2 message\(s\), peeked: none locked or settled/);
  expect(peek).toMatch(/payment-PAY-2 .*MaxDeliveryCountExceeded/);
  expect(peek).toMatch(/payment-PAY-3 .*MaxDeliveryCountExceeded/);
  expect(peek).not.toContain('not JSON'); // the body's content, which only its length and hash stand for
  const list = printed['npm run dead-letters -- list billing.payment-applier'] ?? '';
  expect(list).toMatch(/payment-PAY-2 .*poison \(schema-violation\)/);
  expect(list).toMatch(/payment-PAY-3 .*poison \(body-not-json\)/);
  const resubmit =
    printed['npm run dead-letters -- resubmit billing.payment-applier --all --include-poison'] ?? '';
  expect(resubmit).toMatch(/^Resubmitted 2, .* failed 0/m);

  expect(
    warned['npm run send -- order --order ORD-2 --product SKU-1 --quantity 1 --topic shipping-events'],
  ).toContain(
    'Warning: no subscription of shipping-events in the running npm start takes OrderCreated: Service Bus reported success and dropped the message(s)',
  );

  // The planner's delivery of the backorder's event is in the trace of the reserver's delivery that
  // published it: the outbox stored its trace context and the relay sent the event with it.
  const reserver =
    /inventory-stock-reserver #\d+ delivery 1 messageId=order-ORD-1 trace=([0-9a-f]{32}):/.exec(
      app.output,
    )?.[1];
  const planner =
    /shipping-shipment-planner #\d+ delivery 1 messageId=[0-9a-f]{32} trace=([0-9a-f]{32}):/.exec(
      app.output,
    )?.[1];
  expect(reserver).toMatch(/^(?!0+$)[0-9a-f]{32}$/);
  expect(planner).toBe(reserver);
  // npm run send started each event's trace and printed its id; the consumer's delivery is in it.
  const sentTrace = /sent OrderCreated messageId=order-ORD-1 .*\(trace ([0-9a-f]{32})\)/.exec(
    printed['npm run send -- order --order ORD-1 --product SKU-1 --quantity 2'] ?? '',
  )?.[1];
  expect(sentTrace).toBe(reserver);

  // The consumer's removal restarts the app with one function fewer than it added.
  const { output } = app;
  const functions = (change: string): number =>
    Number(new RegExp(`(\\d+) functions \\(${change}: loyalty-points-keeper\\)`).exec(output)?.[1]);
  expect(functions('added')).toBeGreaterThan(1);
  expect(functions('removed')).toBe(functions('added') - 1);

  // Ctrl+C in the first terminal.
  expect(['exit code 0', 'SIGINT']).toContain(await app.interrupt());
  expect(app.output).toMatch(/Stopping: no new deliveries.*\n(.*\n)*Stopped\.\n?$/);
  expect(existsSync(runFile)).toBe(false);
}, 240_000);
