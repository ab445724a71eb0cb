import {
  OUTBOX_SENT_BY_PROPERTY,
  processDelivery,
  type ProcessResult,
  RESUBMITTED_AT_PROPERTY,
} from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { delivery, dependencies, testConsumer } from '../src/testing';

/**
 * The causes as processing names them: real deliveries through processDelivery against the local
 * Cosmos DB server, on a virtual clock, each cause made the way it happens (a second delivery after
 * a lost completion, two deliveries running at once, a marked copy, a late resend). The seeded
 * table of every cause, through the host, is test/functions/duplicateCauses.test.ts.
 */
const stack = useLocalStack();

const WINDOW_SECONDS = 3600;
const LOCK_MS = 60_000;

/** A handler that can be held: `hold(account, deliveryCount)` before the delivery, `release` after it entered. */
class Gates {
  private readonly held = new Map<string, { entered: () => void; gate: Promise<void> }>();
  private readonly openers = new Map<string, () => void>();

  hold(account: string, deliveryCount: number): Promise<void> {
    return new Promise((entered) => {
      const key = `${account}/${deliveryCount}`;
      const gate = new Promise<void>((open) => this.openers.set(key, open));
      this.held.set(key, { entered, gate });
    });
  }

  release(account: string, deliveryCount: number): void {
    this.openers.get(`${account}/${deliveryCount}`)?.();
  }

  async pass(account: string, deliveryCount: number): Promise<void> {
    const held = this.held.get(`${account}/${deliveryCount}`);
    if (held === undefined) return;
    held.entered();
    await held.gate;
  }
}

const gates = new Gates();
const consumer = testConsumer(async (message, tx, received) => {
  await gates.pass(message.accountId, received.deliveryCount);
  tx.create({ id: 'balance', amount: message.amount });
});

let runs = 0;

/** One message's story on a virtual clock; returns its deliveries' results, the duplicate's last. */
class Story {
  private ms: number;
  readonly account = `cause-${++runs}`;
  private readonly deps = dependencies(stack.container, {
    now: () => new Date(this.ms),
    settings: {
      inbox: { retentionSeconds: 30 * 86_400, ttlBackstopSeconds: 7 * 86_400, maxAttempts: 5 },
      serviceBus: {
        duplicateWindowSeconds: WINDOW_SECONDS,
        connectionString: undefined,
        fullyQualifiedNamespace: undefined,
        resourceId: undefined,
        resourceManagerEndpoint: 'https://management.azure.com/',
      },
    },
  });

  constructor(
    startMs: number,
    private readonly messageId: string,
  ) {
    this.ms = startMs;
  }

  advance(ms: number): void {
    this.ms += ms;
  }

  deliver(
    deliveryCount: number,
    applicationProperties: Record<string, unknown> = {},
  ): Promise<ProcessResult> {
    return processDelivery(
      consumer,
      delivery(
        { accountId: this.account, amount: 1 },
        { messageId: this.messageId, deliveryCount, applicationProperties },
      ),
      this.deps,
    );
  }
}

/**
 * Two deliveries of one message at once: the first still runs when its lock expires and the
 * redelivery begins. `firstWins`: the first commits first and the redelivery is the duplicate;
 * otherwise the redelivery commits and the first delivery is. Returns [winner, loser].
 */
async function overlapping(story: Story, firstWins: boolean, lateMs: number): Promise<ProcessResult[]> {
  const firstIn = gates.hold(story.account, 1);
  const secondIn = gates.hold(story.account, 2);
  const first = story.deliver(1);
  await firstIn;
  story.advance(LOCK_MS + lateMs);
  const second = story.deliver(2);
  await secondIn;
  story.advance(1_000);
  const [winner, loser] = firstWins ? [1, 2] : [2, 1];
  gates.release(story.account, winner);
  const won = await (winner === 1 ? first : second);
  gates.release(story.account, loser);
  return [won, await (loser === 1 ? first : second)];
}

