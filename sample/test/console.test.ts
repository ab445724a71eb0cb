// The console's walkthrough in a real browser: `npm start` as a user runs it (its own process group,
// free ports, a short duplicate window), the address with its token read from what it printed, and
// headless Chromium (Debian's package, driven by playwright-core) doing what a newcomer does on the
// page: send an event after confirming what will be sent, see it processed, send it again and see
// the duplicate, send a poison message and see it dead-lettered with its reason, resubmit it after
// confirming what will happen, open the business document. With CONSOLE_SCREENSHOTS=<folder> (docs/console.md: docs/images) it also saves
// the main views there.

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import { StartedApp, userEnvironment } from '@idempotent-consumers/devkit/internal/testing/npmStart';
import type { Browser, Page } from 'playwright-core';

import { CHROMIUM, launchBrowser, warnWhenNoBrowser } from '../../test/support/browser';

const work = mkdtempSync(join(tmpdir(), 'console-'));
const SCREENSHOTS = process.env['CONSOLE_SCREENSHOTS'];
const WAIT = { timeout: 20_000 };
const SUBSCRIPTION = 'billing.payment-applier';
const POISON_BODY = 'PAY-3 paid 5 EUR, not JSON';

// Each step waits for what the page shows (WAIT); resubmit waits for the duplicate window too.
jest.setTimeout(90_000);
warnWhenNoBrowser('sample/test/console.test.ts', 'run the console walkthrough in a real browser');
const whenBrowser = CHROMIUM === undefined ? describe.skip : describe;

