import type { MessageSchema } from '@idempotent-consumers/inbox/internal';
import fc from 'fast-check';
import { z } from 'zod';

/**
 * Messages for a consumer, made from its own zod schema (issue 43): the schema as JSON Schema
 * (`z.toJSONSchema`), each part of it a fast-check arbitrary, and every value the schema refuses
 * (a refinement JSON Schema cannot say) left out. Text fields take their values from a pool of
 * POOL per field, so that messages share ids, and with them partition keys, often enough to race.
 */
export const POOL = 3;

/** The JSON Schema keywords read here; any other keyword is ignored, and a value the schema refuses filtered out. */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
}

/** What a schema must be for verify to make messages from it: a zod 4 schema. */
export class UnsupportedSchemaError extends Error {}

/** The consumer's schema as JSON Schema; a schema that is not zod's is refused by name. */
export function jsonSchemaOf(consumer: string, schema: unknown): JsonSchema {
  if (!(schema instanceof z.ZodType))
    throw new UnsupportedSchemaError(
      `${consumer}: its schema is not a zod schema, so verify cannot make messages from it (a schema adapter has no JSON Schema).`,
    );
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
}

/** An arbitrary of the values `schema` describes, `path` naming the field (for its pool of texts). */
export function arbitraryOf(schema: JsonSchema, path = 'value'): fc.Arbitrary<unknown> {
  if ('const' in schema) return fc.constant(schema.const);
  if (schema.enum !== undefined) return fc.constantFrom(...schema.enum);
  const choices = schema.anyOf ?? schema.oneOf;
  if (choices !== undefined) return fc.oneof(...choices.map((choice) => arbitraryOf(choice, path)));
  if (schema.allOf !== undefined && schema.allOf.length > 0)
    return arbitraryOf(Object.assign({}, ...schema.allOf) as JsonSchema, path);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object':
      return objectOf(schema);
    case 'array':
      return fc.array(arbitraryOf(schema.items ?? {}, `${path}[]`), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 3, (schema.minItems ?? 0) + 3),
      });
    case 'string':
      return textOf(schema, path);
    case 'integer':
      return integerOf(schema);
    case 'number':
      return numberOf(schema);
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    default:
      return fc.oneof(fc.constant(null), fc.boolean(), fc.integer({ min: 0, max: 9 }), textOf({}, path));
  }
}

function objectOf(schema: JsonSchema): fc.Arbitrary<unknown> {
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {}).map(
    ([key, field]) => [key, arbitraryOf(field, key)] as const,
  );
  return fc.record(Object.fromEntries(fields), {
    requiredKeys: fields.map(([key]) => key).filter((key) => required.has(key)),
  });
}

/** A pool of POOL readable texts the field's pattern and lengths allow (`productId-1`...), else any it allows. */
function textOf(schema: JsonSchema, path: string): fc.Arbitrary<string> {
  if (schema.format === 'uuid')
    return fc.constantFrom(...pooled((i) => `00000000-0000-4000-8000-00000000000${i}`));
  if (schema.format === 'date-time') return fc.constantFrom(...pooled((i) => `2026-01-0${i}T00:00:00Z`));
  if (schema.format === 'email') return fc.constantFrom(...pooled((i) => `user${i}@example.com`));
  const pattern = schema.pattern === undefined ? undefined : new RegExp(schema.pattern, 'u');
  const min = schema.minLength ?? 0;
  const max = schema.maxLength ?? Number.POSITIVE_INFINITY;
  const allowed = (text: string): boolean =>
    text.length >= min && text.length <= max && (pattern?.test(text) ?? true);
  const name = path.replace(/\W+/g, '-').replace(/^-+|-+$/g, '') || 'value';
  const candidates = [
    pooled((i) => `${name}-${i}`),
    pooled((i) => `${name}${i}`),
    pooled((i) => `${i}`.padStart(Math.max(min, 1), '0')),
    pooled((i) => String.fromCharCode(96 + i).repeat(Math.max(min, 1))),
  ];
  const pool = candidates.find((texts) => texts.every(allowed));
  if (pool !== undefined) return fc.constantFrom(...pool);
  const texts =
    pattern === undefined
      ? fc.string({ minLength: min, maxLength: Math.min(max, min + 12) })
      : fc.stringMatching(pattern);
  return texts.filter(allowed);
}

const pooled = (text: (i: number) => string): string[] => Array.from({ length: POOL }, (_, i) => text(i + 1));

/** Integers from the lowest the schema allows, in a range small enough to read. */
function integerOf(schema: JsonSchema): fc.Arbitrary<number> {
  const min = Math.ceil(lowest(schema, 1) ?? 0);
  const max = Math.floor(highest(schema, 1) ?? min + 1000);
  return fc.integer({ min, max: Math.min(max, min + 1000) });
}

/** Amounts with at most two decimals (what money fields allow), in a range small enough to read. */
function numberOf(schema: JsonSchema): fc.Arbitrary<number> {
  const min = Math.ceil((lowest(schema, 0.01) ?? 0) * 100);
  const max = Math.floor((highest(schema, 0.01) ?? min / 100 + 1000) * 100);
  return fc.integer({ min, max: Math.min(max, min + 100_000) }).map((cents) => cents / 100);
}

const lowest = (schema: JsonSchema, step: number): number | undefined =>
  schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + step : schema.minimum;
const highest = (schema: JsonSchema, step: number): number | undefined =>
  schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - step : schema.maximum;

/** An example a consumer declares that its own schema refuses. */
export class InvalidExampleError extends Error {}

/**
 * The arbitrary of a consumer's messages: its schema's, each value one the schema accepts, and its
 * declared examples among them (one message in four). A schema that is not zod's is verified on its
 * examples alone; without examples it is refused (UnsupportedSchemaError). An example the schema
 * refuses is an InvalidExampleError, named by its place.
 */
export function messagesArbitrary(
  consumer: string,
  schema: MessageSchema<unknown>,
  examples: readonly unknown[] = [],
): fc.Arbitrary<unknown> {
  for (const [index, example] of examples.entries()) {
    const parsed = schema.safeParse(example);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where =
        issue === undefined ? '' : ` (${issue.path.map(String).join('.') || 'body'}: ${issue.message})`;
      throw new InvalidExampleError(
        `${consumer}: its example ${index + 1} does not pass its own schema${where.slice(0, 300)}.`,
      );
    }
  }
  const declared = examples.length === 0 ? undefined : fc.constantFrom(...examples);
  if (declared !== undefined && !(schema instanceof z.ZodType)) return declared;
  const json = jsonSchemaOf(consumer, schema);
  const zod = schema as z.ZodType;
  const generated = arbitraryOf(json).filter((message) => zod.safeParse(message).success);
  return declared === undefined
    ? generated
    : fc.oneof({ arbitrary: generated, weight: 3 }, { arbitrary: declared, weight: 1 });
}
