import { randomUUID } from 'node:crypto';

import type { Clock } from './clock';
import {
  checkRuleName,
  DEFAULT_RULE_NAME,
  MAX_RULES,
  type RetryCopies,
  type Rule,
  RuleError,
  type RuleFilter,
  subjectsFilter,
  takes,
} from './rules';
import { SessionIdRequiredError, Sessions } from './sessions';

/**
 * A model of the Service Bus features the template depends on: a topic with duplicate detection by
 * MessageId over a window, subscriptions with Subject (Label) correlation filters, peek-lock with a
 * lock duration, lock renewal and expiry, DeliveryCount (counted, as Service Bus counts it, when a
 * delivery ends unsettled: abandoned or its lock expired), MaxDeliveryCount → the dead-letter queue,
 * message TTL → the dead-letter queue, the dead-letter sub-queue itself, deferral (a deferred
 * message is received only by its sequence number), and scheduled messages
 * (held by the topic until their enqueue time, cancellable by the sequence number scheduling
 * returned; duplicate detection applies when a message is scheduled, as to any send), and message
 * sessions on an entity that requires them (sessions.ts).
 */
export interface OutgoingMessage {
  messageId?: string;
  subject?: string;
  /** What the producer sent: text (JSON, usually) or bytes. */
  body: string | Buffer;
  correlationId?: string;
  contentType?: string;
  applicationProperties?: ApplicationProperties;
  /**
   * The application properties as they came over the wire, typed (the AMQP peer's, opaque here):
   * sent back as they came, so that a .NET Int32 stays an Int32 and the .NET client's described
   * types (DateTimeOffset, TimeSpan, Guid, Uri) pass through. A property abandon modifies is sent as
   * `applicationProperties` has it.
   */
  wireProperties?: Readonly<Record<string, unknown>>;
  /**
   * System properties the broker carries and hands back as sent: AMQP `to`, `reply-to`,
   * `reply-to-group-id` (ReplyToSessionId), `group-id` (SessionId: an entity that requires sessions
   * hands a session's messages to its one receiver, sessions.ts) and the `x-opt-partition-key`
   * annotation.
   */
  to?: string;
  replyTo?: string;
  replyToSessionId?: string;
  sessionId?: string;
  partitionKey?: string;
  /** Per-message TTL in ms; default: the subscription's. */
  timeToLiveMs?: number;
  /** When a scheduled message is enqueued, model ms; one not in the future is enqueued at once. */
  scheduledEnqueueTime?: number;
}

/** What Service Bus accepts as an application property value (a Date travels as an AMQP timestamp). */
export type ApplicationProperties = Record<string, string | number | boolean | Date>;

export interface BrokerMessage extends OutgoingMessage {
  sequenceNumber: number;
  enqueuedAt: number;
  expiresAt: number;
  /** Deliveries that ended unsettled (abandoned, or the lock expired): 0 while on its first. */
  deliveryCount: number;
  /** Set while the message is dead-lettered. */
  deadLetter?: { reason: string; description: string; at: number };
}

/** A session's receiver, as the entity sees it: its session, and until when the session lock holds. */
export interface SessionHold {
  id: string;
  lockedUntil: number;
}

export interface LockedMessage {
  message: BrokerMessage;
  lockToken: string;
  lockedUntil: number;
  /** This delivery's number, 1 on the first (the Functions trigger's DeliveryCount). */
  deliveryNumber: number;
}

/**
 * The topics and subscriptions to serve: an app's declared topology (its src/topology.json), given
 * as data. A subscription declared with `delayedRetry` also takes its own delayed copies; the
 * policy's numbers are the app's business, not the broker's.
 */
export interface BrokerTopology {
  readonly topics: readonly {
    readonly name: string;
    readonly subscriptions: readonly {
      readonly name: string;
      readonly subjects: readonly string[];
      readonly delayedRetry?: unknown;
    }[];
  }[];
}

export interface BrokerOptions {
  topology: BrokerTopology;
  /** How delayed copies are told apart; required when a subscription declares delayedRetry. */
  retryCopies?: RetryCopies;
  clock: Clock;
  /** Duplicate detection history window, model ms; default one hour (PT1H). */
  duplicateWindowMs?: number;
  /** Subscription lock duration, model ms; default one minute (PT1M). */
  lockDurationMs?: number;
  /** Deliveries before a message is dead-lettered; default 10. */
  maxDeliveryCount?: number;
  /** Subscription default message TTL, model ms; default 14 days (P14D). */
  messageTimeToLiveMs?: number;
  /** Told what the broker does on its own, for a live view (npm start). */
  observer?: BrokerObserver;
  /**
   * Queues, by name: each takes every message sent to it (no filters), with the same duplicate
   * detection, peek-lock, delivery counts, dead-letter queue and TTL as a subscription. The app
   * uses topics only (src/topology.json); queues serve other clients (Microsoft's SDK tests, tools).
   */
  queues?: readonly (string | QueueDeclaration)[];
}

