import { type TimerRunReport } from '@idempotent-consumers/local-azure';

import { LiveOutput } from '../../src/tools/start/output';

/** A LiveOutput for a one-hour retention whose lines are recorded, with the store census `census` gives. */
function recorded(
  options?: ConstructorParameters<typeof LiveOutput>[3],
  census: () => string = () => '',
): { output: LiveOutput; lines: string[] } {
  const lines: string[] = [];
  const output = new LiveOutput(
    (line) => lines.push(line),
    () => Promise.resolve(census()),
    'PT1H',
    options,
  );
  return { output, lines };
}

describe("npm start's output", () => {
  it('says when no subscription takes a message, and counts it in the totals once there is one', async () => {
    const { output, lines } = recorded(undefined, () => 'inbox markers 0');

    await output.printTotals();
    output.matchedNoSubscription('business-events', {
      messageId: 'w-1',
      subject: 'WidgetCounted',
      body: '{}',
    });
    output.stop();
    await output.printTotals();

    expect(lines[0]).not.toContain('taken by no subscription');
    expect(lines[1]).toMatch(
      /^\d\d:\d\d:\d\d business-events: no subscription takes messageId=w-1 \(subject WidgetCounted\); Service Bus accepted it and dropped it\. A new consumer .*Restart npm start/,
    );
    expect(lines[2]).toMatch(/totals: 0 deliveries: .*taken by no subscription 1 \| inbox markers 0$/);
  });

  it('gives only the advice that applies: in watch mode, saving the files loads a new subscription', () => {
    const { output, lines } = recorded({ watching: true });

    output.matchedNoSubscription('business-events', {
      messageId: 'w-2',
      subject: 'WidgetCounted',
      body: '{}',
    });
    output.stop();

    expect(lines[0]).toContain(
      'Its subscription loads once its function file and src/topology.json are saved (watch mode).',
    );
    expect(lines[0]).not.toContain('Restart');
  });
});

it('says when a topic declares the subject unsubscribed: dropped on purpose, nothing to restart', () => {
  const { output, lines } = recorded({
    unsubscribed: (topic, subject) => topic === 'shipping-events' && subject === 'ShipmentPlanned',
  });

  output.matchedNoSubscription('shipping-events', {
    messageId: 's-1',
    subject: 'ShipmentPlanned',
    body: '{}',
  });
  output.stop();

  expect(lines[0]?.slice(9)).toBe(
    'shipping-events: no subscription takes messageId=s-1 (subject ShipmentPlanned); Service Bus accepted it and dropped it, on purpose: ShipmentPlanned is among the unsubscribedSubjects of shipping-events (src/topology.json).',
  );
});

describe("npm start's delivery lines", () => {
  const delivered = (texts: string[]) => ({
    function: 'billing-payment-applier',
    messageId: 'p-1',
    deliveryCount: 1,
    sequenceNumber: 7,
    outcome: 'processed',
    settlement: 'completed' as const,
    handlerMs: 12.4,
    logs: texts.map((text) => ({ level: 'debug' as const, category: 'user' as const, text })),
  });

  it('say which business documents a delivery changed, from its debug line', () => {
    const { output, lines } = recorded();

    output.delivery(
      delivered([
        'Wrote {"consumer":"c","partitionKey":"invoice:INV-1","documents":["patch INV-1","create payment-P1"],"count":2}',
      ]),
    );
    output.delivery(
      delivered(['Wrote {"consumer":"c","partitionKey":"p","documents":["create a"],"count":3}']),
    );
    output.delivery(delivered([]));
    output.stop();

    expect(lines.map((line) => line.slice(9))).toEqual([
      'billing-payment-applier #7 delivery 1 messageId=p-1: processed → completed in 12 ms; wrote invoice:INV-1: patch INV-1, create payment-P1',
      'billing-payment-applier #7 delivery 1 messageId=p-1: processed → completed in 12 ms; wrote p: create a, and 2 more',
      'billing-payment-applier #7 delivery 1 messageId=p-1: processed → completed in 12 ms',
    ]);
  });

  it("say a duplicate's cause, as the console and the logs in Azure do", () => {
    const { output, lines } = recorded();

    output.delivery({ ...delivered([]), outcome: 'duplicate', cause: 'redelivery-after-lock-expiry' });
    output.delivery({ ...delivered([]), outcome: 'processed', alternative: 'backorder' });
    output.stop();

    expect(lines.map((line) => line.slice(9))).toEqual([
      'billing-payment-applier #7 delivery 1 messageId=p-1: duplicate (redelivery-after-lock-expiry) → completed in 12 ms',
      'billing-payment-applier #7 delivery 1 messageId=p-1: processed (backorder) → completed in 12 ms',
    ]);
  });

  it('name the trace a delivery ran in, its operation_Id in Application Insights', () => {
    const { output, lines } = recorded();

    output.delivery({ ...delivered([]), traceId: '0af7651916cd43dd8448eb211c80319c' });
    output.stop();

    expect(lines.map((line) => line.slice(9))).toEqual([
      'billing-payment-applier #7 delivery 1 messageId=p-1 trace=0af7651916cd43dd8448eb211c80319c: processed → completed in 12 ms',
    ]);
  });
});

describe("npm start's output stays quiet when nothing happens", () => {
  const run = (
    texts: string[],
    level: 'information' | 'warning' = 'information',
    error?: Error,
  ): TimerRunReport => ({
    function: 'purge-expired-markers',
    runMs: 3,
    result: {
      response: {},
      logs: texts.map((text) => ({ level, category: 'user' as const, text })),
      ...(error ? { error } : {}),
    },
  });

  it('prints a timer run only when it failed, warned, or purged or sent something', () => {
    const { output, lines } = recorded();

    output.timerRun(run(['Purged 0 expired markers {"purged":0}']));
    output.timerRun(run(['Outbox: 0 pending {"sent":0,"pending":0}']));
    output.timerRun(run(['Purged 2 expired markers {"purged":2}']));
    output.timerRun(run(['Resent 1 outbox messages {"sent":1}']));
    output.timerRun(run(['Purged 0 expired markers; 1 remain {"purged":0}'], 'warning'));
    output.timerRun(run([], 'information', new Error('Cosmos DB failed')));
    output.stop();

    expect(lines.map((line) => line.slice(9))).toEqual([
      'purge-expired-markers (timer) ran: Purged 2 expired markers {"purged":2} in 3 ms',
      'purge-expired-markers (timer) ran: Resent 1 outbox messages {"sent":1} in 3 ms',
      'purge-expired-markers (timer) ran: Purged 0 expired markers; 1 remain {"purged":0} in 3 ms',
      'purge-expired-markers (timer) failed (Error: Cosmos DB failed) in 3 ms',
    ]);
    expect(output.totals.timerRuns).toBe(6);
  });

  it('prints the totals once things go quiet only when they changed, and always on Ctrl+C', async () => {
    let census = 'inbox markers 0';
    const { output, lines } = recorded(undefined, () => census);

    await output.printTotals({ always: false });
    await output.printTotals({ always: false });
    census = 'inbox markers 1';
    await output.printTotals({ always: false });
    await output.printTotals();

    expect(lines.map((line) => line.replace(/^.* \| /, ''))).toEqual([
      'inbox markers 0',
      'inbox markers 1',
      'inbox markers 1',
    ]);
  });
});
