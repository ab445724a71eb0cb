import {
  EVENT_KEY_TYPE,
  FAILURE_NOTE_TYPE,
  MARKER_TYPE,
  OUTBOX_TYPE,
} from '@idempotent-consumers/inbox/internal';

/**
 * What a run leaves that verify compares (issue 43): every document of the container but the inbox
 * markers and failure notes (the library's record of a delivery, not the consumer's effect), without what Cosmos DB and the library set on their own (system properties, times the
 * library stamps, the trace context) and without the fields the user declares volatile. Each
 * document is keyed by its partition key and id.
 */
export type Snapshot = ReadonlyMap<string, Record<string, unknown>>;

/** Cosmos DB's system properties, and the TTL the library sets. */
const SYSTEM_FIELDS = ['_rid', '_self', '_etag', '_attachments', '_ts', '_lsn', 'ttl'];
/** Times the library stamps on its own documents, and the trace context of the delivery. */
const LIBRARY_FIELDS: Record<string, readonly string[]> = {
  [OUTBOX_TYPE]: ['createdAtEpochSeconds', 'pendingSinceEpochSeconds', 'trace'],
  [EVENT_KEY_TYPE]: ['processedAt', 'processedAtEpochSeconds', 'expiresAtEpochSeconds'],
};

/** What a report shows for a document one run does not have. */
export const NO_DOCUMENT = '(no such document)';

/** At most this many characters of a value are shown in a report. */
export const SHOWN_CHARACTERS = 300;

export function snapshotOf(
  documents: readonly Record<string, unknown>[],
  volatile: readonly string[],
): Snapshot {
  const snapshot = new Map<string, Record<string, unknown>>();
  for (const document of documents) {
    if (document.type === MARKER_TYPE || document.type === FAILURE_NOTE_TYPE) continue;
    const kept: Record<string, unknown> = { ...document };
    const type = typeof document.type === 'string' ? document.type : '';
    for (const field of [...SYSTEM_FIELDS, ...(LIBRARY_FIELDS[type] ?? []), ...volatile]) delete kept[field];
    if (type === OUTBOX_TYPE && typeof kept.message === 'string') {
      const message = JSON.parse(kept.message) as Record<string, unknown>;
      delete message.trace;
      kept.message = message;
    }
    snapshot.set(`${String(document.partitionKey)}/${String(document.id)}`, kept);
  }
  return snapshot;
}

export interface Difference {
  /** `<partition key>/<id>` of the document that differs. */
  document: string;
  /** The field that differs; undefined when the document is in one run only. */
  field?: string;
  /** In the reference run (each message applied once, in the order the faulty run committed them). */
  expected: string;
  /** In the run under test. */
  actual: string;
}

/** The first document (in key order) that differs between two snapshots, and its first differing field. */
export function firstDifference(expected: Snapshot, actual: Snapshot): Difference | undefined {
  const keys = [...new Set([...expected.keys(), ...actual.keys()])].sort();
  for (const document of keys) {
    const want = expected.get(document);
    const got = actual.get(document);
    if (want === undefined || got === undefined)
      return {
        document,
        expected: want === undefined ? NO_DOCUMENT : shown(want),
        actual: got === undefined ? NO_DOCUMENT : shown(got),
      };
    const fields = [...new Set([...Object.keys(want), ...Object.keys(got)])].sort();
    for (const field of fields) {
      if (canonical(want[field]) !== canonical(got[field]))
        return { document, field, expected: shown(want[field]), actual: shown(got[field]) };
    }
  }
  return undefined;
}

/** JSON with object keys sorted, written without recursion (documents are the user's, of any depth). */
export function canonical(value: unknown): string {
  if (value === undefined) return 'undefined';
  type Task = { text: string } | { value: unknown };
  const out: string[] = [];
  const tasks: Task[] = [{ value }];
  const pushInOrder = (next: Task[]): void => {
    for (let index = next.length - 1; index >= 0; index--) tasks.push(next[index]!);
  };
  while (tasks.length > 0) {
    const task = tasks.pop()!;
    if ('text' in task) {
      out.push(task.text);
    } else if (Array.isArray(task.value)) {
      const next: Task[] = [{ text: '[' }];
      task.value.forEach((item: unknown, index) => {
        if (index > 0) next.push({ text: ',' });
        next.push({ value: item === undefined ? null : item });
      });
      pushInOrder([...next, { text: ']' }]);
    } else if (task.value !== null && typeof task.value === 'object') {
      const record = task.value as Record<string, unknown>;
      const next: Task[] = [{ text: '{' }];
      Object.keys(record)
        .filter((field) => record[field] !== undefined)
        .sort()
        .forEach((field, index) => {
          next.push({ text: `${index > 0 ? ',' : ''}${JSON.stringify(field)}:` }, { value: record[field] });
        });
      pushInOrder([...next, { text: '}' }]);
    } else {
      out.push(JSON.stringify(task.value) ?? 'null');
    }
  }
  return out.join('');
}

/** A value as a report shows it: canonical JSON, at most SHOWN_CHARACTERS. */
export function shown(value: unknown): string {
  const text = canonical(value);
  return text.length > SHOWN_CHARACTERS
    ? `${text.slice(0, SHOWN_CHARACTERS)}… (${text.length} characters)`
    : text;
}