/** A queue with its settings (a bare name is a queue with the defaults). */
export interface QueueDeclaration {
  name: string;
  /** RequiresSession: messages must carry a SessionId and are received by session; default false. */
  requiresSession?: boolean;
}

/**
 * What the broker does that no client sees: a send dropped as a duplicate, a message no subscription
 * takes (Service Bus accepts it and drops it), a message dead-lettered.
 */
export interface BrokerObserver {
  droppedAsDuplicate?(topic: string, message: OutgoingMessage): void;
  matchedNoSubscription?(topic: string, message: OutgoingMessage): void;
  /** `path` is the subscription's; the message carries its deadLetter reason. */
  deadLettered?(path: string, message: BrokerMessage): void;
}

export class MessageLockLostError extends Error {
  constructor(lockToken: string) {
    super(`The lock ${lockToken} is not held any more: it expired or the message was settled.`);
    this.name = 'MessageLockLostError';
  }
}

/** A queue of messages with peek-lock: a subscription, or its dead-letter sub-queue. */
export class Entity {
  private readonly messages = new Map<number, BrokerMessage>();
  private readonly locks = new Map<string, { sequenceNumber: number; until: number }>();
  private readonly lockOf = new Map<number, string>();
  /** Deferred messages: out of the receivable backlog until received by sequence number. */
  private readonly deferred = new Set<number>();
  private readonly waiters = new Set<() => void>();
  /** Messages that left the entity by completion, in order. */
  readonly completed: BrokerMessage[] = [];
  /** Messages ever put in the entity. */
  enqueued = 0;
  /**
   * Whether an expired message goes to the dead-letter queue (true, the model's default, as the
   * Bicep sets it) or is dropped (Service Bus's default for an entity created without the setting).
   */
  deadLetteringOnMessageExpiration = true;
  /**
   * Set on an entity that requires sessions (RequiresSession, sessions.ts): its messages are
   * received by session, under the session's lock.
   */
  sessions: Sessions | undefined;

  constructor(
    readonly path: string,
    private readonly clock: Clock,
    /** Per entity; the administration endpoint changes it (a lock taken keeps its expiry). */
    public lockDurationMs: number,
    /** Where a message goes when it is dead-lettered; undefined for a dead-letter queue itself. */
    private readonly onDeadLetter: ((message: BrokerMessage) => void) | undefined,
    public maxDeliveryCount: number,
  ) {}

  enqueue(message: BrokerMessage): void {
    if (this.sessions && message.sessionId === undefined && this.onDeadLetter) {
      // What Service Bus does with a topic's message that a subscription requiring sessions takes.
      this.onDeadLetter({
        ...message,
        deadLetter: {
          reason: 'Session id is null.',
          description: "Session enabled entity doesn't allow a message whose session identifier is null.",
          at: this.clock.now(),
        },
      });
      return;
    }
    this.enqueued++;
    this.messages.set(message.sequenceNumber, message);
    this.wake();
  }

  /** Receives by session from now on (an entity created with RequiresSession). */
  requireSessions(): void {
    this.sessions ??= new Sessions(this, this.clock);
  }

  /**
   * Locks the next available message (peek-lock), or returns undefined. Within a session
   * (sessions.ts): the session's next message, locked as long as the session is.
   */
  receive(session?: SessionHold): LockedMessage | undefined {
    const now = this.clock.now();
    for (const message of this.messages.values()) {
      if (session && message.sessionId !== session.id) continue;
      if (this.deferred.has(message.sequenceNumber)) continue;
      if (this.isLocked(message.sequenceNumber, now)) continue;
      // Its lock ran out on its last allowed delivery: it has just been dead-lettered.
      if (!this.messages.has(message.sequenceNumber)) continue;
      if (this.onDeadLetter && message.expiresAt <= now) {
        if (this.deadLetteringOnMessageExpiration)
          this.moveToDeadLetter(message, 'TTLExpiredException', 'The message expired and was dead lettered.');
        else this.drop(message);
        continue;
      }
      return this.lock(message, now, session?.lockedUntil);
    }
    return undefined;
  }

