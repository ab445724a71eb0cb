import type { Entity, LockedMessage } from './broker';
import type { Clock } from './clock';

/**
 * Message sessions on an entity that requires them (RequiresSession): every message carries a
 * SessionId, and a session's messages are received, in order, only by the one receiver that holds
 * the session's lock. The session lock (the entity's lock duration, renewable) is also the lock of
 * every message received in the session: when it runs out, or the receiver closes, what the receiver
 * had not settled becomes available again and the delivery counts, as when a message lock expires.
 * Session state is kept per session id, independent of the messages, until it is cleared.
 */
export class SessionCannotBeLockedError extends Error {
  constructor(sessionId: string) {
    super(
      `The requested session '${shown(sessionId)}' cannot be accepted. It may be locked by another receiver.`,
    );
    this.name = 'SessionCannotBeLockedError';
  }
}

export class SessionLockLostError extends Error {
  constructor(sessionId: string) {
    super(
      `The session lock has expired on the MessageSession '${shown(sessionId)}'. Accept a new MessageSession.`,
    );
    this.name = 'SessionLockLostError';
  }
}

/** A send without a SessionId to an entity that requires sessions, in Service Bus's words. */
export class SessionIdRequiredError extends Error {
  constructor() {
    super(
      'The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have ' +
        'session support enabled can only receive messages that have the SessionId set to a valid value.',
    );
    this.name = 'SessionIdRequiredError';
  }
}

/** Service Bus's limit on a SessionId, in characters. */
export const MAX_SESSION_ID_LENGTH = 128;

/** A receiver's hold on one session: what it receives and settles through, while it holds. */
export class SessionLease {
  constructor(
    readonly sessionId: string,
    private readonly sessions: Sessions,
    /** Model ms; moved by renew(). */
    public lockedUntil: number,
  ) {}

  /** Still the session's holder, and the lock has not run out. */
  get held(): boolean {
    return this.sessions.holds(this);
  }

  assertHeld(): void {
    if (!this.held) throw new SessionLockLostError(this.sessionId);
  }

  /** Locks the session's next available message, under the session lock; none once the lock is lost. */
  receive(): LockedMessage | undefined {
    if (!this.held) return undefined;
    return this.sessions.entity.receive({ id: this.sessionId, lockedUntil: this.lockedUntil });
  }

  receiveDeferred(sequenceNumber: number): LockedMessage {
    this.assertHeld();
    return this.sessions.entity.receiveDeferred(sequenceNumber, {
      id: this.sessionId,
      lockedUntil: this.lockedUntil,
    });
  }

  /** The receiver closed: the session is free, and what it had not settled is available again. */
  release(): void {
    this.sessions.release(this);
  }
}

export class Sessions {
  private readonly leases = new Map<string, SessionLease>();
  private readonly states = new Map<string, Buffer>();

  constructor(
    readonly entity: Entity,
    readonly clock: Clock,
  ) {}

  /** acceptSession(id): an empty session can be accepted too (to set its state, say). */
  accept(sessionId: string): SessionLease {
    if (this.lockedLease(sessionId)) throw new SessionCannotBeLockedError(sessionId);
    const lease = new SessionLease(sessionId, this, this.clock.now() + this.entity.lockDurationMs);
    this.leases.set(sessionId, lease);
    return lease;
  }

  /** acceptNextSession: the session of the oldest available message whose session nobody holds. */
  acceptNext(): SessionLease | undefined {
    for (const sessionId of this.entity.availableSessionIds()) {
      if (!this.lockedLease(sessionId)) return this.accept(sessionId);
    }
    return undefined;
  }

  holds(lease: SessionLease): boolean {
    return this.leases.get(lease.sessionId) === lease && lease.lockedUntil > this.clock.now();
  }

  /** The session's lock, renewed by whoever asks ($management has no link to check); its new expiry. */
  renew(sessionId: string): number {
    const lease = this.heldLease(sessionId);
    lease.lockedUntil = this.clock.now() + this.entity.lockDurationMs;
    this.entity.extendSessionLocks(sessionId, lease.lockedUntil);
    return lease.lockedUntil;
  }

  /** Throws SessionLockLostError unless some receiver holds the session now. */
  heldLease(sessionId: string): SessionLease {
    const lease = this.lockedLease(sessionId);
    if (!lease) throw new SessionLockLostError(sessionId);
    return lease;
  }

  release(lease: SessionLease): void {
    if (this.leases.get(lease.sessionId) !== lease) return;
    this.leases.delete(lease.sessionId);
    if (lease.lockedUntil > this.clock.now()) this.entity.releaseSession(lease.sessionId);
  }

  state(sessionId: string): Buffer | undefined {
    this.heldLease(sessionId);
    return this.states.get(sessionId);
  }

  /** Sets the session's state; undefined clears it. */
  setState(sessionId: string, state: Buffer | undefined): void {
    this.heldLease(sessionId);
    if (state === undefined) this.states.delete(sessionId);
    else this.states.set(sessionId, state);
  }

  /** When the first session lock held now runs out, model ms; undefined when none is held. */
  earliestExpiry(): number | undefined {
    const now = this.clock.now();
    const expiries = [...this.leases.values()].map((l) => l.lockedUntil).filter((until) => until > now);
    return expiries.length === 0 ? undefined : Math.min(...expiries);
  }

  private lockedLease(sessionId: string): SessionLease | undefined {
    const lease = this.leases.get(sessionId);
    if (!lease) return undefined;
    if (lease.lockedUntil > this.clock.now()) return lease;
    this.leases.delete(sessionId);
    return undefined;
  }
}

/** A session id as an error message may echo it: a client's, so bounded. */
function shown(sessionId: string): string {
  return sessionId.length > MAX_SESSION_ID_LENGTH
    ? `${sessionId.slice(0, MAX_SESSION_ID_LENGTH)}…`
    : sessionId;
}
