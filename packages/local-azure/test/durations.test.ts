import { formatIsoDuration, isoDurationSeconds, timeSpanSeconds } from '../src/durations';

describe('ISO 8601 durations, as the administration endpoint writes them', () => {
  it('reads weeks, days, hours, minutes and fractional seconds', () => {
    expect(isoDurationSeconds('PT1M')).toBe(60);
    expect(isoDurationSeconds('P14D')).toBe(14 * 86_400);
    expect(isoDurationSeconds(' P1DT12H ')).toBe(86_400 + 12 * 3_600);
    expect(isoDurationSeconds('P2W')).toBe(2 * 604_800);
    expect(isoDurationSeconds('PT0.5S')).toBe(0.5);
    expect(isoDurationSeconds('P10675199DT2H48M5.4775807S')).toBeCloseTo(
      10_675_199 * 86_400 + 10_085.4775807,
      3,
    );
  });

  it('refuses what is not one: years and months, an empty P or T, a stray character', () => {
    for (const text of ['P1Y', 'P1M', 'P', 'PT', 'P1DT', '1M', 'PT1X', 'PT-1S', '']) {
      expect(isoDurationSeconds(text)).toBeUndefined();
    }
  });

  it('writes days and the time part, and PT0S for nothing; a written duration reads back the same', () => {
    expect(formatIsoDuration(60)).toBe('PT1M');
    expect(formatIsoDuration(14 * 86_400)).toBe('P14D');
    expect(formatIsoDuration(86_400 + 3_600 + 61)).toBe('P1DT1H1M1S');
    expect(formatIsoDuration(0.5)).toBe('PT0.5S');
    expect(formatIsoDuration(0)).toBe('PT0S');
    for (const seconds of [1, 59, 3_600, 90_061, 604_800, 1_209_600.25]) {
      expect(isoDurationSeconds(formatIsoDuration(seconds))).toBe(seconds);
    }
  });
});

describe('.NET time spans, as host.json writes them', () => {
  it('reads [d.]hh:mm:ss[.fff]', () => {
    expect(timeSpanSeconds('00:05:00')).toBe(300);
    expect(timeSpanSeconds('1.02:03:04')).toBe(86_400 + 2 * 3_600 + 3 * 60 + 4);
    expect(timeSpanSeconds(' 00:00:01.5 ')).toBe(1.5);
    expect(timeSpanSeconds('5:00:00')).toBe(5 * 3_600);
  });

  it('refuses what is not one', () => {
    for (const text of ['PT5M', '5:00', '00:5:00', '00:05:0', '123:00:00', 'a.00:00:00', '']) {
      expect(timeSpanSeconds(text)).toBeUndefined();
    }
  });
});