  /** The sessions that have a message to receive, in the order of their oldest such message. */
  availableSessionIds(): string[] {
    const now = this.clock.now();
    const ids = new Set<string>();
    for (const message of this.messages.values()) {
      if (message.sessionId === undefined || ids.has(message.sessionId)) continue;
      if (this.deferred.has(message.sequenceNumber) || this.isLocked(message.sequenceNumber, now)) continue;
      // Gone to the dead-letter queue as its lock ran out, or expired: nothing to receive.
      if (this.messages.has(message.sequenceNumber) && message.expiresAt > now) ids.add(message.sessionId);
    }
    return [...ids];
  }

  /** A renewed session lock is the new lock of every message received in the session. */
  extendSessionLocks(sessionId: string, until: number): void {
    for (const lock of this.locks.values()) {
      if (this.messages.get(lock.sequenceNumber)?.sessionId === sessionId) lock.until = until;
    }
  }

  /** The session's receiver let go: what it had not settled is available again, and the delivery counts. */
  releaseSession(sessionId: string): void {
    for (const [sequenceNumber, message] of [...this.messages]) {
      if (message.sessionId !== sessionId || !this.lockOf.has(sequenceNumber)) continue;
      this.unlock(sequenceNumber);
      this.afterRelease(message, 'The session was closed before the message was settled.');
    }
    this.wake();
  }

  /**
   * Locks a deferred message, received by its sequence number (it stays deferred: abandoned, or its
   * lock run out, it goes back to waiting for the next receive by sequence number).
   */
  receiveDeferred(sequenceNumber: number, session?: SessionHold): LockedMessage {
    const now = this.clock.now();
    const message = this.messages.get(sequenceNumber);
    if (!message || !this.deferred.has(sequenceNumber) || (session && message.sessionId !== session.id))
      throw new MessageNotFoundError(sequenceNumber, 'deferred');
    this.isLocked(sequenceNumber, now);
    if (!this.messages.has(sequenceNumber)) throw new MessageNotFoundError(sequenceNumber, 'deferred');
    this.unlock(sequenceNumber);
    return this.lock(message, now, session?.lockedUntil);
  }

  private lock(message: BrokerMessage, now: number, until = now + this.lockDurationMs): LockedMessage {
    const lockToken = randomUUID();
    this.locks.set(lockToken, { sequenceNumber: message.sequenceNumber, until });
    this.lockOf.set(message.sequenceNumber, lockToken);
    return { message, lockToken, lockedUntil: until, deliveryNumber: message.deliveryCount + 1 };
  }

  /**
   * Waits until a message is available: woken by a send or a release, or by the earliest lock
   * running out (a lock that expires is a release nobody announces).
   */
  async nextMessage(signal?: AbortSignal): Promise<LockedMessage | undefined> {
    for (;;) {
      if (signal?.aborted) return undefined;
      const locked = this.receive();
      if (locked) return locked;
      await this.changed(signal);
    }
  }