whenBrowser('the console of npm start, in headless Chromium', () => {
  let app: StartedApp;
  let browser: Browser;
  let page: Page;
  let address: string;

  beforeAll(async () => {
    app = new StartedApp(
      'npm',
      [
        'start',
        '--',
        '--cosmos-port',
        '0',
        '--servicebus-port',
        '0',
        '--console-port',
        '0',
        '--duplicate-window',
        'PT20S',
        '--app',
        join(work, 'app'),
        '--no-watch',
      ],
      { cwd: PROJECT_ROOT, env: userEnvironment(join(work, 'local-run.json')) },
    );
    await app.shown(/Ready\. Press Ctrl\+C to stop\./, 0, 180_000);
    address = /^Console: (http:\/\/127\.0\.0\.1:\d+\/#token=[\w-]+) /m.exec(app.output)![1]!;
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    if (app !== undefined) {
      await app.interrupt().catch(() => app.kill());
      // Nothing of a message's content reaches npm start's output: length and hash only.
      expect(app.output).not.toContain(POISON_BODY);
    }
    rmSync(work, { recursive: true, force: true });
  }, 60_000);

  async function capture(name: string): Promise<void> {
    if (SCREENSHOTS === undefined) return;
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, `console-${name}.png`) });
  }

  /** The feed's newest row for a MessageId with an outcome, once it comes. */
  function feedRow(messageId: string, outcome: string) {
    return page.locator(`#feed-rows tr[data-message-id="${messageId}"][data-outcome="${outcome}"]`).first();
  }

  async function openSendForm(): Promise<void> {
    await page.click('#open-send');
    await page.waitForSelector('#send-subject', WAIT);
    await page.selectOption('#send-subject', 'PaymentReceived');
  }

  async function fillPayment(paymentId: string): Promise<void> {
    await page.fill('input[name="paymentId"]', paymentId);
    await page.fill('input[name="invoiceId"]', 'INV-1');
    await page.fill('input[name="amount"]', '12.50');
    await page.selectOption('select[name="currency"]', { label: 'EUR' });
  }

  /** Asks to send what the form holds; resolves to what the dialog says would be sent. */
  async function planSend(): Promise<string[]> {
    await page.click('#send');
    await page.waitForSelector('#confirm[open]', WAIT);
    return page.locator('#confirm-lines li').allTextContents();
  }

  /** Sends what the form holds, confirming the plan; resolves to the lines of the plan. */
  async function send(): Promise<string[]> {
    const lines = await planSend();
    await page.click('#confirm-ok');
    await page.waitForSelector('#send-result li', WAIT);
    return lines;
  }

  async function sendPayment(): Promise<string[]> {
    await fillPayment('PAY-1');
    return send();
  }

  test('opens with the token from the address, then drops it from the address bar', async () => {
    await page.goto(address);
    await page.waitForSelector(`[data-subscription="${SUBSCRIPTION}"]`, WAIT);
    expect(page.url()).not.toContain('token');
    expect(await page.textContent('#mode')).toBe('actions on');
    expect(await page.textContent(`[data-counts="${SUBSCRIPTION}"]`)).toBe(
      '0 active · 0 in flight · 0 dead-lettered',
    );
  });

  test('a send asks first, says what would be sent, and sends nothing when cancelled', async () => {
    await openSendForm();
    await fillPayment('PAY-9');
    const lines = await planSend();
    expect(lines[0]).toBe(
      'would send PaymentReceived messageId=payment-PAY-9 (derived from the event) to business-events',
    );
    expect(lines[1]).toMatch(/^ {2}body: \d+ bytes, sha256 [0-9a-f]{12}$/);
    expect(lines.slice(2)).toEqual([
      `  taken by the filters of ${SUBSCRIPTION}`,
      `  ${SUBSCRIPTION} accepts it`,
    ]);
    expect(await page.textContent('#confirm-question')).toBe('Confirm to send it.');
    await page.click('#confirm-cancel');
    expect(await page.textContent('#status')).toBe('Cancelled: nothing was sent.');
    expect(await page.textContent('#send-result')).toBe('');
  });

  test('sends an event from the form built from its schema once confirmed, and the feed shows it processed', async () => {
    await sendPayment();
    expect(await page.textContent('#send-result')).toMatch(
      /^Sent PaymentReceived messageId=payment-PAY-1 to business-events \(trace [0-9a-f]{32}\)\.$/,
    );
    // No invoice INV-1 yet: the applier keeps the payment as unapplied, its alternative effect.
    const row = feedRow('payment-PAY-1', 'alternative');
    await row.waitFor(WAIT);
    expect(await row.textContent()).toContain('unapplied-payment');
    await capture('feed');
  });

  test('a form the schema refuses says why, with nothing to confirm, and sends nothing', async () => {
    await page.fill('input[name="amount"]', '-5');
    await page.click('#send');
    await page.waitForSelector('#send-result pre.problem', WAIT);
    expect(await page.isVisible('#confirm')).toBe(false);
    expect(await page.textContent('#send-result')).toMatch(
      /^The form: invalid event:\n {2}- amount: must be at least 0\.01/,
    );
  });

  test('the same event again within the window: Service Bus drops it as a duplicate', async () => {
    await page.fill('input[name="amount"]', '12.50');
    await send();
    await feedRow('payment-PAY-1', 'dropped-as-duplicate').waitFor(WAIT);
    // The send cancelled earlier never reached the broker.
    expect(await page.locator('#feed-rows tr[data-message-id="payment-PAY-9"]').count()).toBe(0);
  });

  test('a poison message is dead-lettered with its reason, and its body shows only on request', async () => {
    await page.click('#send-form-more summary');
    await page.fill('#send-raw', POISON_BODY);
    await page.check('#send-allow-invalid');
    const lines = await send();
    expect(lines.slice(3)).toEqual([
      `  ${SUBSCRIPTION} refuses it: body: not JSON`,
      '  sent although refused (the box "send it even if its consumers refuse it"): a poison message, on purpose. The host retries it until ' +
        'maxDeliveryCount, then Service Bus dead-letters it.',
    ]);
    const messageId = /messageId=(\S+) /.exec((await page.textContent('#send-result')) ?? '')![1]!;
    const row = feedRow(messageId, 'dead-lettered');
    await row.waitFor(WAIT);
    expect(await row.textContent()).toContain('MaxDeliveryCountExceeded');
    await row.click();
    await page.waitForSelector('#show-body', WAIT);
    expect(await page.textContent('#detail')).not.toContain(POISON_BODY);
    await page.click('#show-body');
    await page.waitForSelector('#detail .body pre', WAIT);
    expect(await page.textContent('#detail .body pre')).toBe(POISON_BODY);
    expect(await page.textContent('#detail .body p')).toBe(`${Buffer.byteLength(POISON_BODY)} bytes`);
  });

  test('the dead-letter queue shows the verdicts of npm run dead-letters list', async () => {
    await page.click(`[data-subscription="${SUBSCRIPTION}"]`);
    await page.click('#open-dead-letters');
    await page.waitForSelector('table.dead-letters tbody tr', WAIT);
    const row = page.locator('table.dead-letters tbody tr').first();
    // Its consumer noted why it could not read it: poison, which resubmit skips without include poison.
    expect(await row.locator('td.inbox').textContent()).toMatch(/^poison \(/);
    // The page speaks of its own controls, never of the command's flags.
    expect(await page.textContent('ul.legend')).toContain('without the box "include poison"');
    expect(await page.textContent('#detail')).not.toMatch(/--[a-z]/);
    expect(await page.textContent('ul.legend')).toContain(
      'resubmittable from: enqueued + the duplicate window (PT20S)',
    );
  });

  test('resubmit asks first, says what will happen, and does nothing when cancelled', async () => {
    const row = page.locator('table.dead-letters tbody tr').first();
    await row.locator('input[type="checkbox"]').check();
    await page.click('#dl-resubmit');
    await page.waitForSelector('#confirm[open]', WAIT);
    // Without include poison: refused, and nothing to confirm.
    expect(await page.textContent('#confirm-lines')).toMatch(/^refused #\d+ .*poison/);
    expect(await page.isDisabled('#confirm-ok')).toBe(true);
    await page.click('#confirm-cancel');
    expect(await page.textContent('#status')).toBe('Cancelled: nothing was done.');
    expect(await page.locator('table.dead-letters tbody tr').count()).toBe(1);
  });

  test('resubmit with include poison, once the duplicate window has passed, after confirming', async () => {
    const row = page.locator('table.dead-letters tbody tr').first();
    const sequence = (await row.getAttribute('data-sequence'))!;
    const messageId = (await row.getAttribute('data-message-id'))!;
    const from = Date.parse((await row.locator('td.resubmittable').getAttribute('data-at'))!);
    // Sent now, the broker would drop the copy: the window is the broker's, not a timing assert.
    await page.waitForTimeout(Math.max(0, from - Date.now() + 500));
    await row.locator('input[type="checkbox"]').check();
    await page.check('#dl-include-poison');
    await page.click('#dl-resubmit');
    await page.waitForSelector('#confirm[open]', WAIT);
    expect(await page.textContent('#confirm-lines')).toContain(`would resubmit #${sequence}`);
    await capture('confirm');
    const deadLettered = `#feed-rows tr[data-message-id="${messageId}"][data-outcome="dead-lettered"]`;
    expect(await page.locator(deadLettered).count()).toBe(1);
    await page.click('#confirm-ok');
    await page.waitForSelector('#action-result .summary', WAIT);
    expect(await page.textContent('#action-result')).toContain(`resubmitted #${sequence}`);
    // The copy is delivered again and, still not JSON, dead-lettered again.
    await page.waitForFunction(
      (selector) =>
        (
          globalThis as unknown as { document: { querySelectorAll(s: string): { length: number } } }
        ).document.querySelectorAll(selector).length === 2,
      deadLettered,
      WAIT,
    );
  });

  test('after the window, the inbox absorbs a repeat: a duplicate with its cause', async () => {
    await openSendForm();
    await sendPayment();
    const row = feedRow('payment-PAY-1', 'duplicate');
    await row.waitFor(WAIT);
    expect(await row.locator('td.detail').textContent()).not.toBe('');
  });

  test('opens the business document the first delivery wrote, in its partition', async () => {
    await feedRow('payment-PAY-1', 'alternative').click();
    await page.waitForSelector('#detail .wrote button', WAIT);
    expect(await page.textContent('#detail h3')).toBe('Wrote partition invoice:INV-1');
    await page.locator('#detail .wrote li button').first().click();
    await page.waitForSelector('#detail pre.document', WAIT);
    const document = JSON.parse((await page.textContent('#detail pre.document'))!) as Record<string, unknown>;
    expect(document).toMatchObject({ id: 'unapplied:PAY-1', partitionKey: 'invoice:INV-1' });
  });

  test("the consumer's inbox: its marker, and the partition the marker shares with the business state", async () => {
    await page.click(`[data-subscription="${SUBSCRIPTION}"]`);
    await page.waitForSelector('#detail dl', WAIT);
    expect(await page.textContent('#detail dl')).toContain('inbox markers1');
    await page.locator('#detail .partitions button', { hasText: 'invoice:INV-1' }).first().click();
    await page.waitForSelector('#detail .documents li', WAIT);
    const kinds = await page.locator('#detail .documents li').allTextContents();
    expect(kinds.some((text) => text.endsWith('inbox-marker'))).toBe(true);
    expect(kinds.some((text) => text.startsWith('unapplied:PAY-1'))).toBe(true);
    await capture('consumer');
  });

  // Issue 44: at each width a newcomer's screen may have, no label of the pipeline sits on another
  // label or on a box not its own, and the feed (its rows: a redelivered copy, a duplicate, a poison
  // message's deliveries in one row) fits its column with each MessageId on one line.
  test.each([1024, 1400, 1920])(
    'reads well at %i px: no label on another, the feed in its column',
    async (width) => {
      await page.setViewportSize({ width, height: 1000 });
      const clashes = await page.evaluate(() => {
        type Box = { left: number; right: number; top: number; bottom: number };
        const doc = (
          globalThis as unknown as { document: { querySelectorAll(s: string): ArrayLike<Element> } }
        ).document;
        type Element = {
          getBoundingClientRect(): Box;
          closest(s: string): unknown;
          textContent: string | null;
        };
        const texts = Array.from(doc.querySelectorAll('#topology svg text'));
        const rects = Array.from(doc.querySelectorAll('#topology svg rect'));
        const meet = (a: Box, b: Box): boolean =>
          a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
        const found: string[] = [];
        texts.forEach((text, index) => {
          const box = text.getBoundingClientRect();
          for (const other of texts.slice(index + 1))
            if (meet(box, other.getBoundingClientRect()))
              found.push(`${text.textContent} | ${other.textContent}`);
          for (const rect of rects)
            if (rect.closest('g') !== text.closest('g') && meet(box, rect.getBoundingClientRect()))
              found.push(`${text.textContent} | a box`);
        });
        return found;
      });
      const feed = await page.evaluate(() => {
        const doc = (
          globalThis as unknown as {
            document: {
              querySelector(s: string): { scrollWidth: number; clientWidth: number };
              querySelectorAll(s: string): ArrayLike<{
                getClientRects(): ArrayLike<unknown>;
                scrollWidth: number;
                clientWidth: number;
              }>;
            };
          }
        ).document;
        const section = doc.querySelector('#feed');
        const ids = Array.from(doc.querySelectorAll('#feed-rows td.id'));
        return {
          overflows: section.scrollWidth > section.clientWidth + 1,
          clippedIds: ids.filter((cell) => cell.scrollWidth > cell.clientWidth + 1).length,
        };
      });
      await page.setViewportSize({ width: 1400, height: 1000 });

      expect(clashes).toEqual([]);
      expect(feed).toEqual({ overflows: false, clippedIds: 0 });
    },
  );

  test("a poison message's deliveries are one row, which opens to each", async () => {
    const row = page.locator('#feed-rows tr[data-outcome="dead-lettered"]').first();
    expect(Number(await row.getAttribute('data-events'))).toBeGreaterThan(2);
    expect(await row.textContent()).toMatch(/dead-lettered after \d+ deliveries/);
    const messageId = (await row.getAttribute('data-message-id'))!;
    const opened = `#feed-rows tr.delivery[data-message-id="${messageId}"]`;
    const before = await page.locator(opened).count();
    await row.click();
    expect(await page.locator(opened).count()).toBeGreaterThan(before);
    // Its id, shortened in the row, whole in its title.
    expect(await row.locator('td.id').getAttribute('title')).toBe(messageId);
  });

  test('discard asks first, and removes the dead letter for good', async () => {
    await page.click(`[data-subscription="${SUBSCRIPTION}"]`);
    await page.click('#open-dead-letters');
    await page.waitForSelector('table.dead-letters tbody tr', WAIT);
    const row = page.locator('table.dead-letters tbody tr').first();
    await row.locator('input[type="checkbox"]').check();
    await page.click('#dl-discard');
    await page.waitForSelector('#confirm[open]', WAIT);
    expect(await page.textContent('#confirm-lines')).toMatch(/^would discard #\d+ .*poison/);
    await page.click('#confirm-ok');
    await page.waitForSelector('#action-result .summary', WAIT);
    expect(await page.textContent('#action-result .summary')).toMatch(
      /^Discarded 1, refused 0, not found 0, failed 0, not received 0; /,
    );
    expect(await page.textContent('#detail')).toContain('The dead-letter queue is empty.');
  });
});
