// The timer triggers npm start runs (packages/local-azure/src/host/timers.ts): NCRONTAB schedules, and runs of a
// fixture app's timer through the worker path.

import { join } from 'node:path';

import { parseSchedule, type TimerRunReport, TimerTriggers } from '../../src/host/timers';
import { loadFunctionApp, type TimerFunction } from '../../src/host/worker';
import { seen } from './fixtureApp';

const at = (iso: string): Date => new Date(iso);
const next = (schedule: string, after: string): string =>
  parseSchedule(schedule).next(at(after)).toISOString();

describe('schedules', () => {
  it("finds the purge timer's next runs: every five minutes on the minute", () => {
    expect(next('0 */5 * * * *', '2026-12-01T10:02:30.500Z')).toBe('2026-12-01T10:05:00.000Z');
    expect(next('0 */5 * * * *', '2026-12-01T10:05:00.000Z')).toBe('2026-12-01T10:10:00.000Z');
    expect(next('0 */5 * * * *', '2026-12-31T23:59:59.000Z')).toBe('2027-01-01T00:00:00.000Z');
  });

  it('takes ranges, lists, steps and names, in UTC', () => {
    // 2026-12-05 is a Saturday: weekdays only means Monday the 7th.
    expect(next('0 30 9 * * 1-5', '2026-12-05T12:00:00Z')).toBe('2026-12-07T09:30:00.000Z');
    expect(next('0 30 9 * * MON-FRI', '2026-12-05T12:00:00Z')).toBe('2026-12-07T09:30:00.000Z');
    expect(next('15,45 * * * * *', '2026-12-01T10:00:20Z')).toBe('2026-12-01T10:00:45.000Z');
    expect(next('0 0 0 1 JAN *', '2026-12-01T00:00:00Z')).toBe('2027-01-01T00:00:00.000Z');
    expect(next('0 0 12 29 2 *', '2026-12-01T00:00:00Z')).toBe('2028-02-29T12:00:00.000Z');
    expect(next('0 0 0 * * 7', '2026-12-01T00:00:00Z')).toBe('2026-12-06T00:00:00.000Z');
  });

  it('takes a time span as an interval', () => {
    expect(next('00:05:00', '2026-12-01T10:02:30Z')).toBe('2026-12-01T10:07:30.000Z');
  });

  it.each([
    ['five fields', '0 */5 * * *'],
    ['a minute out of range', '0 60 * * * *'],
    ['a zero step', '0 */0 * * * *'],
    ['a backwards range', '0 0 5-1 * * *'],
    ['an unknown name', '0 0 0 * * FUNDAY'],
    ['a zero interval', '00:00:00'],
  ])('refuses %s', (_case, expression) => {
    expect(() => parseSchedule(expression)).toThrow(/timer schedule/);
  });

  it('says when a schedule never occurs', () => {
    expect(() => parseSchedule('0 0 0 31 2 *').next(at('2026-01-01T00:00:00Z'))).toThrow(/no occurrence/);
  });
});

describe('runs', () => {
  let timer: TimerFunction;

  beforeAll(async () => {
    const app = await loadFunctionApp([join(__dirname, 'fixtureApp.ts')]);
    const found = app.timers.find((t) => t.name === 'fixture-timer');
    if (!found) throw new Error('The fixture app did not register its timer.');
    timer = found;
  });

  it('runs a timer on its schedule through the worker path, and stops', async () => {
    const runs: TimerRunReport[] = [];
    const timers = new TimerTriggers([timer], (run) => runs.push(run));
    const [armed] = timers.start();
    expect(armed?.function).toBe('fixture-timer');
    while (runs.length < 2) await new Promise((resolve) => setTimeout(resolve, 20));
    await timers.stop();
    const counted = seen.timerRuns;
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(seen.timerRuns).toBe(counted);
    expect(runs[0]?.result.error).toBeUndefined();
    expect(runs[0]?.result.logs.map((log) => log.text)).toContain('timer run 1, past due: false');
  });

  it('runs a runOnStartup timer at once', async () => {
    const runs: TimerRunReport[] = [];
    const timers = new TimerTriggers([{ ...timer, schedule: '0 0 0 1 1 *', runOnStartup: true }], (run) =>
      runs.push(run),
    );
    timers.start();
    while (runs.length < 1) await new Promise((resolve) => setTimeout(resolve, 20));
    await timers.stop();
    expect(runs).toHaveLength(1);
  });
});