  /**
   * Resolves at the next moment a message may have become available (a send, a release, the
   * earliest lock running out) or when `signal` aborts, and locks nothing: for a caller that may
   * take a message only while it has somewhere to put it (the AMQP peer, bound by link credit).
   */
  changed(signal?: AbortSignal): Promise<void> {
    const earliestExpiry = Math.min(...[...this.locks.values()].map((lock) => lock.until));
    return new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const cancelTimer = Number.isFinite(earliestExpiry)
        ? this.clock.after(Math.max(0, earliestExpiry - this.clock.now()) + 1, () => done())
        : (): void => undefined;
      const done = (): void => {
        cancelTimer();
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      this.waiters.add(done);
      signal?.addEventListener('abort', done);
    });
  }

  complete(lockToken: string): BrokerMessage {
    const message = this.heldMessage(lockToken);
    this.unlock(message.sequenceNumber);
    this.messages.delete(message.sequenceNumber);
    this.deferred.delete(message.sequenceNumber);
    this.completed.push(message);
    return message;
  }

  /**
   * Gives the message back, with `propertiesToModify` merged into its application properties (as
   * Service Bus does); after its last allowed delivery it is dead-lettered.
   */
  abandon(lockToken: string, description?: string, propertiesToModify?: ApplicationProperties): void {
    const message = this.heldMessage(lockToken);
    this.unlock(message.sequenceNumber);
    if (propertiesToModify !== undefined)
      message.applicationProperties = { ...message.applicationProperties, ...propertiesToModify };
    this.afterRelease(message, description);
    this.wake();
  }

  /**
   * Gives the message back uncounted: AMQP's released outcome, a receiver saying it never had the
   * message (the .NET client releases what arrives on credit left after its receive timed out).
   * Service Bus does not count it, as it counts an abandon (AMQP 1.0 §3.4.4: delivery-failed is not set).
   */
  release(lockToken: string): void {
    const message = this.heldMessage(lockToken);
    this.unlock(message.sequenceNumber);
    this.wake();
  }

  /**
   * Sets the message aside (with `propertiesToModify` merged, as abandon does): it is no longer
   * received, only received by its sequence number. The delivery does not count.
   */
  defer(lockToken: string, propertiesToModify?: ApplicationProperties): void {
    const message = this.heldMessage(lockToken);
    this.unlock(message.sequenceNumber);
    if (propertiesToModify !== undefined)
      message.applicationProperties = { ...message.applicationProperties, ...propertiesToModify };
    this.deferred.add(message.sequenceNumber);
  }

  isDeferred(sequenceNumber: number): boolean {
    return this.deferred.has(sequenceNumber);
  }

  /** Moves the message to the dead-letter queue with its reason, `propertiesToModify` merged as abandon does. */
  deadLetter(
    lockToken: string,
    reason: string,
    description: string,
    propertiesToModify?: ApplicationProperties,
  ): void {
    const message = this.heldMessage(lockToken);
    if (propertiesToModify !== undefined)
      message.applicationProperties = { ...message.applicationProperties, ...propertiesToModify };
    this.unlock(message.sequenceNumber);
    this.moveToDeadLetter(message, reason, description);
  }

  renewLock(lockToken: string): number {
    const message = this.heldMessage(lockToken);
    const until = this.clock.now() + this.lockDurationMs;
    this.locks.set(lockToken, { sequenceNumber: message.sequenceNumber, until });
    return until;
  }

  /** Messages still in the entity (available or locked), without locking them. */
  peek(): BrokerMessage[] {
    this.expireLocks();
    return [...this.messages.values()];
  }

  /** Messages that can be received (deferred ones are not). */
  get activeCount(): number {
    return this.peek().filter((message) => !this.deferred.has(message.sequenceNumber)).length;
  }

  get deferredCount(): number {
    this.expireLocks();
    return this.deferred.size;
  }

  get lockedCount(): number {
    const now = this.clock.now();
    return [...this.messages.keys()].filter((sequenceNumber) => this.isLocked(sequenceNumber, now)).length;
  }

  private heldMessage(lockToken: string): BrokerMessage {
    const lock = this.locks.get(lockToken);
    const message = lock && this.messages.get(lock.sequenceNumber);
    if (
      !lock ||
      !message ||
      lock.until <= this.clock.now() ||
      this.lockOf.get(lock.sequenceNumber) !== lockToken
    ) {
      throw new MessageLockLostError(lockToken);
    }
    return message;
  }

  private isLocked(sequenceNumber: number, now: number): boolean {
    const token = this.lockOf.get(sequenceNumber);
    const lock = token === undefined ? undefined : this.locks.get(token);
    if (!lock) return false;
    if (lock.until > now) return true;
    // The lock ran out while the message was still held: as if it had been abandoned.
    this.unlock(sequenceNumber);
    const message = this.messages.get(sequenceNumber);
    if (message) this.afterRelease(message, 'The lock expired before the message was settled.');
    return false;
  }

  private expireLocks(): void {
    const now = this.clock.now();
    for (const sequenceNumber of [...this.messages.keys()]) this.isLocked(sequenceNumber, now);
  }

  private unlock(sequenceNumber: number): void {
    const token = this.lockOf.get(sequenceNumber);
    if (token !== undefined) this.locks.delete(token);
    this.lockOf.delete(sequenceNumber);
  }

  /** A delivery ended unsettled: it counts, and after the last allowed one the message is dead-lettered. */
  private afterRelease(message: BrokerMessage, description: string | undefined): void {
    message.deliveryCount++;
    if (this.onDeadLetter && message.deliveryCount >= this.maxDeliveryCount) {
      this.moveToDeadLetter(
        message,
        'MaxDeliveryCountExceeded',
        `Message could not be consumed after ${message.deliveryCount} delivery attempts.${description ? ` Last error: ${description}` : ''}`,
      );
    }
  }

  private moveToDeadLetter(message: BrokerMessage, reason: string, description: string): void {
    this.drop(message);
    this.onDeadLetter?.({ ...message, deadLetter: { reason, description, at: this.clock.now() } });
  }

  private drop(message: BrokerMessage): void {
    this.messages.delete(message.sequenceNumber);
    this.deferred.delete(message.sequenceNumber);
    this.unlock(message.sequenceNumber);
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}

