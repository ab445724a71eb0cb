import {
  EVENT_KEY_TYPE,
  FAILURE_NOTE_TYPE,
  MARKER_TYPE,
  OUTBOX_TYPE,
} from '@idempotent-consumers/inbox/internal';

import {
  canonical,
  firstDifference,
  NO_DOCUMENT,
  SHOWN_CHARACTERS,
  snapshotOf,
} from '../../src/verify/compare';

/** What verify compares of a run (issue 43): the consumer's effect, not what Cosmos DB or the library stamp. */
const system = { _rid: 'r', _self: 's', _etag: '"e"', _attachments: 'a', _ts: 1, ttl: 60 };

describe('a run snapshot', () => {
  it("leaves out markers and failure notes, Cosmos DB's system fields, and the times the library stamps", () => {
    const snapshot = snapshotOf(
      [
        { id: 'm', partitionKey: 'p', type: MARKER_TYPE, ...system },
        { id: 'f', partitionKey: 'p', type: FAILURE_NOTE_TYPE },
        { id: 'total', partitionKey: 'p', quantity: 3, ...system },
        {
          id: 'o',
          partitionKey: 'p',
          type: OUTBOX_TYPE,
          createdAtEpochSeconds: 5,
          pendingSinceEpochSeconds: 5,
          trace: { traceparent: 't' },
          message: JSON.stringify({ messageId: 'x', body: { a: 1 }, trace: { traceparent: 't' } }),
        },
        {
          id: 'k',
          partitionKey: 'p',
          type: EVENT_KEY_TYPE,
          messageId: 'x',
          processedAt: 'now',
          processedAtEpochSeconds: 1,
          expiresAtEpochSeconds: 2,
        },
      ],
      [],
    );

    expect(Object.fromEntries(snapshot)).toEqual({
      'p/total': { id: 'total', partitionKey: 'p', quantity: 3 },
      'p/o': { id: 'o', partitionKey: 'p', type: OUTBOX_TYPE, message: { messageId: 'x', body: { a: 1 } } },
      'p/k': { id: 'k', partitionKey: 'p', type: EVENT_KEY_TYPE, messageId: 'x' },
    });
  });

  it('leaves out the fields the user declares volatile', () => {
    const snapshot = snapshotOf([{ id: 'a', partitionKey: 'p', seenAt: 1, total: 2 }], ['seenAt']);

    expect(snapshot.get('p/a')).toEqual({ id: 'a', partitionKey: 'p', total: 2 });
  });
});

describe('the first difference', () => {
  const one = snapshotOf([{ id: 'a', partitionKey: 'p', total: 2, nested: { x: 1, y: [1, 2] } }], []);

  it('is none between equal snapshots, whatever the order of keys', () => {
    const same = snapshotOf([{ nested: { y: [1, 2], x: 1 }, total: 2, partitionKey: 'p', id: 'a' }], []);

    expect(firstDifference(one, same)).toBeUndefined();
  });

  it('names the document and the field, with both values', () => {
    const other = snapshotOf([{ id: 'a', partitionKey: 'p', total: 3, nested: { x: 1, y: [1, 2] } }], []);

    expect(firstDifference(one, other)).toEqual({
      document: 'p/a',
      field: 'total',
      expected: '2',
      actual: '3',
    });
  });

  it('names a document one run has and the other not', () => {
    const more = snapshotOf(
      [
        { id: 'a', partitionKey: 'p', total: 2, nested: { x: 1, y: [1, 2] } },
        { id: 'b', partitionKey: 'p' },
      ],
      [],
    );

    expect(firstDifference(one, more)).toEqual({
      document: 'p/b',
      expected: NO_DOCUMENT,
      actual: '{"id":"b","partitionKey":"p"}',
    });
  });

  it(`shows at most ${SHOWN_CHARACTERS} characters of a value`, () => {
    const long = snapshotOf(
      [{ id: 'a', partitionKey: 'p', total: 'x'.repeat(5000), nested: { x: 1, y: [1, 2] } }],
      [],
    );

    const difference = firstDifference(one, long)!;

    expect(difference.actual.length).toBeLessThan(SHOWN_CHARACTERS + 40);
    expect(difference.actual).toMatch(/… \(5002 characters\)$/);
  });

  it('writes JSON with keys sorted, as JSON.stringify would leave out and replace undefined', () => {
    expect(canonical({ b: 1, a: [1, { d: 'x', c: undefined }, undefined], e: null })).toBe(
      '{"a":[1,{"d":"x"},null],"b":1,"e":null}',
    );
  });

  it('reads deep values without recursion: a document nested 10,000 levels', () => {
    let deep: unknown = 1;
    for (let level = 0; level < 10_000; level++) deep = { deeper: deep };

    expect(canonical(deep).length).toBe(10_000 * '{"deeper":}'.length + 1);
  });
});
