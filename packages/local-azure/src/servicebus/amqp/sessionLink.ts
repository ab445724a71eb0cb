import { type Sender, types } from 'rhea';

import type { Entity } from '../broker';
import { MAX_SESSION_ID_LENGTH, type SessionLease, SessionLockLostError, type Sessions } from '../sessions';
import { asPeerError, closeOnFailure, CONDITIONS, PeerError } from './errors';
import { serveReceiveLink } from './receiveLink';

/**
 * A session receiver's link, as @azure/service-bus's acceptSession and acceptNextSession attach it
 * (and the .NET client's AcceptSessionAsync, AcceptNextSessionAsync): the source carries the filter
 * `com.microsoft:session-filter`, a session id or null for the next available session. The peer
 * answers the attach once it holds a session: its source's filter names the session accepted and
 * the link property `com.microsoft:locked-until-utc` says until when (.NET ticks, a long). Then the
 * link receives only that session's messages (receiveLink.ts), until the session lock is lost
 * (detached with com.microsoft:session-lock-lost) or the link closes (the session is released, and
 * what was not settled is available again). A connection dropped without closing its links keeps
 * the session until its lock runs out.
 *
 * A session another receiver holds is refused (answered without a source, then detached with
 * com.microsoft:session-cannot-be-locked); the next available session is waited for as long as the
 * link property `com.microsoft:timeout` says (ms; the SDK sends its operation timeout), then the
 * attach is answered without a source and detached with com.microsoft:timeout (the SDK's
 * ServiceTimeout).
 */
const SESSION_FILTER = 'com.microsoft:session-filter';
const LOCKED_UNTIL_UTC = 'com.microsoft:locked-until-utc';
const ACCEPT_TIMEOUT = 'com.microsoft:timeout';

/** Service Bus's own bound on the wait for a next available session when the client names none. */
const DEFAULT_ACCEPT_TIMEOUT_MS = 60_000;
/** A client's timeout is its own; this only keeps a link from waiting on a wrong value for ever. */
const MAX_ACCEPT_TIMEOUT_MS = 3_600_000;

/** .NET ticks (100 ns since 0001-01-01) of the Unix epoch. */
const EPOCH_TICKS = 621_355_968_000_000_000n;

/** What a receiver asked for: a given session, or (sessionId undefined) the next available one. */
export interface SessionRequest {
  sessionId: string | undefined;
}

/**
 * The receiver's session filter, if its source has one; refuses, in Service Bus's words, a session
 * receiver on an entity without sessions and a plain receiver on an entity that requires them.
 */
export function sessionRequestOf(sender: Sender, entity: Entity): SessionRequest | undefined {
  const filter = (sender.source as { filter?: unknown } | undefined)?.filter;
  const asked = typeof filter === 'object' && filter !== null && SESSION_FILTER in filter;
  if (!asked) {
    if (entity.sessions)
      throw new PeerError(
        CONDITIONS.notAllowed,
        'It is not possible for an entity that requires sessions to create a non-sessionful message receiver.',
      );
    return undefined;
  }
  if (!entity.sessions)
    throw new PeerError(
      CONDITIONS.notAllowed,
      'A sessionful message receiver cannot be created on an entity that does not require sessions. ' +
        'Ensure RequiresSession is set to true when creating a Queue or Subscription to enable sessionful behavior.',
    );
  const value = (filter as Record<string, unknown>)[SESSION_FILTER];
  if (value === null || value === undefined) return { sessionId: undefined };
  if (typeof value !== 'string' || value.length > MAX_SESSION_ID_LENGTH)
    throw new PeerError(
      CONDITIONS.invalidField,
      `${SESSION_FILTER} must be a session id of at most ${MAX_SESSION_ID_LENGTH} characters, or null.`,
    );
  return { sessionId: value };
}

/**
 * Holds the attach until a session is accepted, then serves the link as a session receiver. `stop`
 * (the link closed, or the peer stops) ends a wait and releases the session.
 */
