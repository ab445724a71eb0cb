import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';

/**
 * packages/devkit/src/tools/localServiceBus.ts run as a process: it writes the administration endpoint's certificate
 * (never its key) to the file it prints for NODE_EXTRA_CA_CERTS, and removes it when it stops.
 */
it('writes the certificate it prints for NODE_EXTRA_CA_CERTS, without the key, and removes it on SIGTERM', async () => {
  const child = spawn(
    process.execPath,
    [require.resolve('tsx/cli'), 'packages/devkit/src/tools/localServiceBus.ts', '--port', '0'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const file = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const printed = /NODE_EXTRA_CA_CERTS="([^"]+)"/.exec(output);
      if (printed) resolve(printed[1]!);
    });
    child.once('exit', (code) =>
      reject(new Error(`exited ${code} before printing the certificate:\n${output}`)),
    );
  });

  const written = readFileSync(file, 'utf8');
  expect(written).toContain('-----BEGIN CERTIFICATE-----');
  expect(written).not.toContain('PRIVATE KEY');

  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  expect(code).toBe(0);
  expect(existsSync(file)).toBe(false);
});
