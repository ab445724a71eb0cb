/**
 * The app's delayed-retry protocol, as local Azure's tests give it to the broker (its retryCopies
 * option) and stamp it on the copies they send: the library's values, written here because local
 * Azure depends on no workspace package. test/infra/servicebus.test.ts checks that local Azure's
 * filter, given the library's values (the dev kit's RETRY_COPIES), is the Bicep's.
 */
export const RETRY_COPIES = { subject: 'inbox.retry', forProperty: 'inboxRetryFor' } as const;

/** The other properties a delayed copy carries (packages/inbox/src/delayedRetry.ts RETRY_PROPERTIES). */
export const RETRY_PROPERTIES = {
  of: 'inboxRetryOf',
  for: RETRY_COPIES.forProperty,
  attempt: 'inboxRetryAttempt',
  subject: 'inboxRetrySubject',
} as const;

export const RETRY_SUBJECT: string = RETRY_COPIES.subject;
