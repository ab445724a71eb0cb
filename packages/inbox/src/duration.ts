import { bounded, SettingsError } from './errors';

/**
 * ISO-8601 durations as Service Bus and Bicep write them (P14D, PT1M, P1DT12H, PT0.5S). Years and
 * months are refused: their length in seconds is not fixed, and a retention bound must be exact.
 */
// Stryker disable next-line Regex: static: a module constant; packages/inbox/test/settings.test.ts pins each field, anchor and digit count
const PATTERN = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

export function parseDurationSeconds(text: string, setting: string): number {
  const match = PATTERN.exec(text.trim());
  if (!match || text.trim() === 'P' || text.trim().endsWith('T')) {
    throw new SettingsError([
      `${setting}='${bounded(text, 40)}' is not an ISO-8601 duration in weeks, days, hours, minutes or seconds (for example P30D or PT5M).`,
    ]);
  }
  const [, weeks, days, hours, minutes, seconds] = match;
  return (
    Number(weeks ?? 0) * 604_800 +
    Number(days ?? 0) * 86_400 +
    Number(hours ?? 0) * 3_600 +
    Number(minutes ?? 0) * 60 +
    Number(seconds ?? 0)
  );
}

export function formatDuration(totalSeconds: number): string {
  const days = Math.floor(totalSeconds / 86_400);
  const hours = Math.floor((totalSeconds % 86_400) / 3_600);
  const minutes = Math.floor((totalSeconds % 3_600) / 60);
  const seconds = totalSeconds % 60;
  const date = days ? `${days}D` : '';
  const time = [hours && `${hours}H`, minutes && `${minutes}M`, seconds && `${seconds}S`]
    .filter(Boolean)
    .join('');
  return date || time ? `P${date}${time ? `T${time}` : ''}` : 'PT0S';
}
