import fc from 'fast-check';
import { z } from 'zod';

import {
  arbitraryOf,
  InvalidExampleError,
  jsonSchemaOf,
  messagesArbitrary,
  POOL,
  UnsupportedSchemaError,
} from '../../src/verify/messages';

/** Messages made from a consumer's zod schema (issue 43): valid, varied, sharing ids, replayable. */
const Order = z.object({
  orderId: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/),
  productId: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/),
  quantity: z.number().int().positive().max(1_000_000),
  amount: z
    .number()
    .min(0.01)
    .refine(
      (value) =>
        Number.isInteger(Math.round(value * 100)) && Math.abs(value * 100 - Math.round(value * 100)) < 1e-6,
    ),
  currency: z.enum(['EUR', 'USD']),
  note: z.string().max(20).optional(),
  lines: z.array(z.object({ sku: z.uuid(), at: z.iso.datetime() })).max(2),
  kind: z.union([z.literal('retail'), z.literal('wholesale')]),
});

const sample = <T>(arbitrary: fc.Arbitrary<T>, seed: number, numRuns = 40): T[] =>
  fc.sample(arbitrary, { seed, numRuns });

describe('messages from a schema', () => {
  it('are each accepted by the schema, refinements included', () => {
    const messages = sample(messagesArbitrary('orders', Order), 1, 100);

    expect(messages.filter((message) => !Order.safeParse(message).success)).toEqual([]);
    expect(new Set(messages.map((message) => JSON.stringify(message))).size).toBeGreaterThan(50);
  });

  it(`take each text field's values from a pool of ${POOL}, so that ids (and partition keys) repeat`, () => {
    const messages = sample(messagesArbitrary('orders', Order), 2, 100) as z.infer<typeof Order>[];

    expect(new Set(messages.map((message) => message.productId))).toEqual(
      new Set(['productId-1', 'productId-2', 'productId-3']),
    );
  });

  it('are the same for the same seed, and others for another', () => {
    const arbitrary = messagesArbitrary('orders', Order);

    expect(sample(arbitrary, 3)).toEqual(sample(arbitrary, 3));
    expect(sample(arbitrary, 3)).not.toEqual(sample(arbitrary, 4));
  });

  it('keep to bounds: exclusive minimum, maximum, lengths, items', () => {
    const Bounded = z.object({
      count: z.number().int().gt(5).lt(9),
      code: z.string().min(3).max(3),
      tags: z.array(z.boolean()).min(1).max(2),
    });
    const values = sample(arbitraryOf(jsonSchemaOf('bounded', Bounded)), 5, 60) as z.infer<typeof Bounded>[];

    expect(values.filter((value) => !Bounded.safeParse(value).success)).toEqual([]);
    expect(new Set(values.map((value) => value.count))).toEqual(new Set([6, 7, 8]));
  });

  it('refuse a schema that is not zod, by the consumer name', () => {
    const adapter = { safeParse: (input: unknown) => ({ success: true as const, data: input }) };

    expect(() => messagesArbitrary('legacy.consumer', adapter)).toThrow(UnsupportedSchemaError);
    expect(() => messagesArbitrary('legacy.consumer', adapter)).toThrow(
      /^legacy\.consumer: its schema is not a zod schema/,
    );
  });

  it("draw the consumer's declared examples among them, about one in four", () => {
    const example = { ...sample(messagesArbitrary('orders', Order), 6, 1)[0]!, orderId: 'declared-example' };

    const messages = sample(messagesArbitrary('orders', Order, [example]), 7, 200);

    const declared = messages.filter((message) => JSON.stringify(message) === JSON.stringify(example));
    expect(declared.length).toBeGreaterThan(20);
    expect(declared.length).toBeLessThan(100);
  });

  it('refuse an example the schema refuses, by its place and the first issue', () => {
    const valid = sample(messagesArbitrary('orders', Order), 8, 1)[0];

    expect(() => messagesArbitrary('orders', Order, [valid, { ...(valid as object), quantity: -1 }])).toThrow(
      InvalidExampleError,
    );
    expect(() => messagesArbitrary('orders', Order, [valid, { ...(valid as object), quantity: -1 }])).toThrow(
      /^orders: its example 2 does not pass its own schema \(quantity: /,
    );
  });

  it("verify a schema that is not zod's on its examples alone", () => {
    const adapter = { safeParse: (input: unknown) => ({ success: true as const, data: input }) };

    const messages = sample(messagesArbitrary('legacy.consumer', adapter, [{ id: 'a' }, { id: 'b' }]), 9, 30);

    expect(new Set(messages.map((message) => JSON.stringify(message)))).toEqual(
      new Set(['{"id":"a"}', '{"id":"b"}']),
    );
  });
});