export function serveSessionLink(
  sender: Sender,
  sessions: Sessions,
  request: SessionRequest,
  receiveAndDelete: boolean,
): { stop: () => void } {
  holdAttach(sender);
  const waiting = new AbortController();
  let lease: SessionLease | undefined;
  let served: { stop: () => void } | undefined;
  let cancelLockWatch = (): void => undefined;

  // The lock can run out while the client does nothing: then the link goes, as Service Bus's does.
  const watchLock = (): void => {
    cancelLockWatch();
    if (!lease || !sender.is_open()) return;
    if (!lease.held) {
      sender.close(asPeerError(new SessionLockLostError(lease.sessionId)).toAmqp());
      return;
    }
    const left = lease.lockedUntil - sessions.clock.now();
    cancelLockWatch = sessions.clock.after(Math.max(0, left) + 1, () =>
      closeOnFailure(sender.connection, watchLock),
    );
  };

  const serveSession = (accepted: SessionLease | undefined): void => {
    if (waiting.signal.aborted) {
      accepted?.release();
      return;
    }
    if (!accepted) {
      refuse(
        sender,
        new PeerError(
          CONDITIONS.timeout,
          'No session with available messages could be accepted within the operation timeout.',
        ),
      );
      return;
    }
    lease = accepted;
    // The address the receiver attached with (server.ts parsed it), and the session accepted.
    const address = String((sender.source as { address?: unknown } | undefined)?.address);
    sender.set_source({ address, filter: { [SESSION_FILTER]: lease.sessionId } });
    attachOf(sender).properties = { [LOCKED_UNTIL_UTC]: types.wrap_long(ticksOf(lease.lockedUntil)) };
    sender.open();
    served = serveReceiveLink(sender, sessions.entity, receiveAndDelete, lease);
    watchLock();
  };
  void accept(sessions, request, acceptTimeoutMs(sender), waiting.signal).then(
    (accepted) => closeOnFailure(sender.connection, () => serveSession(accepted)),
    (error: unknown) => closeOnFailure(sender.connection, () => refuse(sender, error)),
  );

  return {
    stop: () => {
      waiting.abort();
      cancelLockWatch();
      served?.stop();
      lease?.release();
      lease = undefined;
    },
  };
}

async function accept(
  sessions: Sessions,
  request: SessionRequest,
  timeoutMs: number,
  stopped: AbortSignal,
): Promise<SessionLease | undefined> {
  if (request.sessionId !== undefined) return sessions.accept(request.sessionId);
  const signal = AbortSignal.any([stopped, AbortSignal.timeout(timeoutMs)]);
  for (;;) {
    const lease = sessions.acceptNext();
    if (lease || signal.aborted) return lease;
    // A send, a settlement or a message lock running out may make a session available; so may a
    // session lock running out while its receiver holds no message.
    const sessionLockOut = new AbortController();
    const expiry = sessions.earliestExpiry();
    const cancel =
      expiry === undefined
        ? (): void => undefined
        : sessions.clock.after(Math.max(0, expiry - sessions.clock.now()) + 1, () => sessionLockOut.abort());
    await sessions.entity.changed(AbortSignal.any([signal, sessionLockOut.signal]));
    cancel();
  }
}

function acceptTimeoutMs(sender: Sender): number {
  const asked = (sender.properties as Record<string, unknown> | undefined)?.[ACCEPT_TIMEOUT];
  if (typeof asked !== 'number' || !Number.isFinite(asked) || asked < 0) return DEFAULT_ACCEPT_TIMEOUT_MS;
  return Math.min(asked, MAX_ACCEPT_TIMEOUT_MS);
}

/** Answers the held attach without a source (no session), then detaches with the error. */
function refuse(sender: Sender, error: unknown): void {
  attachOf(sender).source = null;
  sender.open();
  sender.close(asPeerError(error).toAmqp());
}

/** rhea's state of a link's own end, and the attach it will send. */
interface LinkInternals {
  state: { local_open: boolean; open_requests: number };
  local: { attach: { source?: unknown; properties?: Record<string, unknown> } };
}

function attachOf(sender: Sender): LinkInternals['local']['attach'] {
  return (sender as unknown as LinkInternals).local.attach;
}

/**
 * rhea answers an attach as soon as the handler returns; a session receiver's answer waits for its
 * session. `sender.open()` sends it later.
 */
function holdAttach(sender: Sender): void {
  const { state } = sender as unknown as LinkInternals;
  state.local_open = false;
  state.open_requests = 0;
}

function ticksOf(epochMs: number): Buffer {
  const ticks = Buffer.alloc(8);
  ticks.writeBigInt64BE(BigInt(Math.floor(epochMs)) * 10_000n + EPOCH_TICKS);
  return ticks;
}
