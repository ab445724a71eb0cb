/**
 * The two duration formats the platforms local Azure models write, read here and not borrowed from
 * the app's library (local Azure depends on no workspace package):
 * - ISO 8601, as Service Bus's administration endpoint sends and returns an entity's durations
 *   (PT1M, P14D, P1DT12H, PT0.5S; weeks too). Years and months are refused: their length is not fixed.
 * - .NET TimeSpan, as host.json writes `functionTimeout` and the Service Bus extension's spans
 *   ([d.]hh:mm:ss[.fff]).
 */
const ISO = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;
const TIME_SPAN = /^(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2}(?:\.\d+)?)$/;

/** Seconds, or undefined when the text is not an ISO 8601 duration in weeks, days, hours, minutes, seconds. */
export function isoDurationSeconds(text: string): number | undefined {
  const trimmed = text.trim();
  const match = ISO.exec(trimmed);
  if (!match || trimmed === 'P' || trimmed.endsWith('T')) return undefined;
  const [, weeks, days, hours, minutes, seconds] = match;
  return (
    Number(weeks ?? 0) * 604_800 +
    Number(days ?? 0) * 86_400 +
    Number(hours ?? 0) * 3_600 +
    Number(minutes ?? 0) * 60 +
    Number(seconds ?? 0)
  );
}

/** Seconds as Service Bus writes them: P1DT2H, PT1M, PT0.5S, PT0S. */
export function formatIsoDuration(totalSeconds: number): string {
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

/** Seconds, or undefined when the text is not a time span as host.json writes it. */
export function timeSpanSeconds(text: string): number | undefined {
  const match = TIME_SPAN.exec(text.trim());
  if (!match) return undefined;
  const [, days, hours, minutes, seconds] = match;
  return Number(days ?? 0) * 86_400 + Number(hours) * 3_600 + Number(minutes) * 60 + Number(seconds);
}
