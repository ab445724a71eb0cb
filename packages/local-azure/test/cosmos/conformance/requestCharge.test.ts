import { useTarget } from '../../support/conformanceTarget';

const target = useTarget();

describe('request charge', () => {
  it('is reported on every kind of response', async () => {
    const container = await target.container();
    const body = { id: 'rc', pk: 'p', text: 'x'.repeat(3000) };

    const charges = {
      create: (await container.items.create(body)).requestCharge,
      read: (await container.item('rc', 'p').read()).requestCharge,
      replace: (await container.item('rc', 'p').replace(body)).requestCharge,
      patch: (await container.item('rc', 'p').patch([{ op: 'set', path: '/n', value: 1 }])).requestCharge,
      query: (await container.items.query('SELECT * FROM c').fetchAll()).requestCharge,
      batch: (await container.items.batch([{ operationType: 'Read', id: 'rc' }], 'p')).result?.[0]
        ?.requestCharge,
      notFound: (await container.item('absent', 'p').read()).requestCharge,
      delete: (await container.item('rc', 'p').delete()).requestCharge,
    };

    for (const [kind, charge] of Object.entries(charges)) {
      expect({ kind, positive: (charge ?? 0) > 0 }).toEqual({ kind, positive: true });
    }
    if (target.local) {
      // The documented estimate: about 1 RU per KB read, 5 RU per KB written.
      expect(charges.read).toBe(4);
      expect(charges.create).toBe(20);
    }
  });
});
