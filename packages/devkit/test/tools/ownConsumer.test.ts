import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { ServiceBusClient } from '@azure/service-bus';

import { StartedApp, userEnvironment } from '../../src/testing/npmStart';
import { unusedConsumer, useProjectCopy } from '../../src/testing/projectCopy';
import { findChromium, launchBrowser } from '../../src/tools/console/browser';

/**
 * A consumer of your own, from scratch, in a copy of the project: added with new:consumer while
 * npm start runs in watch mode, then a build that fails, a change that builds the same app, a
 * function that throws when it loads, and a host.json change (the app keeps running through the
 * failed build, documents and messages survive each restart, and every step prints one line); the
 * deployment package npm start builds, loaded through the worker's path, applies what npm run send
 * sends; a poison message is dead-lettered, and npm run dead-letters lists it with the consumer's
 * reason and will not resubmit it. Nothing here is the sample's: it holds after npm run
 * remove:samples, whose test runs it there; and its consumer is named so that it collides with none
 * the project has (unusedConsumer), the user's own included.
 */
const run = promisify(execFile);
const copy = useProjectCopy();
const work = mkdtempSync(join(tmpdir(), 'watch-mode-'));
const env = userEnvironment(join(work, 'local-run.json'));
let app: StartedApp | undefined;

afterAll(() => {
  app?.kill();
  rmSync(work, { recursive: true, force: true });
});

const shown = (pattern: RegExp, from: number): Promise<number> => app!.shown(pattern, from);