describe('processDelivery names the cause of each duplicate it absorbs', () => {
  const start = Date.parse('2026-12-01T00:00:00Z');

  it('a redelivery after a lost completion is not an overlap, although it comes within one lock duration of the commit', async () => {
    const story = new Story(start, 'lost-completion');
    const first = await story.deliver(1);
    story.advance(LOCK_MS / 2); // the completion was lost; the lock ran out; delivered again
    const again = await story.deliver(2);

    expect(first).toMatchObject({ outcome: 'processed' });
    expect(first).not.toHaveProperty('duplicateCause');
    expect(again).toMatchObject({ outcome: 'duplicate', duplicateCause: 'redelivery', attempts: 0 });
    // The marker the redelivery met: written by the first delivery, half a lock duration before.
    expect(again.markerWrittenAt).toEqual(new Date(start));
  });

  it("an overlap is seen, not timed: the redelivery met a marker its first read did not find, whatever the first delivery's clock said", async () => {
    const story = new Story(start, 'overlap-skewed');
    const firstIn = gates.hold(story.account, 1);
    const secondIn = gates.hold(story.account, 2);
    const first = story.deliver(1);
    await firstIn;
    story.advance(LOCK_MS + 1_000);
    const second = story.deliver(2);
    await secondIn;
    // The first delivery's processedAt falls before the redelivery began: its instance's clock runs
    // behind, or its batch was slow after processedAt was taken.
    story.advance(-(LOCK_MS / 2));
    gates.release(story.account, 1);
    const won = await first;
    gates.release(story.account, 2);
    const lost = await second;

    expect(won.outcome).toBe('processed');
    expect(lost).toMatchObject({
      outcome: 'duplicate',
      duplicateCause: 'lock_overlap',
      markerAppeared: true,
    });
    expect(lost.markerWrittenAt?.getTime()).toBe(start + LOCK_MS / 2 + 1_000);
  });

  it('two deliveries at once are an overlap, whichever of the two commits first', async () => {
    const redeliveryLoses = await overlapping(new Story(start, 'overlap-1'), true, 0);
    const firstLoses = await overlapping(new Story(start, 'overlap-2'), false, 0);

    expect(redeliveryLoses.map((r) => [r.outcome, r.duplicateCause])).toEqual([
      ['processed', undefined],
      ['duplicate', 'lock_overlap'],
    ]);
    expect(firstLoses.map((r) => [r.outcome, r.duplicateCause])).toEqual([
      ['processed', undefined],
      ['duplicate', 'lock_overlap'],
    ]);
    // The redelivery's batch met the marker (409), after running the handler.
    expect(redeliveryLoses[1]?.attempts).toBe(1);
  });

  it('a first delivery names the mark it carries, or how old the marker is', async () => {
    const marked = async (properties: Record<string, unknown>, laterMs: number): Promise<ProcessResult> => {
      const story = new Story(start, `first-${++runs}`);
      await story.deliver(1);
      story.advance(laterMs);
      return story.deliver(1, properties);
    };
    const hour = WINDOW_SECONDS * 1000;

    expect((await marked({ [RESUBMITTED_AT_PROPERTY]: 'x' }, 10 * hour)).duplicateCause).toBe(
      'dead_letter_resubmit',
    );
    expect((await marked({ [OUTBOX_SENT_BY_PROPERTY]: 'sweeper' }, 1_000)).duplicateCause).toBe(
      'relay_resend',
    );
    expect((await marked({}, hour)).duplicateCause).toBe('resend_after_window');
    expect((await marked({}, hour - 1)).duplicateCause).toBe('unknown');
  });

  it('names no cause for a payload mismatch, which is no duplicate', async () => {
    const story = new Story(start, 'mismatch');
    await story.deliver(1);
    const other = await processDelivery(
      consumer,
      delivery({ accountId: story.account, amount: 2 }, { messageId: 'mismatch', deliveryCount: 2 }),
      dependencies(stack.container),
    );

    expect(other.outcome).toBe('payload_mismatch');
    expect(other).not.toHaveProperty('duplicateCause');
  });
});
