import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { PAYMENTS, TOPIC, usePeer } from '@idempotent-consumers/local-azure';

import {
  DEFAULT_LOCAL_RUN_FILE,
  type LocalRun,
  localRunContext,
  localRunPath,
  readLocalRun,
  removeLocalRun,
  writeLocalRun,
} from '../../src/build/localRun';
import { captured, peek } from '../../src/testing/tools';

/**
 * The settings file npm start writes, as the tools read it. Every test writes its own file in a
 * temporary folder and points LOCAL_RUN_FILE at it: the default path belongs to a real npm start.
 */
const LOCAL_ENVIRONMENT = {
  SERVICEBUS_CONNECTION_STRING:
    'Endpoint=sb://127.0.0.1:5999;SharedAccessKeyName=k;SharedAccessKey=k;UseDevelopmentEmulator=true;',
  COSMOS_ENDPOINT: 'http://127.0.0.1:8999/',
  COSMOS_KEY: 'a2V5',
  SERVICEBUS_DUPLICATE_WINDOW: 'PT10M',
};

let file: string;
beforeEach(() => {
  file = join(mkdtempSync(join(tmpdir(), 'local-run-')), 'local-run.json');
});

const run = (pid: number, environment: Record<string, string> = LOCAL_ENVIRONMENT): LocalRun => ({
  pid,
  startedAt: new Date().toISOString(),
  environment,
});

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  return child.pid;
}

describe('localRunContext', () => {
  it("takes the running npm start's environment, and says so", () => {
    writeLocalRun(file, run(process.pid));
    const tool = captured({ LOCAL_RUN_FILE: file, INBOX_RETENTION: 'P30D' });

    const { env } = localRunContext(tool.context);

    expect(env).toEqual({ ...LOCAL_ENVIRONMENT, LOCAL_RUN_FILE: file, INBOX_RETENTION: 'P30D' });
    expect(tool.err).toEqual([expect.stringContaining(`Using the app npm start runs (pid ${process.pid}`)]);
  });

  it("lets the file's values win over stray ones of the shell (a COSMOS_KEY left from another account)", () => {
    writeLocalRun(file, run(process.pid));

    const { env } = localRunContext(
      captured({ LOCAL_RUN_FILE: file, COSMOS_KEY: 'c3RyYXk=', SERVICEBUS_DUPLICATE_WINDOW: 'PT2H' }).context,
    );

    expect(env.COSMOS_KEY).toBe(LOCAL_ENVIRONMENT.COSMOS_KEY);
    expect(env.SERVICEBUS_DUPLICATE_WINDOW).toBe(LOCAL_ENVIRONMENT.SERVICEBUS_DUPLICATE_WINDOW);
    expect(env.SERVICEBUS_CONNECTION_STRING).toBe(LOCAL_ENVIRONMENT.SERVICEBUS_CONNECTION_STRING);
  });

  it('is deleted only by the npm start that wrote it', () => {
    writeLocalRun(file, run(process.pid));

    removeLocalRun(file, deadPid());
    expect(readLocalRun(file)?.pid).toBe(process.pid);
    removeLocalRun(file, process.pid);
    expect(readLocalRun(file)).toBeUndefined();
  });

  it('ignores a file whose npm start is gone', () => {
    writeLocalRun(file, run(deadPid()));
    const tool = captured({ LOCAL_RUN_FILE: file });

    expect(localRunContext(tool.context)).toBe(tool.context);
    expect(tool.err).toEqual([]);
  });

  it.each([
    ['not JSON', '{"pid": '],
    ['without a pid', JSON.stringify({ environment: LOCAL_ENVIRONMENT })],
    ['with a value that is not text', JSON.stringify({ pid: process.pid, environment: { A: 1 } })],
  ])('ignores a file %s', (_, text) => {
    writeFileSync(file, text);
    const tool = captured({ LOCAL_RUN_FILE: file });

    expect(localRunContext(tool.context)).toBe(tool.context);
  });

  it.each([
    ['SERVICEBUS_NAMESPACE', 'contoso.servicebus.windows.net'],
    ['SERVICEBUS_CONNECTION_STRING', 'Endpoint=sb://localhost;UseDevelopmentEmulator=true;'],
    ['COSMOS_ENDPOINT', 'https://contoso.documents.azure.com:443/'],
  ])('leaves the file alone when the environment sets %s: the operator chose a target', (name, value) => {
    writeLocalRun(file, run(process.pid));
    const tool = captured({ LOCAL_RUN_FILE: file, [name]: value });

    expect(localRunContext(tool.context)).toBe(tool.context);
    expect(tool.err).toEqual([]);
  });

  it('reads the file LOCAL_RUN_FILE names, and only that one', () => {
    writeLocalRun(file, run(process.pid));
    const elsewhere = join(mkdtempSync(join(tmpdir(), 'local-run-')), 'local-run.json');

    expect(localRunPath({})).toBe(DEFAULT_LOCAL_RUN_FILE);
    expect(localRunPath({ LOCAL_RUN_FILE: file })).toBe(file);
    expect(localRunContext(captured({ LOCAL_RUN_FILE: elsewhere }).context).env).toEqual({
      LOCAL_RUN_FILE: elsewhere,
    });
  });
});

describe('a tool run with no target of its own', () => {
  const fixture = usePeer();

  it('reaches the Service Bus of the running npm start', async () => {
    const sender = fixture.client.createSender(TOPIC);
    await sender.sendMessages({ body: {}, messageId: 'm-1', subject: 'PaymentReceived' });
    await sender.close();
    writeLocalRun(file, run(process.pid, { SERVICEBUS_CONNECTION_STRING: fixture.peer.connectionString }));
    const tool = captured({ LOCAL_RUN_FILE: file });

    const code = await peek([PAYMENTS, '--topic', TOPIC], tool.context);

    expect(code).toBe(0);
    expect(tool.err).toEqual([expect.stringContaining('Using the app npm start runs')]);
    expect(tool.out[0]).toContain(
      `on ${fixture.peer.connectionString.split(';')[0]!.slice('Endpoint='.length)}`,
    );
    expect(tool.out.find((line) => line.includes(' m-1 '))).toBeDefined();
  });

  it('without a running npm start, says how to connect', async () => {
    writeLocalRun(file, run(deadPid(), { SERVICEBUS_CONNECTION_STRING: fixture.peer.connectionString }));
    const tool = captured({ LOCAL_RUN_FILE: file });

    const code = await peek([PAYMENTS, '--topic', TOPIC], tool.context);

    expect(code).toBe(2);
    expect(tool.err.join('\n')).toMatch(/Set SERVICEBUS_NAMESPACE=.*; or run npm start in another terminal/);
  });
});