export class Subscription {
  readonly entity: Entity;
  readonly deadLetterQueue: Entity;
  private readonly isQueue: boolean;
  /** Its rules by name (rules.ts); a queue has none: it takes every message. */
  private readonly rulesByName = new Map<string, Rule>();
  /** Its own default message TTL, ms: a message copied to it lives at most this long (and its topic's). */
  messageTimeToLiveMs = Infinity;
  /**
   * Declared with delayedRetry (src/topology.json): its $Default rule also takes the delayed copies
   * scheduled for it (rules.ts subjectsFilter). A redeployment changes it with declareSubjects.
   */
  delayedRetry = false;

  constructor(
    readonly topic: string,
    readonly name: string,
    /**
     * The subjects it was declared with (src/topology.json), which its $Default rule takes;
     * none: $Default is the true filter. A redeployment changes them with declareSubjects.
     */
    public subjects: readonly string[],
    private readonly clock: Clock,
    options: {
      lockDurationMs: number;
      maxDeliveryCount: number;
      observer?: BrokerObserver;
      /** A queue's one "subscription": it takes every message and its path is the queue's. */
      queue?: boolean;
      /** Takes every message (a subscription created over the administration endpoint: the $Default true filter). */
      acceptsAll?: boolean;
      /** RequiresSession (sessions.ts); its dead-letter queue never does. Default false. */
      requiresSession?: boolean;
      /** Declared with delayedRetry: $Default also takes its own delayed copies, told apart by these. */
      retryCopies?: RetryCopies;
    },
  ) {
    this.isQueue = options.queue === true;
    if (!this.isQueue) this.declareSubjects(options.acceptsAll === true ? [] : subjects, options.retryCopies);
    const path = options.queue === true ? topic : `${topic}/Subscriptions/${name}`;
    this.deadLetterQueue = new Entity(
      `${path}/$deadletterqueue`,
      clock,
      options.lockDurationMs,
      undefined,
      Number.MAX_SAFE_INTEGER,
    );
    this.entity = new Entity(
      path,
      clock,
      options.lockDurationMs,
      (message) => {
        this.deadLetterQueue.enqueue(message);
        options.observer?.deadLettered?.(path, message);
      },
      options.maxDeliveryCount,
    );
    if (options.requiresSession === true) this.entity.requireSessions();
  }

  /** Whether a message sent to the topic is copied here: one of its rules takes it. */
  accepts(message: OutgoingMessage): boolean {
    if (this.isQueue) return true;
    for (const rule of this.rulesByName.values()) if (takes(rule.filter, message)) return true;
    return false;
  }

  /**
   * What a redeployment of the Bicep does: $Default is redefined with the subjects' filter, which
   * with delayedRetry also takes the delayed copies scheduled for this subscription.
   */
  declareSubjects(subjects: readonly string[], retryCopies?: RetryCopies): void {
    this.subjects = [...subjects];
    this.delayedRetry = retryCopies !== undefined && subjects.length > 0;
    const filter: RuleFilter =
      subjects.length === 0
        ? { kind: 'true' }
        : subjectsFilter(
            subjects,
            this.delayedRetry && retryCopies ? { copies: retryCopies, for: this.name } : undefined,
          );
    this.rulesByName.set(DEFAULT_RULE_NAME, {
      name: DEFAULT_RULE_NAME,
      filter,
      createdAt: this.rulesByName.get(DEFAULT_RULE_NAME)?.createdAt ?? this.clock.now(),
    });
  }

  /** Its rules, in the order they were added. */
  get rules(): Rule[] {
    return [...this.rulesByName.values()];
  }

  addRule(name: string, filter: RuleFilter): Rule {
    this.assertHasRules();
    const checked = checkRuleName(name);
    if (this.findRule(checked))
      throw new RuleError(
        `The messaging entity '${this.entity.path}/Rules/${checked}' already exists.`,
        'exists',
      );
    if (this.rulesByName.size >= MAX_RULES)
      throw new RuleError(`A subscription has at most ${MAX_RULES} rules.`, 'quota');
    const rule = { name: checked, filter, createdAt: this.clock.now() };
    this.rulesByName.set(checked, rule);
    return rule;
  }

