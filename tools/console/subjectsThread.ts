import { parentPort } from 'node:worker_threads';

import { z } from 'zod';

import { type EventInput, loadSubjectRules, parseEvent } from '../events';
import { topicFor } from '../serviceBus';

/**
 * The send form's subjects and their validation, on a thread of their own: the rules come from the
 * app's consumers as `npm run send` loads them (their function files through the worker path),
 * which must not happen a second time on npm start's thread, where the built app runs.
 */
async function main(): Promise<void> {
  const rules = await loadSubjectRules();
  const subjects = [...rules].map(([subject, rule]) => ({
    subject,
    topic: topicFor(subject),
    consumers: [...rule.schemas.keys()],
    schema: jsonSchema([...rule.schemas.values()][0]),
  }));
  parentPort?.on(
    'message',
    ({ id, input }: { id: number; input: EventInput & { allowInvalid?: unknown } }) => {
      try {
        const event = parseEvent(input, 'The form', rules, input.allowInvalid === true);
        parentPort?.postMessage({ id, event });
      } catch (error) {
        parentPort?.postMessage({ id, refused: (error as Error).message });
      }
    },
  );
  parentPort?.postMessage({ subjects });
}

/** A zod schema's JSON Schema, for the form; undefined for another validator (the form asks for JSON). */
function jsonSchema(schema: unknown): unknown {
  if (!(schema instanceof z.ZodType)) return undefined;
  try {
    return z.toJSONSchema(schema, { unrepresentable: 'any' });
  } catch {
    return undefined;
  }
}

main().catch((error: unknown) => {
  parentPort?.postMessage({ failed: error instanceof Error ? error.message : String(error) });
});
