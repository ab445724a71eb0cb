import {
  loadSettings,
  longestRetryDelaySeconds,
  resolvedPolicy,
  SettingsError,
} from '@idempotent-consumers/inbox/internal';

import { checkDelayedRetry } from '../../src/app';

/**
 * What the app refuses at start (src/app.ts, as the function files load it): settings the
 * library's checks refuse, and a subscription's delayedRetry that its settings cannot carry.
 */
describe('start-up', () => {
  const loadApp = (env: Record<string, string>): unknown => {
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      let error: unknown;
      jest.isolateModules(() => {
        try {
          // eslint-disable-next-line @typescript-eslint/no-require-imports -- loads the function fresh, as the host would
          require('../../functions/purge-expired-markers');
        } catch (caught) {
          error = caught;
        }
      });
      return error;
    } finally {
      process.env = saved;
    }
  };

  it('refuses to load the functions with an unsafe retention', () => {
    const error = loadApp({ INBOX_RETENTION: 'P1D' });

    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toBe('SettingsError');
    expect((error as Error).message).toContain('INBOX_RETENTION=P1D does not exceed');
  });

  it('loads them with safe settings', () => {
    expect(loadApp({ INBOX_RETENTION: 'P60D' })).toBeUndefined();
  });
});

describe('delayedRetry at start', () => {
  it('is refused at start when the settings cannot carry it: no delivery left to schedule from, or a retention the longest delay outlives', () => {
    const settings = (env: Record<string, string> = {}) => loadSettings({ ...BASE_ENV, ...env });
    expect(() => checkDelayedRetry('a.b', { attempts: 2, firstDelaySeconds: 30 }, settings())).not.toThrow();
    expect(() =>
      checkDelayedRetry(
        'a.b',
        { attempts: 2, firstDelaySeconds: 30, afterDeliveries: 3 },
        settings({ SERVICEBUS_MAX_DELIVERY_COUNT: '3' }),
      ),
    ).toThrow(
      "src/topology.json: subscription 'a.b': delayedRetry.afterDeliveries must be a whole number from 1 to 2 (SERVICEBUS_MAX_DELIVERY_COUNT=3)",
    );
    // The bound: 1 min × 10 + 14 days + 7 days; an hour's delay (× 1.1 jitter) on top needs more than 21 days 1 h 16 min.
    const bound = 60 * 10 + 21 * 86_400;
    const longest = longestRetryDelaySeconds(resolvedPolicy({ attempts: 1, firstDelaySeconds: 3600 }));
    expect(longest).toBeCloseTo(3960);
    const atBound = `PT${bound + 3960}S`;
    let refusal: unknown;
    try {
      checkDelayedRetry(
        'a.b',
        { attempts: 1, firstDelaySeconds: 3600 },
        settings({ INBOX_RETENTION: atBound }),
      );
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(SettingsError);
    expect((refusal as SettingsError).problems[0]).toMatch(
      /^INBOX_RETENTION=.* does not outlive subscription 'a\.b''s delayed retries: .* Raise INBOX_RETENTION above .*, or shorten maxDelaySeconds\.$/,
    );
    expect(() =>
      checkDelayedRetry(
        'a.b',
        { attempts: 1, firstDelaySeconds: 3600 },
        settings({ INBOX_RETENTION: `PT${bound + 3961}S` }),
      ),
    ).not.toThrow();
  });
});

const BASE_ENV = {
  COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/',
  SERVICEBUS_LOCK_DURATION: 'PT1M',
  SERVICEBUS_MAX_DELIVERY_COUNT: '10',
  SERVICEBUS_MESSAGE_TTL: 'P14D',
  INBOX_RESUBMIT_MARGIN: 'P7D',
  INBOX_RETENTION: 'P30D',
};
