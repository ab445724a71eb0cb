import { defineVersionedConsumer } from '@idempotent-consumers/inbox';
import { z } from 'zod';

import { inVersionOrder, oneStatePerVersion, projectionOf } from '../../src/verify/versioned';

/** What verify needs of a versioned consumer (issue 43): its messages' versions, one state per version. */
const Status = z.object({ id: z.string(), status: z.string(), version: z.number().int() });
const projector = defineVersionedConsumer({
  name: 'test.status-projector',
  schema: Status,
  project: (event) => ({
    id: event.id,
    partitionKey: `p-${event.id}`,
    status: event.status,
    version: event.version,
  }),
});
const message = (id: string, status: string, version: number): { subject: string; body: unknown } => ({
  subject: 'StatusChanged',
  body: { id, status, version },
});

describe("a versioned consumer's messages", () => {
  it('project to their document and version, or to nothing when the schema refuses them', () => {
    expect(projectionOf(projector, message('a', 'Paid', 3))).toEqual({ key: '["p-a","a"]', version: 3 });
    expect(projectionOf(projector, { subject: 'StatusChanged', body: { id: 'a' } })).toBeUndefined();
  });

  it('keep one state per document and version: a later message with the same pair takes the first body', () => {
    const messages = [
      message('a', 'Paid', 3),
      message('a', 'Void', 3),
      message('b', 'Void', 3),
      message('a', 'Void', 4),
    ];

    expect(oneStatePerVersion(projector, messages).map(({ body }) => body)).toEqual([
      { id: 'a', status: 'Paid', version: 3 },
      { id: 'a', status: 'Paid', version: 3 },
      { id: 'b', status: 'Void', version: 3 },
      { id: 'a', status: 'Void', version: 4 },
    ]);
  });

  it('are applied in the order of their versions, ties in their own order, the unreadable last', () => {
    const entries = [
      ['m-0', message('a', 'Paid', 5)],
      ['m-1', { subject: 'StatusChanged', body: 'not an object' }],
      ['m-2', message('b', 'Void', 2)],
      ['m-3', message('a', 'Issued', 2)],
    ] as const;

    expect(inVersionOrder(projector, entries).map(([id]) => id)).toEqual(['m-2', 'm-3', 'm-0', 'm-1']);
  });
});
