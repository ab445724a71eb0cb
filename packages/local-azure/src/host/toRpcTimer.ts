import type { RegisteredFunction, RpcInvocationRequest } from './core';
import { BindingData, dotnetDate, invocationRequest, triggerBinding } from './invocationRequest';

/**
 * The RPC `InvocationRequest` the Functions host sends the Node.js worker for a timer trigger: the
 * extension's `TimerInfo` serialized by Json.NET, sent as `json`, and its one binding data.
 */
/** What the timer extension knows about one run. */
export interface TimerRun {
  /** Default false. */
  isPastDue?: boolean;
  /** The schedule monitor's record; default none (serialized as null). */
  scheduleStatus?: { last: Date; next: Date; lastUpdated: Date };
  /** When the run fires; default now. */
  firedAt?: Date;
}

export function timerInvocationRequest(
  registered: RegisteredFunction,
  run: TimerRun = {},
): RpcInvocationRequest {
  const [triggerName, trigger] = triggerBinding(registered, 'timertrigger');
  const status = run.scheduleStatus;
  const timerInfo = {
    // A cron schedule adjusts for daylight saving time; a TimeSpan one ("00:05:00") does not.
    Schedule: { AdjustForDST: String(trigger.schedule).includes(' ') },
    ScheduleStatus: status
      ? {
          Last: `${dotnetDate(status.last)}+00:00`,
          Next: `${dotnetDate(status.next)}+00:00`,
          LastUpdated: `${dotnetDate(status.lastUpdated)}+00:00`,
        }
      : null,
    IsPastDue: run.isPastDue ?? false,
  };
  const metadata = new BindingData();
  // The extension's only binding data: DateTime.Now.ToString() (the library ignores timer metadata).
  metadata.set('TimerTrigger', { string: usDateTime(run.firedAt ?? new Date()) });
  return invocationRequest(registered, triggerName, { json: JSON.stringify(timerInfo) }, metadata);
}

/** DateTime.ToString() in en-US, as in the library's own test data ("8/24/2022 10:05:00 PM"). */
function usDateTime(date: Date): string {
  const hours = date.getUTCHours() % 12 || 12;
  const pad = (n: number): string => String(n).padStart(2, '0');
  return (
    `${date.getUTCMonth() + 1}/${date.getUTCDate()}/${date.getUTCFullYear()} ` +
    `${hours}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} ${date.getUTCHours() < 12 ? 'AM' : 'PM'}`
  );
}