  removeRule(name: string): void {
    this.assertHasRules();
    const rule = this.findRule(name);
    if (!rule)
      throw new RuleError(
        `The messaging entity '${this.entity.path}/Rules/${String(name).slice(0, 50)}' could not be found.`,
        'not-found',
      );
    this.rulesByName.delete(rule.name);
  }

  /** Rule names are case-insensitive, as Service Bus entity names are. */
  findRule(name: string): Rule | undefined {
    const wanted = String(name).toLowerCase();
    for (const rule of this.rulesByName.values()) if (rule.name.toLowerCase() === wanted) return rule;
    return undefined;
  }

  private assertHasRules(): void {
    if (this.isQueue)
      throw new RuleError(`'${this.entity.path}' is a queue: queues have no rules.`, 'invalid');
  }
}

export interface SendResult {
  /** False when duplicate detection dropped the send (Service Bus still reports success). */
  accepted: boolean;
  /** The subscriptions the message was copied to (none yet for a scheduled message). */
  deliveredTo: string[];
  /**
   * For a message that named a scheduled enqueue time: the sequence number the send is answered
   * with, which cancels the message while it waits (a message due already is enqueued at once).
   */
  sequenceNumber?: number;
}

export class MessageNotFoundError extends Error {
  constructor(sequenceNumber: number, kind: 'scheduled' | 'deferred') {
    super(`No ${kind} message has the sequence number ${sequenceNumber}.`);
    this.name = 'MessageNotFoundError';
  }
}

export class Topic {
  private readonly history = new Map<string, number>();
  /** Scheduled messages, by the sequence number scheduling returned, with what cancels their timer. */
  private readonly scheduled = new Map<number, { message: OutgoingMessage; cancel: () => void }>();
  readonly subscriptions: Subscription[];
  readonly stats = { sent: 0, accepted: 0, droppedAsDuplicate: 0, matchedNoSubscription: 0 };
  /** False for an entity created without duplicate detection (over the administration endpoint). */
  requiresDuplicateDetection = true;

  constructor(
    readonly name: string,
    subscriptions: Subscription[],
    private readonly clock: Clock,
    /** Per topic (or queue); the administration endpoint changes them. */
    public duplicateWindowMs: number,
    public messageTimeToLiveMs: number,
    private readonly nextSequenceNumber: () => number,
    private readonly observer?: BrokerObserver,
  ) {
    this.subscriptions = subscriptions;
  }

  send(sent: OutgoingMessage): SendResult {
    // Service Bus gives a message sent without a MessageId one of its own (a GUID without dashes),
    // so a receiver always has one: the SDK's lock renewal, for one, keys on it.
    const message =
      sent.messageId === undefined ? { ...sent, messageId: randomUUID().replace(/-/g, '') } : sent;
    // A queue that requires sessions refuses the send (a topic's subscription dead-letters the copy:
    // Entity.enqueue); a queue's one entity is at the queue's own path.
    const sessionQueue = this.subscriptions.some((s) => s.entity.sessions && s.entity.path === this.name);
    if (sessionQueue && message.sessionId === undefined) throw new SessionIdRequiredError();
    const now = this.clock.now();
    this.stats.sent++;
    this.forgetOutsideWindow(now);
    const at = message.scheduledEnqueueTime;
    const numbered = at === undefined ? {} : { sequenceNumber: this.nextSequenceNumber() };
    if (this.requiresDuplicateDetection && message.messageId !== undefined) {
      const seenAt = this.history.get(message.messageId);
      if (seenAt !== undefined && now - seenAt < this.duplicateWindowMs) {
        this.stats.droppedAsDuplicate++;
        this.observer?.droppedAsDuplicate?.(this.name, message);
        return { accepted: false, deliveredTo: [], ...numbered };
      }
      // Re-inserted, so the history stays in order of time for forgetOutsideWindow.
      this.history.delete(message.messageId);
      this.history.set(message.messageId, now);
    }
    this.stats.accepted++;
    if (at !== undefined && at > now) {
      const sequenceNumber = numbered.sequenceNumber!;
      const cancel = this.clock.after(at - now, () => {
        this.scheduled.delete(sequenceNumber);
        this.enqueue(message);
      });
      this.scheduled.set(sequenceNumber, { message, cancel });
      return { accepted: true, deliveredTo: [], sequenceNumber };
    }
    return { accepted: true, deliveredTo: this.enqueue(message), ...numbered };
  }