/** Runs a tool of the copy as npm run does; its exit code instead of a throw. */
const tool = (script: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  run(process.execPath, [require.resolve('tsx/cli'), script, ...args], { cwd: copy().root, env }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({
      code: error.code ?? 1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? '',
    }),
  );
const write = (file: string, text: string): void => writeFileSync(join(copy().root, file), text);
/** A literal in a pattern. */
const literal = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const remove = (file: string): void => rmSync(join(copy().root, file));

/**
 * After remove:samples (this file runs in its copy too) the console has no pipeline to draw: in a real
 * browser, at the narrowest width, it says what to do next instead of an empty, clipped picture.
 * Only with an empty topology and a Chromium (the console's browser test requires one in CI).
 */
async function emptyConsoleSaysWhatNext(): Promise<void> {
  const topology = JSON.parse(readFileSync(join(copy().root, 'src', 'topology.json'), 'utf8')) as {
    topics: unknown[];
  };
  const chromium = findChromium();
  if (topology.topics.length > 0 || chromium === undefined) return;
  const address = /^Console: (http:\/\/127\.0\.0\.1:\d+\/#token=[\w-]+) /m.exec(app!.output)![1]!;
  const browser = await launchBrowser(chromium);
  try {
    const page = await browser.newPage({ viewport: { width: 1024, height: 800 } });
    await page.goto(address);
    await page.waitForSelector('#no-consumers', { timeout: 20_000 });
    expect(await page.textContent('#no-consumers')).toContain(
      'npm run new:consumer -- --name <area.consumer> --topic <topic> --subject <Subject>',
    );
    expect(await page.locator('#topology svg').count()).toBe(0);
  } finally {
    await browser.close();
  }
}

it('runs, restarts and dead-letters for a consumer added while npm start runs', async () => {
  app = new StartedApp(
    process.execPath,
    [
      require.resolve('tsx/cli'),
      'packages/devkit/src/tools/start/cli.ts',
      ...[
        '--cosmos-port',
        '0',
        '--servicebus-port',
        '0',
        '--console-port',
        '0',
        '--app',
        join(work, 'app'),
        '--watch',
      ],
    ],
    { cwd: copy().root, env },
  );
  let at = await shown(/^Ready\. Press Ctrl\+C to stop\.$/m, 0);
  await shown(
    /^Watching for changes \(--watch\): a saved change to the app's sources rebuilds and restarts it\.$/m,
    0,
  );
  await emptyConsoleSaysWhatNext();
  const own = unusedConsumer(copy(), {
    name: 'probe.widget-counter',
    topic: 'business-events',
    subject: 'WidgetCounted',
  });
  // The same, as they appear in npm start's lines.
  const [fn, name, topic, subject] = [own.function, own.name, own.topic, own.subject].map(literal);

  // Without the sample (remove:samples), the topic is new too.
  const added = await tool('packages/devkit/src/tools/newConsumer.ts', [
    ...['--name', own.name, '--topic', own.topic, '--subject', own.subject],
  ]);
  expect([added.code, added.stderr]).toEqual([0, '']);
  at = await shown(
    new RegExp(
      `Restarted in [\\d.]+ s: \\d+ functions \\(added: ${fn}\\); topics and subscriptions: added (${topic}, )?${topic}/Subscriptions/${name}\\.`,
    ),
    at,
  );

  // A build that fails: the app runs on, and takes the next event (sent with the SDK: npm run send
  // loads the functions to learn their schemas, and the broken one fails it too).
  write('functions/broken.ts', "import './does-not-exist';\n");
  at = await shown(
    /The build failed; the app runs on as it was\. functions\/broken\.ts:1: .*does-not-exist/,
    at,
  );
  const { environment } = JSON.parse(readFileSync(env.LOCAL_RUN_FILE!, 'utf8')) as {
    environment: { SERVICEBUS_CONNECTION_STRING: string };
  };
  const client = new ServiceBusClient(environment.SERVICEBUS_CONNECTION_STRING);
  await client
    .createSender(own.topic)
    .sendMessages({ messageId: 'widget-A-1', subject: own.subject, body: { id: 'A-1', quantity: 2 } });
  await client.close();
  at = await shown(
    new RegExp(`${fn} #\\d+ delivery 1 messageId=widget-A-1 trace=[0-9a-f]{32}: processed`),
    at,
  );

  // Back to the build that runs: nothing to restart.
  remove('functions/broken.ts');
  at = await shown(/The build is the same as the running one: nothing to restart\./, at);

  // A function that throws as it loads: nothing runs until the next change that loads.
  write('functions/throws.ts', "throw new Error('refused at load');\n");
  at = await shown(
    /The new build does not load, so no function runs until a change that does: .*refused at load/,
    at,
  );
  remove('functions/throws.ts');
  at = await shown(
    new RegExp(
      `Restarted in [\\d.]+ s: \\d+ functions \\(added: .*${fn}.*\\); topics and subscriptions unchanged\\.`,
    ),
    at,
  );

  // host.json: the triggers restart with its settings; the inbox marker written before is still there.
  const hostJson = JSON.parse(readFileSync(join(copy().root, 'host.json'), 'utf8')) as {
    extensions: { serviceBus: { maxConcurrentCalls: number } };
  };
  hostJson.extensions.serviceBus.maxConcurrentCalls = 3;
  write('host.json', `${JSON.stringify(hostJson, null, 2)}\n`);
  at = await shown(/Restarted in [\d.]+ s: \d+ functions; topics and subscriptions unchanged\./, at);
  expect(
    (
      await tool('packages/devkit/src/tools/send.ts', [
        '--subject',
        own.subject,
        '--body',
        '{"id":"A-2","quantity":1}',
      ])
    ).code,
  ).toBe(0);
  at = await shown(
    new RegExp(`${fn} #\\d+ delivery 1 messageId=${subject}-[0-9a-f]{40} trace=[0-9a-f]{32}: processed`),
    at,
  );
  at = await shown(/totals: .*\| inbox markers 2, messages waiting 0/, at);

  // Poison: its schema refuses it on each delivery, then Service Bus dead-letters it.
  const poison = await tool('packages/devkit/src/tools/send.ts', [
    ...['--subject', own.subject, '--body', '{"id":"A-3"}', '--allow-invalid'],
  ]);
  expect(poison.code).toBe(0);
  // The broker's line and the trigger's come in either order.
  const poisoned = at;
  for (const line of [
    new RegExp(`${fn} #\\d+ delivery 10 messageId=${subject}-[0-9a-f]{40} trace=[0-9a-f]{32}: poison`),
    new RegExp(`dead-lettered #\\d+ messageId=${subject}-[0-9a-f]{40} \\(MaxDeliveryCountExceeded`),
  ])
    at = Math.max(at, await shown(line, poisoned));
  const listed = await tool('packages/devkit/src/tools/deadLetters.ts', ['list', own.name]);
  expect(listed.stdout).toMatch(new RegExp(`${subject}-[0-9a-f]{12}.* poison \\(schema-violation\\)`));
  const resubmitted = await tool('packages/devkit/src/tools/deadLetters.ts', ['resubmit', own.name, '--all']);
  expect(resubmitted.code).not.toBe(0);
  expect(resubmitted.stdout).toMatch(/^Resubmitted 0, /m);
  expect(resubmitted.stdout).toContain('--include-poison');

  expect(['exit code 0', 'SIGINT']).toContain(await app.interrupt());
  expect(app.output.slice(at)).toMatch(/Stopped\.\n?$/);
}, 300_000);
