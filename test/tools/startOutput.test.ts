import { LiveOutput } from '../../tools/start/output';

describe("npm start's output", () => {
  it('says when no subscription takes a message, and counts it in the totals once there is one', async () => {
    const lines: string[] = [];
    const output = new LiveOutput(
      (line) => lines.push(line),
      () => Promise.resolve('inbox markers 0'),
      'PT1H',
    );

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
      /^\d\d:\d\d:\d\d business-events: no subscription takes messageId=w-1 \(subject WidgetCounted\); Service Bus accepted it and dropped it\. .*Restart npm start/,
    );
    expect(lines[2]).toMatch(/totals: 0 deliveries: .*taken by no subscription 1 \| inbox markers 0$/);
  });
});
