/**
 * Progress of a long command, as lines for stderr: `bench: 37/100 messages (37%), 12 s elapsed,
 * about 20 s left`, the time left estimated from the rate so far. Throttled so that a log file (a
 * stream that is not a terminal) gets a handful of lines, not one per unit of work.
 */
export interface ProgressOptions {
  /** What runs, first on every line: `bench`, `property test`. */
  label: string;
  /** Units of work in the whole command. */
  total: number;
  /** What a unit is, after the counts: `messages`. @default none */
  unit?: string;
  /** Receives each line, without a newline. */
  write: (line: string) => void;
  /**
   * Whether a person watches the stream (a TTY): then a line every `intervalMs`; otherwise only
   * once another `stepPercent` of the work is also done.
   */
  interactive: boolean;
  /** Monotonic clock in milliseconds. @default performance.now */
  nowMs?: () => number;
  /** Least time between two lines. @default 2000 */
  intervalMs?: number;
  /** Least share of the work between two lines when not interactive. @default 10 */
  stepPercent?: number;
}

export interface Progress {
  /** Counts `units` more done (default 1) and writes a line if one is due. */
  advance(units?: number): void;
  /** Writes the last line: the total time, or how far it got if the work stopped short. */
  finish(): void;
}

export function startProgress(options: ProgressOptions): Progress {
  const { label, total, write, interactive } = options;
  const nowMs = options.nowMs ?? (() => performance.now());
  const intervalMs = options.intervalMs ?? 2000;
  const stepPercent = options.stepPercent ?? 10;
  const unit = options.unit === undefined ? '' : ` ${options.unit}`;
  const startedMs = nowMs();
  let done = 0;
  let lastLineMs = startedMs;
  let lastLineStep = 0;

  // Nothing to do counts as all of it done, not NaN%.
  const percent = (): number => (total > 0 ? Math.floor((done / total) * 100) : 100);
  const counts = (): string => `${label}: ${done}/${total}${unit} (${percent()}%)`;

  return {
    advance(units = 1) {
      done += units;
      const now = nowMs();
      const step = Math.floor(percent() / stepPercent);
      if (done >= total || now - lastLineMs < intervalMs || (!interactive && step <= lastLineStep)) return;
      lastLineMs = now;
      lastLineStep = step;
      const elapsedMs = now - startedMs;
      const leftMs = done > 0 ? (elapsedMs * (total - done)) / done : undefined;
      write(
        `${counts()}, ${duration(elapsedMs)} elapsed` +
          (leftMs === undefined ? '' : `, about ${duration(leftMs)} left`),
      );
    },
    finish() {
      const elapsed = duration(nowMs() - startedMs);
      write(done >= total ? `${counts()}, done in ${elapsed}` : `${counts()}, stopped after ${elapsed}`);
    },
  };
}

/** `7 s`, `2 min 5 s`: whole seconds, which is all an estimate is good for. */
function duration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}
