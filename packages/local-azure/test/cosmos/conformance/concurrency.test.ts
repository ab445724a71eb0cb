import { type Container } from '@azure/cosmos';

import { statusOf, useTarget } from '../../support/conformanceTarget';

const target = useTarget();
let container: Container;
beforeAll(async () => {
  container = await target.container();
});

describe('concurrency on one partition key', () => {
  it('many concurrent batches, some conflicting: the end state matches a serial order', async () => {
    // 60 batches race; each claims marker m-(i % 12) and adds i to the total. Serially, exactly one
    // batch per marker wins, so the total must be the sum over the winners, and only the winners.
    await container.items.create({ id: 'total', pk: 'hot', sum: 0, count: 0 });
    const attempts = Array.from({ length: 60 }, (_, i) => ({ i, marker: `m-${i % 12}` }));

    const outcomes = await Promise.all(
      attempts.map(({ i, marker }) =>
        container.items
          .batch(
            [
              { operationType: 'Create', resourceBody: { id: marker, pk: 'hot', claimedBy: i } },
              {
                operationType: 'Patch',
                id: 'total',
                resourceBody: {
                  operations: [
                    { op: 'incr', path: '/sum', value: i },
                    { op: 'incr', path: '/count', value: 1 },
                  ],
                },
              },
            ],
            'hot',
          )
          .then((response) => ({
            i,
            marker,
            code: response.code,
            statuses: response.result?.map((r) => r.statusCode),
          })),
      ),
    );

    const winners = outcomes.filter((outcome) => outcome.code === 200);
    const losers = outcomes.filter((outcome) => outcome.code !== 200);
    const { resource: total } = await container.item('total', 'hot').read<{ sum: number; count: number }>();
    const { resources: markers } = await container.items
      .query<{ id: string; claimedBy: number }>(
        'SELECT c.id, c.claimedBy FROM c WHERE STARTSWITH(c.id, "m-")',
        { partitionKey: 'hot' },
      )
      .fetchAll();

    expect(winners).toHaveLength(12);
    expect(new Set(winners.map((w) => w.marker)).size).toBe(12);
    expect(losers.every((l) => l.code === 207 && l.statuses?.[0] === 409 && l.statuses[1] === 424)).toBe(
      true,
    );
    expect(total).toMatchObject({ count: 12, sum: winners.reduce((sum, w) => sum + w.i, 0) });
    expect(markers.map((m) => m.claimedBy).sort((a, b) => a - b)).toEqual(
      winners.map((w) => w.i).sort((a, b) => a - b),
    );
  });

  it('ETag-guarded read-modify-write from 20 concurrent writers loses no update', async () => {
    await container.items.create({ id: 'rmw', pk: 'hot2', value: 0 });

    const increment = async (): Promise<number> => {
      for (let attempt = 1; ; attempt++) {
        const { resource, etag } = await container
          .item('rmw', 'hot2')
          .read<{ id: string; pk: string; value: number }>();
        const status = await statusOf(
          container
            .item('rmw', 'hot2')
            .replace(
              { ...resource!, value: resource!.value + 1 },
              { accessCondition: { type: 'IfMatch', condition: etag } },
            ),
        );
        if (status === 0) return attempt;
        expect(status).toBe(412);
      }
    };
    const attempts = await Promise.all(Array.from({ length: 20 }, increment));

    const { resource } = await container.item('rmw', 'hot2').read<{ value: number }>();
    expect(resource?.value).toBe(20);
    expect(attempts.some((n) => n > 1)).toBe(true);
  });
});