  /** Cancels a scheduled message that has not been enqueued yet. */
  cancelScheduled(sequenceNumber: number): void {
    const scheduled = this.scheduled.get(sequenceNumber);
    if (!scheduled) throw new MessageNotFoundError(sequenceNumber, 'scheduled');
    scheduled.cancel();
    this.scheduled.delete(sequenceNumber);
  }

  /** Messages scheduled and not yet enqueued. */
  get scheduledCount(): number {
    return this.scheduled.size;
  }

  /** Copies the message to the subscriptions whose filter takes it; returns their names. */
  private enqueue(message: OutgoingMessage): string[] {
    const now = this.clock.now();
    const targets = this.subscriptions.filter((subscription) => subscription.accepts(message));
    if (targets.length === 0) {
      this.stats.matchedNoSubscription++;
      this.observer?.matchedNoSubscription?.(this.name, message);
    }
    for (const subscription of targets) {
      subscription.entity.enqueue({
        ...message,
        sequenceNumber: this.nextSequenceNumber(),
        enqueuedAt: now,
        // A message's own TTL applies only when it is shorter than the subscription's default.
        expiresAt:
          now +
          Math.min(
            message.timeToLiveMs ?? Infinity,
            this.messageTimeToLiveMs,
            subscription.messageTimeToLiveMs,
          ),
        deliveryCount: 0,
      });
    }
    return targets.map((subscription) => subscription.name);
  }

  /** Drops the MessageIds whose window has passed (oldest first), so a long run's history stays bounded. */
  private forgetOutsideWindow(now: number): void {
    for (const [messageId, seenAt] of this.history) {
      if (now - seenAt < this.duplicateWindowMs) return;
      this.history.delete(messageId);
    }
  }
}

/** What a new declaration changed in a running broker, by entity path. */
export interface TopologyChanges {
  added: string[];
  removed: string[];
  refiltered: string[];
}

export class Broker {
  readonly topics = new Map<string, Topic>();
  /** Each queue is a topic with one subscription that takes every message, at the queue's path. */
  readonly queues = new Map<string, Topic>();
  readonly lockDurationMs: number;
  readonly maxDeliveryCount: number;
  private sequence = 0;

  constructor(private readonly options: BrokerOptions) {
    this.lockDurationMs = options.lockDurationMs ?? 60_000;
    this.maxDeliveryCount = options.maxDeliveryCount ?? 10;
    this.declare(options.topology);
    for (const declared of options.queues ?? []) {
      const { name, requiresSession } = typeof declared === 'string' ? { name: declared } : declared;
      if (this.topics.has(name) || this.queues.has(name))
        throw new Error(`The queue '${name}' is declared twice, or as a topic too.`);
      this.addQueue(name, { requiresSession: requiresSession === true });
    }
  }

  /**
   * Creates a queue at run time (the administration endpoint; start() declares its own) with the
   * broker's defaults. The caller checks that no entity has the name yet.
   */
  addQueue(name: string, settings: { requiresSession?: boolean } = {}): Topic {
    const subscription = new Subscription(name, '', [], this.options.clock, {
      lockDurationMs: this.lockDurationMs,
      maxDeliveryCount: this.maxDeliveryCount,
      queue: true,
      requiresSession: settings.requiresSession === true,
      ...(this.options.observer === undefined ? {} : { observer: this.options.observer }),
    });
    const queue = this.newTopic(name, [subscription]);
    this.queues.set(name, queue);
    return queue;
  }

  /** Creates a topic at run time, with no subscriptions and the broker's defaults. */
  addTopic(name: string): Topic {
    const topic = this.newTopic(name, []);
    this.topics.set(name, topic);
    return topic;
  }

  /**
   * Creates a subscription at run time, as Service Bus creates one without rules: it takes every
   * message (the $Default rule's true filter).
   */
  addSubscription(topic: Topic, name: string, settings: { requiresSession?: boolean } = {}): Subscription {
    const subscription = new Subscription(topic.name, name, [], this.options.clock, {
      lockDurationMs: this.lockDurationMs,
      maxDeliveryCount: this.maxDeliveryCount,
      acceptsAll: true,
      requiresSession: settings.requiresSession === true,
      ...(this.options.observer === undefined ? {} : { observer: this.options.observer }),
    });
    topic.subscriptions.push(subscription);
    return subscription;
  }

