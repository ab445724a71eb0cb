// An ISO-8601 duration parser of its own, so that the tests check the template's arithmetic
// instead of repeating it. Only exact units (weeks, days, hours, minutes, seconds): a month or a
// year has no fixed length, and the retention parameters should not use them.

const pattern = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/;

export function durationSeconds(duration: string): number {
  const match = pattern.exec(duration);
  if (!match || duration === 'P' || duration.endsWith('T')) {
    throw new Error(`not an ISO-8601 duration in weeks, days, hours, minutes and seconds: ${duration}`);
  }
  const [weeks, days, hours, minutes, seconds] = match.slice(1).map((part) => Number(part ?? 0));
  return (
    (weeks ?? 0) * 604_800 +
    (days ?? 0) * 86_400 +
    (hours ?? 0) * 3_600 +
    (minutes ?? 0) * 60 +
    (seconds ?? 0)
  );
}
