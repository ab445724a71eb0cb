import type { FeedEvent } from '../types';

/**
 * The live feed's rows: one per copy of a message, not one per delivery. The deliveries of one copy
 * (the same subscription and MessageId, each delivery count above the last) and the dead-lettering
 * that ends them make one row, which shows how it ended and opens to all (the host may report the
 * last delivery after the broker reported the dead-lettering it led to); a copy sent again
 * (its delivery count starts over), a drop by duplicate detection and a message no subscription
 * takes are rows of their own.
 */
export interface FeedGroup {
  /** The first event's seq: the row's identity while it grows. */
  key: number;
  /** Oldest first. */
  events: FeedEvent[];
  /** What the row shows: the dead-lettering that ended the copy, or its latest event. */
  shown: FeedEvent;
}

export function feedGroups(events: readonly FeedEvent[]): FeedGroup[] {
  const groups: FeedGroup[] = [];
  const open = new Map<string, FeedGroup>();
  for (const event of events) {
    const copy = `${event.subscription ?? event.topic ?? ''}\u0000${event.messageId ?? ''}`;
    const group = open.get(copy);
    if (group !== undefined && continues(group, event)) {
      group.events.push(event);
      if (group.shown.kind !== 'dead-lettered') group.shown = event;
      continue;
    }
    const started = { key: event.seq, events: [event], shown: event };
    groups.push(started);
    open.set(copy, started);
  }
  return groups;
}

/** Whether `next` is one more delivery of the group's copy (a higher delivery count), or its dead-lettering. */
function continues(group: FeedGroup, next: FeedEvent): boolean {
  const deliveries = group.events.filter((event) => event.kind === 'delivery');
  if (deliveries.length === 0) return false;
  if (next.kind === 'dead-lettered') return group.events.every((event) => event.kind !== 'dead-lettered');
  const highest = Math.max(...deliveries.map((event) => event.deliveryCount ?? 0));
  return next.kind === 'delivery' && (next.deliveryCount ?? 0) > highest;
}

/**
 * A MessageId as a row shows it: whole up to 16 characters, else its start and its end around an
 * ellipsis (a derived id's subject and the end of its hash tell ids apart); the whole id is the
 * row's title, and the message's details show it.
 */
export function shortId(messageId: string | undefined): string {
  if (messageId === undefined) return '(none)';
  return messageId.length <= 16 ? messageId : `${messageId.slice(0, 9)}…${messageId.slice(-6)}`;
}
