// The inbox retention bound: the Bicep computes lockDuration x maxDeliveryCount + message TTL +
// resubmit margin as the app does (packages/inbox/src/settings.ts), deploys a retention above it, and refuses
// one at or below it, saying why.

import {
  appSettings,
  azdEnvironment,
  azdParameters,
  describeInfra,
  only,
} from '@idempotent-consumers/devkit/internal/testing/bicep';
import {
  loadSettings,
  parseDurationSeconds,
  retentionBoundSeconds,
} from '@idempotent-consumers/inbox/internal';

describeInfra(
  'inbox retention bound',
  (azd) => ({
    tooShortFromAzdEnvironment: { parameters: azd({ INBOX_RETENTION: 'P7D' }) },
    equalToBound: { parameters: { ...azd(), inboxRetention: 'P21DT10M' } },
    justAboveBound: { parameters: { ...azd(), inboxRetention: 'P21DT11M' } },
    longerMessageTtl: { parameters: { ...azd(), serviceBusMessageTtl: 'P30D' } },
    lockLongerThanServiceBusAllows: { parameters: { ...azd(), serviceBusLockDuration: 'PT6M' } },
    monthsInMessageTtl: { parameters: { ...azd(), serviceBusMessageTtl: 'P1M' } },
  }),
  ({ compiled, defaults, evaluated, refusal }) => {
    // The app's own arithmetic (packages/inbox/src/settings.ts): the Bicep and the app must agree on the bound.
    const durationSeconds = (duration: string): number => parseDurationSeconds(duration, 'duration');
    const bound = (
      lockDuration: string,
      maxDeliveryCount: number,
      messageTtl: string,
      margin: string,
    ): number =>
      retentionBoundSeconds({
        lockDurationSeconds: durationSeconds(lockDuration),
        maxDeliveryCount,
        messageTtlSeconds: durationSeconds(messageTtl),
        resubmitMarginSeconds: durationSeconds(margin),
      });

    it('computes lockDuration x maxDeliveryCount + message TTL + resubmit margin from main.parameters.json', () => {
      const parameters = azdParameters(compiled().template, azdEnvironment);
      const expected = bound(
        String(parameters['serviceBusLockDuration']),
        Number(parameters['serviceBusMaxDeliveryCount']),
        String(parameters['serviceBusMessageTtl']),
        String(parameters['inboxResubmitMargin']),
      );

      expect(defaults().outputs['INBOX_RETENTION_BOUND_SECONDS']).toBe(expected);
      expect(expected).toBe(60 * 10 + 14 * 86_400 + 7 * 86_400);
    });

    it('holds for the retention deployed by default', () => {
      const deployed = String(defaults().outputs['INBOX_RETENTION_DEPLOYED']);

      expect(durationSeconds(deployed)).toBeGreaterThan(
        Number(defaults().outputs['INBOX_RETENTION_BOUND_SECONDS']),
      );
      expect(appSettings(defaults())['INBOX_RETENTION']).toBe(deployed);
      expect(only(defaults(), 'Microsoft.Resources/resourceGroups').tags?.['inbox-retention']).toBe(deployed);
    });

    it('deploys settings the app accepts at start-up', () => {
      const settings = appSettings(defaults());

      const loaded = loadSettings({
        COSMOS_ENDPOINT: 'https://account.documents.azure.com:443/',
        INBOX_RETENTION: String(settings['INBOX_RETENTION']),
        INBOX_RESUBMIT_MARGIN: String(settings['INBOX_RESUBMIT_MARGIN']),
        SERVICEBUS_LOCK_DURATION: String(settings['SERVICEBUS_LOCK_DURATION']),
        SERVICEBUS_MAX_DELIVERY_COUNT: String(settings['SERVICEBUS_MAX_DELIVERY_COUNT']),
        SERVICEBUS_MESSAGE_TTL: String(settings['SERVICEBUS_MESSAGE_TTL']),
        PURGE_MAX_RU_PER_SECOND: String(settings['PURGE_MAX_RU_PER_SECOND']),
      });

      expect(loaded.inbox.retentionSeconds).toBe(durationSeconds(String(settings['INBOX_RETENTION'])));
      expect(loaded.purge.maxRequestUnitsPerSecond).toBe(Number(settings['PURGE_MAX_RU_PER_SECOND']));
    });

    it('refuses a too-short INBOX_RETENTION set in the azd environment, saying why', () => {
      expect(refusal('tooShortFromAzdEnvironment')).toContain(
        'inboxRetention (INBOX_RETENTION) P7D = 604800 s is too short: it must exceed lockDuration x maxDeliveryCount + message TTL + resubmit margin = PT1M x 10 + P14D + P7D = 1815000 s',
      );
    });

    it('refuses a retention equal to the bound and accepts one a minute longer', () => {
      expect(refusal('equalToBound')).toContain(
        'inboxRetention (INBOX_RETENTION) P21DT10M = 1815000 s is too short',
      );
      expect(refusal('justAboveBound')).toBeUndefined();
      expect(appSettings(evaluated('justAboveBound'))['INBOX_RETENTION']).toBe('P21DT11M');
    });

    it('raises the default retention with the message TTL', () => {
      const { outputs } = evaluated('longerMessageTtl');
      const expectedBound = bound('PT1M', 10, 'P30D', 'P7D');
      const deployed = String(outputs['INBOX_RETENTION_DEPLOYED']);

      expect(outputs['INBOX_RETENTION_BOUND_SECONDS']).toBe(expectedBound);
      expect(deployed).toBe(`P${Math.floor(expectedBound / 86_400) + 1}D`);
      expect(durationSeconds(deployed)).toBeGreaterThan(expectedBound);
    });

    it('refuses durations in months or years, which have no fixed length', () => {
      expect(refusal('monthsInMessageTtl')).toContain(
        'P1M: write durations in weeks, days, hours, minutes or seconds (years and months have no fixed length)',
      );
    });

    it('refuses a lock duration above the Service Bus maximum of PT5M', () => {
      expect(refusal('lockLongerThanServiceBusAllows')).toContain(
        'serviceBusLockDuration (SERVICEBUS_LOCK_DURATION) PT6M is 360 s',
      );
    });
  },
);
