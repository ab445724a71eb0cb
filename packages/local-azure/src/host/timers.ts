import { type InvocationResult, invokeTimer, type TimerFunction } from './worker';

/**
 * The timer triggers, on their schedules in real time, as `npm start` runs them: an NCRONTAB
 * expression with seconds (`{second} {minute} {hour} {day} {month} {day-of-week}`, in UTC, Azure's
 * default time zone) or a time span (`hh:mm:ss`, an interval). Each run goes through the worker path
 * with the TimerInfo the host sends (packages/local-azure/src/host/toRpcTimer.ts). A run that is still going
 * when the next one is due is not overlapped: the host runs one instance of a timer at a time.
 */
export interface Schedule {
  /** The first occurrence strictly after `after`. */
  next(after: Date): Date;
}

const FIELDS = [
  { name: 'second', min: 0, max: 59 },
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day', min: 1, max: 31 },
  {
    name: 'month',
    min: 1,
    max: 12,
    names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'],
  },
  { name: 'day-of-week', min: 0, max: 6, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] },
] as const;

export function parseSchedule(expression: string): Schedule {
  const text = expression.trim();
  const span = /^(\d{1,2}):(\d{2}):(\d{2})$/.exec(text);
  if (span) {
    const ms = (Number(span[1]) * 3600 + Number(span[2]) * 60 + Number(span[3])) * 1000;
    if (ms === 0) throw new Error(`The timer schedule '${text}' is a zero interval.`);
    return { next: (after) => new Date(after.getTime() + ms) };
  }
  const parts = text.split(/\s+/);
  if (parts.length !== FIELDS.length) {
    throw new Error(
      `The timer schedule '${text.slice(0, 60)}' is not an NCRONTAB expression with six fields ` +
        '({second} {minute} {hour} {day} {month} {day-of-week}) or a time span (hh:mm:ss).',
    );
  }
  const [second, minute, hour, day, month, weekday] = FIELDS.map((field, i) =>
    parseField(parts[i] ?? '', field, text),
  ) as [Set<number>, Set<number>, Set<number>, Set<number>, Set<number>, Set<number>];
  return {
    next(after) {
      // Whole seconds, strictly later; each mismatch skips to the start of the next unit.
      let t = new Date(Math.floor(after.getTime() / 1000) * 1000 + 1000);
      for (let step = 0; step < 100_000; step++) {
        const [y, mo, d, h, mi] = [
          t.getUTCFullYear(),
          t.getUTCMonth(),
          t.getUTCDate(),
          t.getUTCHours(),
          t.getUTCMinutes(),
        ];
        if (!month.has(mo + 1)) t = new Date(Date.UTC(y, mo + 1, 1));
        else if (!day.has(d) || !weekday.has(t.getUTCDay())) t = new Date(Date.UTC(y, mo, d + 1));
        else if (!hour.has(h)) t = new Date(Date.UTC(y, mo, d, h + 1));
        else if (!minute.has(mi)) t = new Date(Date.UTC(y, mo, d, h, mi + 1));
        else if (!second.has(t.getUTCSeconds())) t = new Date(t.getTime() + 1000);
        else return t;
      }
      throw new Error(`The timer schedule '${text.slice(0, 60)}' has no occurrence in the years ahead.`);
    },
  };
}

function parseField(text: string, field: (typeof FIELDS)[number], expression: string): Set<number> {
  const values = new Set<number>();
  const bad = (): Error =>
    new Error(
      `The timer schedule '${expression.slice(0, 60)}' has an invalid ${field.name} field '${text.slice(0, 20)}'.`,
    );
  const value = (token: string): number => {
    const named = 'names' in field ? (field.names as readonly string[]).indexOf(token.toUpperCase()) : -1;
    const number = named >= 0 ? named + field.min : /^\d+$/.test(token) ? Number(token) : NaN;
    // Day-of-week 7 is Sunday too.
    const normalized = field.name === 'day-of-week' && number === 7 ? 0 : number;
    if (!(normalized >= field.min && normalized <= field.max)) throw bad();
    return normalized;
  };
  for (const item of text.split(',')) {
    const [range, stepText] = item.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1 || range === undefined) throw bad();
    let low: number;
    let high: number;
    if (range === '*') [low, high] = [field.min, field.max];
    else if (range.includes('-')) {
      const [from, to] = range.split('-');
      [low, high] = [value(from ?? ''), value(to ?? '')];
      if (low > high) throw bad();
    } else {
      low = value(range);
      high = stepText === undefined ? low : field.max;
    }
    for (let v = low; v <= high; v += step) values.add(v);
  }
  return values;
}

export interface TimerRunReport {
  function: string;
  result: InvocationResult;
  runMs: number;
}

export class TimerTriggers {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly running = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    private readonly functions: readonly TimerFunction[],
    private readonly report: (run: TimerRunReport) => void,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Validates every schedule first, then arms them (and runs those marked runOnStartup). */
  start(): { function: string; next: Date }[] {
    const schedules = this.functions.map((timer) => ({ timer, schedule: parseSchedule(timer.schedule) }));
    return schedules.map(({ timer, schedule }) => {
      let last: Date | undefined;
      // One run at a time: the next is armed when a run ends, from the later of now and the
      // occurrence just run (a timer that fires a moment early must not run that occurrence twice).
      const runThenArm = (firedAt: Date, due: Date): void => {
        const run = this.run(timer.name, firedAt, schedule.next(due), last).finally(() => {
          last = firedAt;
          this.running.delete(run);
          if (!this.stopped) arm(due);
        });
        this.running.add(run);
      };
      const arm = (after: Date): Date => {
        const now = this.now();
        const next = schedule.next(now > after ? now : after);
        this.after(next.getTime() - now.getTime(), () => {
          if (!this.stopped) runThenArm(this.now(), next);
        });
        return next;
      };
      const now = this.now();
      if (!timer.runOnStartup) return { function: timer.name, next: arm(now) };
      runThenArm(now, now);
      return { function: timer.name, next: schedule.next(now) };
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.allSettled([...this.running]);
  }

  private async run(name: string, firedAt: Date, next: Date, last: Date | undefined): Promise<void> {
    const started = performance.now();
    const result = await invokeTimer(name, {
      firedAt,
      ...(last === undefined ? {} : { scheduleStatus: { last, next, lastUpdated: firedAt } }),
    });
    this.report({ function: name, result, runMs: performance.now() - started });
  }

  /** setTimeout, for delays beyond its 24.8-day limit too. */
  private after(ms: number, callback: () => void): void {
    const limit = 2 ** 31 - 1;
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        if (ms > limit) this.after(ms - limit, callback);
        else callback();
      },
      Math.max(0, Math.min(ms, limit)),
    );
    this.timers.add(timer);
  }
}