  /** Deletes a queue or a topic (by its name as stored) with its messages; returns the subscriptions that went with it. */
  remove(topic: Topic): Subscription[] {
    if (this.queues.get(topic.name) === topic) this.queues.delete(topic.name);
    if (this.topics.get(topic.name) === topic) this.topics.delete(topic.name);
    return [...topic.subscriptions];
  }

  /** Deletes a subscription with its messages. */
  removeSubscription(topic: Topic, subscription: Subscription): void {
    const at = topic.subscriptions.indexOf(subscription);
    if (at !== -1) topic.subscriptions.splice(at, 1);
  }

  private newTopic(name: string, subscriptions: Subscription[]): Topic {
    return new Topic(
      name,
      subscriptions,
      this.options.clock,
      this.options.duplicateWindowMs ?? 3_600_000,
      this.options.messageTimeToLiveMs ?? 14 * 86_400_000,
      () => ++this.sequence,
      this.options.observer,
    );
  }

  /** A queue's entity (what receivers take from) and its dead-letter queue. */
  queue(name: string): Subscription {
    const queue = this.queues.get(name);
    if (!queue) throw new Error(`The queue '${name}' does not exist.`);
    return queue.subscriptions[0]!;
  }

  /**
   * Makes the entities match a declaration, as a redeployment of the Bicep does: topics and
   * subscriptions it adds are created, those it no longer declares are deleted with their messages,
   * and a subscription whose subjects changed, or which gained or lost delayedRetry, gets the new
   * filter, keeping what it holds (the policy's numbers are not in the filter: they change nothing).
   */
  private retryCopies(path: string): RetryCopies {
    if (this.options.retryCopies === undefined)
      throw new Error(
        `${path} declares delayedRetry: give the broker retryCopies, the delayed-retry protocol's subject and property (the library's RETRY_SUBJECT and RETRY_PROPERTIES.for).`,
      );
    return this.options.retryCopies;
  }

  declare(topology: BrokerTopology): TopologyChanges {
    const changes: TopologyChanges = { added: [], removed: [], refiltered: [] };
    const declaredTopics = new Set(topology.topics.map((t) => t.name));
    for (const name of [...this.topics.keys()].filter((n) => !declaredTopics.has(n))) {
      changes.removed.push(name);
      this.topics.delete(name);
    }
    for (const declared of topology.topics) {
      let topic = this.topics.get(declared.name);
      if (topic === undefined) {
        topic = this.newTopic(declared.name, []);
        this.topics.set(declared.name, topic);
        changes.added.push(declared.name);
      }
      const names = new Set(declared.subscriptions.map((s) => s.name));
      for (const gone of topic.subscriptions.filter((s) => !names.has(s.name))) {
        changes.removed.push(`${declared.name}/Subscriptions/${gone.name}`);
        topic.subscriptions.splice(topic.subscriptions.indexOf(gone), 1);
      }
      for (const { name, subjects, delayedRetry } of declared.subscriptions) {
        const path = `${declared.name}/Subscriptions/${name}`;
        const existing = topic.subscriptions.find((s) => s.name === name);
        const retries = delayedRetry !== undefined;
        const retryCopies = retries ? this.retryCopies(path) : undefined;
        if (existing === undefined) {
          topic.subscriptions.push(
            new Subscription(declared.name, name, [...subjects], this.options.clock, {
              lockDurationMs: this.lockDurationMs,
              maxDeliveryCount: this.maxDeliveryCount,
              ...(retryCopies === undefined ? {} : { retryCopies }),
              ...(this.options.observer === undefined ? {} : { observer: this.options.observer }),
            }),
          );
          changes.added.push(path);
        } else if (
          [...existing.subjects].sort().join('\n') !== [...subjects].sort().join('\n') ||
          existing.delayedRetry !== retries
        ) {
          existing.declareSubjects(subjects, retryCopies);
          changes.refiltered.push(path);
        }
      }
    }
    return changes;
  }

  topic(name: string): Topic {
    const topic = this.topics.get(name);
    if (!topic) throw new Error(`The topic '${name}' does not exist (see src/topology.json).`);
    return topic;
  }

  subscription(topic: string, name: string): Subscription {
    const subscription = this.topic(topic).subscriptions.find((s) => s.name === name);
    if (!subscription)
      throw new Error(`The subscription '${topic}/${name}' does not exist (see src/topology.json).`);
    return subscription;
  }

  get subscriptions(): Subscription[] {
    return [...this.topics.values()].flatMap((topic) => topic.subscriptions);
  }
}
