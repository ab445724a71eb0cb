import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { acquire } from '../src/lock';

/** The lock that keeps two jest workers from building one harness at once (its obj/ folder collides). */
let folder: string;
beforeEach(() => {
  folder = mkdtempSync(join(tmpdir(), 'engines-lock-'));
});
afterEach(() => rmSync(folder, { recursive: true, force: true }));

describe('the harness build lock', () => {
  it('is taken with the taker pid in it', async () => {
    const lock = join(folder, 'ServiceBus.lock');

    await acquire(lock);

    expect(readFileSync(lock, 'utf8')).toBe(String(process.pid));
  });

  it('takes over a lock whose holder is gone (a build killed before it let go)', async () => {
    const lock = join(folder, 'ServiceBus.lock');
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
      encoding: 'utf8',
    }).stdout;
    writeFileSync(lock, gone);

    await acquire(lock);

    expect(readFileSync(lock, 'utf8')).toBe(String(process.pid));
  });

  it('waits while a live process holds it, and takes it when that process lets go', async () => {
    const lock = join(folder, 'Cosmos.lock');
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    writeFileSync(lock, String(holder.pid));
    let taken = false;
    const waiting = acquire(lock).then(() => {
      taken = true;
    });

    await new Promise((resolve) => setTimeout(resolve, 600));
    expect([taken, readFileSync(lock, 'utf8')]).toEqual([false, String(holder.pid)]);
    rmSync(lock);
    await waiting;

    expect(readFileSync(lock, 'utf8')).toBe(String(process.pid));
    holder.kill();
    expect(existsSync(lock)).toBe(true);
  });
});
