import { existsSync } from 'node:fs';
import path from 'node:path';

import { Linter } from 'eslint';
import simpleImportSort from 'eslint-plugin-simple-import-sort';
import { parser } from 'typescript-eslint';

import { UsageError } from '../../src/cli/errors';
import { PROJECT_ROOT } from '../../src/cli/project';
import {
  checkedRequest,
  consumerFiles,
  type ConsumerRequest,
  generatedFiles,
  withoutSubscription,
  withSubscription,
} from '../../src/tools/newConsumer';

/** The refusals of npm run new:consumer, before anything is written (test/scaffold runs the tool itself). */
const declared = {
  topics: [{ name: 'orders', subscriptions: [{ name: 'sales.order-taker', subjects: ['OrderPlaced'] }] }],
};
/**
 * The consumer these refusals are asked for: tools/README's example, or, when the project has files
 * by its name (a user who ran the example), the first of `-2`, `-3`... that it has not: new:consumer
 * refuses a name whose files exist, whatever the declaration.
 */
const unusedName = (wanted: string): string => {
  for (let n = 1; ; n++) {
    const name = n === 1 ? wanted : `${wanted}-${n}`;
    if (!Object.values(consumerFiles(name)).some((file) => existsSync(file))) return name;
  }
};
const request = { name: unusedName('shipping.parcel-counter'), topic: 'shipping', subject: 'ParcelShipped' };
const refusal = (values: Record<string, string>): string => {
  try {
    checkedRequest(values, declared);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message.split('\nUsage:')[0] ?? '';
  }
  throw new Error('not refused');
};

describe('new:consumer refuses', () => {
  it.each([
    ['a name without an area', { name: 'counter' }, /--name "counter" is not a consumer name/],
    ['upper case', { name: 'Shipping.Counter' }, /is not a consumer name/],
    ['a name longer than a subscription name may be', { name: `a.${'b'.repeat(49)}` }, /3 to 50 characters/],
    [
      'a topic Service Bus refuses',
      { topic: 'orders/eu' },
      /--topic "orders\/eu" is not a Service Bus topic name/,
    ],
    ['a subject that is not an event name', { subject: 'parcel shipped' }, /--subject "parcel shipped"/],
    ['an unknown kind', { kind: 'saga' }, /--kind "saga": inbox or versioned/],
    ['a declared consumer', { name: 'sales.order-taker' }, /already declares it, on the topic orders/],
    [
      'a name whose function is taken',
      { name: 'sales-order.taker' },
      /its function, sales-order-taker, is already sales.order-taker's/,
    ],
  ])('%s', (_case, change, message) => {
    expect(refusal({ ...request, ...change })).toMatch(message);
  });

  it.each([
    [
      'a subject another consumer of the topic reads, without --fan-out',
      { topic: 'orders', subject: 'OrderPlaced' },
      /^--subject OrderPlaced: sales\.order-taker already reads it on orders\. .*add --fan-out and --example-body '<json>', and the new consumer takes sales\.order-taker's schema$/,
    ],
    [
      '--fan-out without an example body',
      { topic: 'orders', subject: 'OrderPlaced', 'fan-out': true },
      /^--fan-out needs --example-body '<json>': a OrderPlaced body sales\.order-taker's schema takes/,
    ],
    [
      '--fan-out of a versioned consumer',
      { topic: 'orders', subject: 'OrderPlaced', 'fan-out': true, 'example-body': '{}', kind: 'versioned' },
      /^--fan-out writes an inbox consumer; leave --kind out$/,
    ],
    [
      '--fan-out where no consumer reads the subject',
      { topic: 'orders', subject: 'OrderShipped', 'fan-out': true, 'example-body': '{}' },
      /^--fan-out: no consumer reads OrderShipped on orders; leave --fan-out out$/,
    ],
    ['--example-body alone', { 'example-body': '{}' }, /^--example-body goes with --fan-out$/],
  ])('%s', (_case, change, message) => {
    expect(refusal({ ...request, ...change } as Record<string, string>)).toMatch(message);
  });

  it('takes a subject on another topic, where no one reads it, without --fan-out', () => {
    expect(checkedRequest({ ...request, subject: 'OrderPlaced' }, declared).subject).toBe('OrderPlaced');
  });

  it('missing flags, naming each', () => {
    expect(refusal({ name: request.name })).toBe('Missing --topic, --subject.');
  });

  it('and accepts a new consumer, inbox by default, on a new or an existing topic', () => {
    expect(checkedRequest(request, declared)).toEqual({ ...request, kind: 'inbox' });
    expect(checkedRequest({ ...request, topic: 'orders', kind: 'versioned' }, declared).kind).toBe(
      'versioned',
    );
  });

  it('bounds the echo of a long value', () => {
    expect(refusal({ ...request, subject: 'x'.repeat(5000) }).length).toBeLessThan(300);
  });
});

