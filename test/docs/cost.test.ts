// The cost tables of infra/README.md ("Cost"): every cost is its price times its quantity, every total
// the sum of its rows, and the README's summary quotes those totals. Prices themselves can only be
// checked against the price pages the section links; the arithmetic cannot go stale unnoticed.

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import { PRICES } from '@idempotent-consumers/devkit/internal/tools/cost/prices';

interface Row {
  item: string;
  price: string;
  quantity: string;
  cost: number;
}

const infraReadme = readFileSync(path.join(PROJECT_ROOT, 'infra', 'README.md'), 'utf8');
const readme = readFileSync(path.join(PROJECT_ROOT, 'README.md'), 'utf8');
const section = /^## Cost\n([\s\S]*?)(?=^## )/m.exec(infraReadme)?.[1] ?? '';

/** The tables of the section, each a list of rows; the bold row last is its total. */
function tables(): Row[][] {
  return section
    .split(/\n\n/)
    .filter((block) => block.startsWith('| Item'))
    .map((block) =>
      block
        .split('\n')
        .slice(2)
        .map((line) => {
          const [item = '', price = '', quantity = '', cost = ''] = line
            .split('|')
            .slice(1, -1)
            .map((cell) => cell.trim());
          return { item, price, quantity, cost: Number(cost.replace(/\*/g, '')) };
        }),
    );
}

/** A leading number, commas allowed, times a million when the text says so. */
function amount(text: string): number {
  const match = /^([\d,]+(?:\.\d+)?)(?: (per million))?( million)?/.exec(text);
  if (!match) throw new Error(`no number at the start of '${text}'`);
  const value = Number(match[1]!.replace(/,/g, ''));
  if (match[2]) return value / 1_000_000;
  return match[3] ? value * 1_000_000 : value;
}

describe('infra/README.md, "Cost"', () => {
  it('has the two tables: idle per month and per million messages', () => {
    expect(tables().map((rows) => rows.at(-1)?.item)).toEqual([
      '**Idle, per month**',
      '**Per million messages**',
    ]);
  });

  it('computes each cost as its price times its quantity, to the cent', () => {
    for (const rows of tables()) {
      for (const row of rows.slice(0, -1)) {
        const computed = amount(row.price) * amount(row.quantity);

        expect({ item: row.item, cost: row.cost }).toEqual({
          item: row.item,
          cost: Math.round(computed * 100 + 1e-6) / 100,
        });
      }
    }
  });

  it('totals each table, and the README quotes those totals', () => {
    for (const rows of tables()) {
      const total = rows.at(-1)!;
      const sum = rows.slice(0, -1).reduce((sofar, row) => sofar + row.cost, 0);

      expect(total.cost).toBeCloseTo(sum, 2);
      expect(readme).toContain(`$${total.cost.toFixed(2)}`);
    }
  });

  it('counts the timer runs from their schedules (730 hours a month), at 1 s and 2 GB each', () => {
    const source = (file: string): string => readFileSync(path.join(PROJECT_ROOT, file), 'utf8');
    const purge = /schedule: '0 (\S+) \* \* \* \*'/.exec(source('functions/purge-expired-markers.ts'))?.[1];
    const sweeper = /schedule: sweepSchedule\(startupSettings\) \?\? '0 (\S+) \* \* \* \*'/.exec(
      source('src/app.ts'),
    )?.[1];
    const everyMinutes = (field: string | undefined): number =>
      field === '*' ? 1 : Number(/^\*\/(\d+)$/.exec(field ?? '')?.[1] ?? Number.NaN);
    const runs = [purge, sweeper].reduce((sofar, field) => sofar + (730 * 60) / everyMinutes(field), 0);
    const timerRow = tables()[0]!.find((row) => row.item.startsWith('Timer runs'))!;
    const gbSeconds = runs * 1 * 2;

    expect([purge, sweeper]).toEqual(['*/5', '*']);
    expect(timerRow.item).toContain(`${runs.toLocaleString('en-US')} a month`);
    expect(timerRow.item).toContain(`(${gbSeconds.toLocaleString('en-US')} GB-s)`);
    expect(amount(timerRow.quantity)).toBe(gbSeconds - 100_000);
  });

  it('quotes the list prices npm run cost uses (packages/devkit/src/tools/cost/prices.ts)', () => {
    const prices = tables().flatMap((rows) => rows.map((row) => row.price));

    expect(prices).toContain(`${PRICES.cosmosServerlessPerMillionRu.usd} per million RU`);
    expect(prices).toContain(`${PRICES.serviceBusStandardPerMillionOperations.usd.toFixed(2)} per million`);
    expect(prices).toContain(`${PRICES.serviceBusStandardBasePerHour.usd} per hour`);
  });
});
