import {
  DUPLICATE_CAUSES,
  duplicateCause,
  type DuplicateFacts,
  OUTBOX_SENT_BY_PROPERTY,
  RESUBMITTED_AT_PROPERTY,
} from '../src/duplicateCause';

const started = new Date('2026-12-01T10:00:00.000Z');
const WINDOW = 3600;

/** A first delivery, unmarked, that began at `started` and met a marker written a minute before it. */
function facts(overrides: Partial<DuplicateFacts> = {}): DuplicateFacts {
  return {
    deliveryCount: 1,
    applicationProperties: {},
    delayedRetryCopy: false,
    markerWrittenAt: new Date(started.getTime() - 60_000),
    markerAppearedDuringDelivery: false,
    deliveryStartedAt: started,
    now: new Date(started.getTime() + 50),
    duplicateWindowSeconds: WINDOW,
    ...overrides,
  };
}

const at = (msFromStart: number): Date => new Date(started.getTime() + msFromStart);

describe('duplicateCause: one cause per absorbed duplicate, the first rule that holds', () => {
  it('reads the marks by the names the resubmit tool and the relay write (packages/devkit/src/tools/deadLetterQueue.ts, relay.ts)', () => {
    expect(
      duplicateCause(facts({ applicationProperties: { inboxResubmittedAt: '2026-12-01T09:00:00Z' } })),
    ).toBe('dead_letter_resubmit');
    expect(duplicateCause(facts({ applicationProperties: { outboxSentBy: 'sweeper' } }))).toBe(
      'relay_resend',
    );
    expect(duplicateCause(facts({ applicationProperties: { '': 'x' } }))).toBe('unknown');
  });

  it('lock_overlap: the marker was written after this delivery began (at the same millisecond too)', () => {
    expect(duplicateCause(facts({ deliveryCount: 2, markerWrittenAt: at(0) }))).toBe('lock_overlap');
    expect(duplicateCause(facts({ deliveryCount: 2, markerWrittenAt: at(30_000) }))).toBe('lock_overlap');
    // One millisecond earlier: the first delivery had committed before this one began.
    expect(duplicateCause(facts({ deliveryCount: 2, markerWrittenAt: at(-1) }))).toBe('redelivery');
  });

  it('lock_overlap when the marker was seen appearing, whatever its processedAt says (taken before a slow batch)', () => {
    expect(
      duplicateCause(
        facts({ deliveryCount: 2, markerAppearedDuringDelivery: true, markerWrittenAt: at(-30_000) }),
      ),
    ).toBe('lock_overlap');
    expect(
      duplicateCause(
        facts({ deliveryCount: 2, markerAppearedDuringDelivery: false, markerWrittenAt: at(-30_000) }),
      ),
    ).toBe('redelivery');
  });

  it('lock_overlap also for the first delivery that lost the race to its own redelivery', () => {
    expect(duplicateCause(facts({ deliveryCount: 1, markerWrittenAt: at(61_000) }))).toBe('lock_overlap');
  });

  it('lock_overlap before any mark: two deliveries at once means the lock is too short, whatever sent it', () => {
    const marked = {
      [RESUBMITTED_AT_PROPERTY]: '2026-12-01T09:00:00Z',
      [OUTBOX_SENT_BY_PROPERTY]: 'relay',
    };
    expect(duplicateCause(facts({ applicationProperties: marked, markerWrittenAt: at(5) }))).toBe(
      'lock_overlap',
    );
  });

  it('redelivery: a delivery after the first whose marker predates it, even one younger than a lock duration', () => {
    // A lost completion: the redelivery comes within one lock duration (PT1M) of the commit.
    expect(duplicateCause(facts({ deliveryCount: 2, markerWrittenAt: at(-5_000) }))).toBe('redelivery');
    expect(duplicateCause(facts({ deliveryCount: 10, markerWrittenAt: at(-86_400_000) }))).toBe('redelivery');
    // The immediate cause wins over how the message was sent: a resubmitted copy delivered again.
    expect(
      duplicateCause(facts({ deliveryCount: 2, applicationProperties: { [RESUBMITTED_AT_PROPERTY]: 'x' } })),
    ).toBe('redelivery');
    // No marker to date (a versioned consumer): a delivery after the first is still a redelivery.
    expect(duplicateCause(facts({ deliveryCount: 2, markerWrittenAt: undefined }))).toBe('redelivery');
  });

  it('dead_letter_resubmit: a first delivery the resubmit tool marked, the relay mark it kept or not', () => {
    expect(
      duplicateCause(facts({ applicationProperties: { [RESUBMITTED_AT_PROPERTY]: '2026-12-01T09:59:00Z' } })),
    ).toBe('dead_letter_resubmit');
    expect(
      duplicateCause(
        facts({
          applicationProperties: { [RESUBMITTED_AT_PROPERTY]: 'x', [OUTBOX_SENT_BY_PROPERTY]: 'relay' },
          markerWrittenAt: at(-2 * WINDOW * 1000),
        }),
      ),
    ).toBe('dead_letter_resubmit');
  });

  it("delayed_retry: a first delivery of a delayed-retry copy, the relay's mark it carries or not", () => {
    expect(duplicateCause(facts({ delayedRetryCopy: true }))).toBe('delayed_retry');
    // A copy keeps its original's properties: the relay's mark, after the window too.
    expect(
      duplicateCause(
        facts({
          delayedRetryCopy: true,
          applicationProperties: { [OUTBOX_SENT_BY_PROPERTY]: 'relay' },
          markerWrittenAt: at(-2 * WINDOW * 1000),
        }),
      ),
    ).toBe('delayed_retry');
    // Its immediate causes first: a copy delivered again, a copy resubmitted from the dead-letter queue.
    expect(duplicateCause(facts({ delayedRetryCopy: true, deliveryCount: 2 }))).toBe('redelivery');
    expect(
      duplicateCause(
        facts({ delayedRetryCopy: true, applicationProperties: { [RESUBMITTED_AT_PROPERTY]: 'x' } }),
      ),
    ).toBe('dead_letter_resubmit');
  });

  it('relay_resend: a first delivery the outbox sent, inside the window or after it', () => {
    for (const sentBy of ['relay', 'sweeper']) {
      expect(duplicateCause(facts({ applicationProperties: { [OUTBOX_SENT_BY_PROPERTY]: sentBy } }))).toBe(
        'relay_resend',
      );
    }
    expect(
      duplicateCause(
        facts({
          applicationProperties: { [OUTBOX_SENT_BY_PROPERTY]: 'relay' },
          markerWrittenAt: at(-2 * WINDOW * 1000),
        }),
      ),
    ).toBe('relay_resend');
  });

  it('resend_after_window: an unmarked first delivery whose marker is at least one window old', () => {
    const now = at(100);
    expect(duplicateCause(facts({ now, markerWrittenAt: new Date(now.getTime() - WINDOW * 1000) }))).toBe(
      'resend_after_window',
    );
    // One millisecond younger: the broker should have dropped it.
    expect(duplicateCause(facts({ now, markerWrittenAt: new Date(now.getTime() - WINDOW * 1000 + 1) }))).toBe(
      'unknown',
    );
    // The window is the one configured.
    expect(duplicateCause(facts({ now, markerWrittenAt: at(-120_000), duplicateWindowSeconds: 120 }))).toBe(
      'resend_after_window',
    );
  });

  it('unknown: an unmarked first delivery inside the window, or one with no marker to date', () => {
    expect(duplicateCause(facts())).toBe('unknown');
    expect(duplicateCause(facts({ markerWrittenAt: undefined }))).toBe('unknown');
    // No window configured: nothing is dated past it.
    expect(
      duplicateCause(facts({ markerWrittenAt: at(-1e10), duplicateWindowSeconds: Number.POSITIVE_INFINITY })),
    ).toBe('unknown');
  });

  it('names seven causes, each the answer to some facts above', () => {
    expect([...DUPLICATE_CAUSES].sort()).toEqual(
      [
        'dead_letter_resubmit',
        'delayed_retry',
        'lock_overlap',
        'redelivery',
        'relay_resend',
        'resend_after_window',
        'unknown',
      ].sort(),
    );
  });
});