describe("new:consumer writes imports in the lint's order, whatever the names", () => {
  // Names whose identifiers sort differently against the subject's (the import sort once failed
  // for probe.widget-counter / WidgetCounted and loyalty.points-keeper / PointsEarned).
  const requests: ConsumerRequest[] = [
    { name: 'probe.widget-counter', topic: 'business-events', subject: 'WidgetCounted', kind: 'inbox' },
    { name: 'loyalty.points-keeper', topic: 'business-events', subject: 'PointsEarned', kind: 'inbox' },
    { name: 'shipping.parcel-counter', topic: 'parcel-events', subject: 'ParcelShipped', kind: 'inbox' },
    { name: 'zeta.alpha', topic: 'business-events', subject: 'Aardvark', kind: 'inbox' },
    { name: 'alpha.zeta', topic: 'business-events', subject: 'Zebra2', kind: 'versioned' },
    // Fan-outs of a sample consumer and of one of src/consumers, whose modules sort either side of ../src/app.
    ...(
      [
        ['loyalty.points-keeper', '../sample/src', 'paymentApplier'],
        ['zeta.alpha', '../src/consumers/probe-widget-counter', 'probeWidgetCounter'],
        ['billing.payment-auditor', '../src/consumers/aardvark-zebra', 'aardvarkZebra'],
        ['aa.first', '../src/consumers/zz-last', 'zzLast'],
      ] as const
    ).map(([name, module, identifier]): ConsumerRequest => ({
      name,
      topic: 'business-events',
      subject: 'PaymentReceived',
      kind: 'inbox',
      fanOut: { from: 'billing.payment-applier', identifier, module, example: {} },
    })),
  ];
  // The project's import-sort rules (eslint.config.mjs), run by ESLint's own Linter: the config file
  // itself loads through a dynamic import jest cannot run (the scaffold test runs the whole lint).
  const linter = new Linter({ configType: 'flat' });
  const config: Linter.Config[] = [
    {
      files: ['**/*.ts'],
      languageOptions: { parser },
      plugins: { 'simple-import-sort': simpleImportSort },
      rules: { 'simple-import-sort/imports': 'error', 'simple-import-sort/exports': 'error' },
    },
  ];

  it.each(requests)('$name ($kind, $subject)', async (request) => {
    const problems: string[] = [];
    // Unformatted: prettier loads through a dynamic import jest cannot run; the order of imports,
    // what failed, does not depend on formatting (the scaffold test lints the formatted files).
    for (const [file, text] of await generatedFiles(request, (_file, text) => Promise.resolve(text))) {
      if (!file.endsWith('.ts')) continue;
      for (const message of linter.verify(text, config, file)) {
        problems.push(
          `${path.relative(PROJECT_ROOT, file)}:${message.line} ${message.ruleId ?? ''} ${message.message}`,
        );
      }
    }

    expect(problems).toEqual([]);
  });
});

describe('new:consumer --remove undoes what it declared', () => {
  const sample = {
    topics: [
      {
        name: 'business-events',
        publishers: ['inventory.stock-reserver'],
        subscriptions: [{ name: 'inventory.stock-reserver', subjects: ['OrderCreated'] }],
      },
      {
        name: 'shipping-events',
        publishers: ['inventory.stock-reserver'],
        unsubscribedSubjects: ['ShipmentPlanned'],
        subscriptions: [],
      },
    ],
  };

  it.each([
    ['on a new topic, which goes with it', 'parcel-events', 'ParcelShipped', undefined],
    ['on an existing topic', 'business-events', 'ParcelShipped', undefined],
    [
      "of a subject the topic's publishers send, which is unsubscribed again",
      'shipping-events',
      'ShipmentPlanned',
      'ShipmentPlanned',
    ],
  ])('a consumer %s', (_case, topic, subject, putBack) => {
    const added = withSubscription(sample, { name: 'shipping.notifier', topic, subject, kind: 'inbox' });

    expect(withoutSubscription(added, 'shipping.notifier', putBack)).toEqual(sample);
    expect(JSON.stringify(withoutSubscription(added, 'shipping.notifier', putBack))).toBe(
      JSON.stringify(sample),
    );
  });

  it('says in the source when it took an unsubscribed subject, and only then', async () => {
    const request = { name: 'shipping.notifier', topic: 'shipping-events', subject: 'ShipmentPlanned' };
    const source = async (wasUnsubscribed: boolean): Promise<string> =>
      (
        await generatedFiles({ ...request, kind: 'inbox', wasUnsubscribed }, (_file, text) =>
          Promise.resolve(text),
        )
      )[0]![1];

    expect(await source(true)).toContain('new:consumer -- --remove puts it back');
    expect(await source(false)).not.toContain('--remove');
  });
});
