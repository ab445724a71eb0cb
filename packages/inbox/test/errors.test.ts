import {
  bounded,
  ConcurrencyConflictError,
  InboxError,
  PoisonMessageError,
  SettingsError,
  TransientStoreError,
} from '@idempotent-consumers/inbox/internal';

import { storeStatusOf } from '../src/errors';

describe('the error family', () => {
  it('names each error after its class, which the logs and the host show', () => {
    const errors = [
      new InboxError('a'),
      new TransientStoreError('b', 503),
      new ConcurrencyConflictError('c'),
      new PoisonMessageError('rejected-by-handler', 'd'),
      new SettingsError(['e']),
    ];

    expect(errors.map((error) => error.name)).toEqual([
      'InboxError',
      'TransientStoreError',
      'ConcurrencyConflictError',
      'PoisonMessageError',
      'SettingsError',
    ]);
    expect(errors.every((error) => error instanceof InboxError)).toBe(true);
  });

  it('lists every setting problem on a line of its own', () => {
    const error = new SettingsError(['A is missing', 'B is too long']);

    expect(error.message).toBe('Invalid configuration:\n  - A is missing\n  - B is too long');
    expect(error.problems).toEqual(['A is missing', 'B is too long']);
  });
});

describe('bounded', () => {
  it('keeps a text of exactly the limit whole, and cuts one character longer, saying how long it was', () => {
    expect(bounded('x'.repeat(10), 10)).toBe('x'.repeat(10));
    expect(bounded('x'.repeat(11), 10)).toBe(`${'x'.repeat(10)}…(11 characters)`);
  });

  it('keeps line breaks unless asked for one line, and cuts within the limit when compact', () => {
    expect(bounded('a\nb')).toBe('a\nb');
    expect(bounded('a\n\tb', 100, { oneLine: true })).toBe('a b');
    expect(bounded('x'.repeat(11), 10, { compact: true })).toBe(`${'x'.repeat(9)}…`);
  });
});

describe('storeStatusOf', () => {
  it('reads the status of a Cosmos DB error, and nothing from anything else', () => {
    expect(storeStatusOf(Object.assign(new Error('throttled'), { code: 429 }))).toBe(429);
    expect(storeStatusOf(Object.assign(new Error('reset'), { code: 'ECONNRESET' }))).toBeUndefined();
    expect(storeStatusOf(null)).toBeUndefined();
    expect(storeStatusOf(undefined)).toBeUndefined();
    expect(storeStatusOf('a string')).toBeUndefined();
  });
});
