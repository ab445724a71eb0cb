import { type Progress, type ProgressOptions, startProgress } from '../../src/cli/progress';

/** A reporter on a clock the test moves, and the lines it wrote. */
function reporter(options: Partial<ProgressOptions> & Pick<ProgressOptions, 'total' | 'interactive'>): {
  progress: Progress;
  lines: string[];
  at: (ms: number) => void;
} {
  const lines: string[] = [];
  let nowMs = 1_000;
  const progress = startProgress({
    label: 'bench',
    write: (line) => lines.push(line),
    nowMs: () => nowMs,
    ...options,
  });
  return { progress, lines, at: (ms) => (nowMs = 1_000 + ms) };
}

describe('progress on a terminal', () => {
  it('writes the counts, the time elapsed and the time left at the rate so far, at most once per interval', () => {
    const { progress, lines, at } = reporter({ total: 100, unit: 'messages', interactive: true });

    at(1_000);
    progress.advance(10);
    at(12_000);
    progress.advance(30);
    at(13_000);
    progress.advance(5);
    at(14_100);
    progress.advance(5);

    expect(lines).toEqual([
      'bench: 40/100 messages (40%), 12 s elapsed, about 18 s left',
      'bench: 50/100 messages (50%), 14 s elapsed, about 14 s left',
    ]);
  });

  it('ends with the total time, in minutes past a minute, and writes no progress line for the last unit', () => {
    const { progress, lines, at } = reporter({ total: 3, interactive: true });

    at(60_000);
    progress.advance();
    at(150_000);
    progress.advance(2);
    progress.finish();

    expect(lines).toEqual([
      'bench: 1/3 (33%), 1 min 0 s elapsed, about 2 min 0 s left',
      'bench: 3/3 (100%), done in 2 min 30 s',
    ]);
  });

  it('says how far the work got when it finishes short', () => {
    const { progress, lines, at } = reporter({ total: 500, unit: 'scenarios', interactive: true });

    progress.advance(20);
    at(4_400);
    progress.finish();

    expect(lines).toEqual(['bench: 20/500 scenarios (4%), stopped after 4 s']);
  });
});

describe('progress in a log (not a terminal)', () => {
  it('writes a line only once another step of the work is done, however much time passes', () => {
    const { progress, lines, at } = reporter({ total: 100, interactive: false, stepPercent: 25 });

    for (let unit = 1; unit <= 100; unit++) {
      at(unit * 3_000);
      progress.advance();
    }
    progress.finish();

    expect(lines).toEqual([
      'bench: 25/100 (25%), 1 min 15 s elapsed, about 3 min 45 s left',
      'bench: 50/100 (50%), 2 min 30 s elapsed, about 2 min 30 s left',
      'bench: 75/100 (75%), 3 min 45 s elapsed, about 1 min 15 s left',
      'bench: 100/100 (100%), done in 5 min 0 s',
    ]);
  });

  it('writes nothing but the last line when the whole run is shorter than the interval', () => {
    const { progress, lines, at } = reporter({ total: 10, interactive: false });

    for (let unit = 1; unit <= 10; unit++) {
      at(unit * 100);
      progress.advance();
    }
    progress.finish();

    expect(lines).toEqual(['bench: 10/10 (100%), done in 1 s']);
  });
});
