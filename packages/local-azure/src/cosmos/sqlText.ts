/**
 * Reading Cosmos DB SQL text without parsing it: where the top-level clauses start, the top-level
 * commas, the aggregate calls. Each function is one pass over the characters with a bracket depth
 * counter (no recursion), skipping string literals and `--` comments; the engine's parser still
 * checks every piece the server runs.
 */

/** Bracket depth of each character; -1 inside a string literal or a comment. */
type Depths = Int32Array;

const OPENING = new Set(['(', '[', '{']);
const CLOSING = new Set([')', ']', '}']);
const IDENTIFIER_CHAR = /[\w$]/;

export function depthsOf(text: string): Depths {
  const depths = new Int32Array(text.length);
  let level = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text[i] as string;
    if (char === "'" || char === '"') {
      const start = i;
      for (i++; i < text.length && text[i] !== char; i++) if (text[i] === '\\') i++;
      depths.fill(-1, start, Math.min(i + 1, text.length));
    } else if (char === '-' && text[i + 1] === '-') {
      const newline = text.indexOf('\n', i);
      const end = newline === -1 ? text.length : newline;
      depths.fill(-1, i, end);
      i = end - 1;
    } else if (OPENING.has(char)) {
      depths[i] = level++;
    } else if (CLOSING.has(char)) {
      level = Math.max(0, level - 1);
      depths[i] = level;
    } else {
      depths[i] = level;
    }
  }
  return depths;
}

/** True when a word may start at `index`: not inside a name, a property path or a parameter. */
export function startsWord(text: string, index: number): boolean {
  const before = text[index - 1];
  return before === undefined || !(IDENTIFIER_CHAR.test(before) || before === '.' || before === '@');
}

/** True when a word may end before `index`: no name character follows. */
export const endsWord = (text: string, index: number): boolean => !IDENTIFIER_CHAR.test(text[index] ?? ' ');

/** Where each of `keywords` (upper case, words separated by one space) occurs at the top level. */
export function topLevelKeywords(
  text: string,
  keywords: readonly string[],
): { keyword: string; start: number; end: number }[] {
  const depths = depthsOf(text);
  const pattern = new RegExp(
    `\\b(${keywords.map((keyword) => keyword.replace(/ /g, '\\s+')).join('|')})\\b`,
    'gi',
  );
  const found = [];
  for (const match of text.matchAll(pattern)) {
    if (depths[match.index] !== 0 || !startsWord(text, match.index)) continue;
    const keyword = match[0].toUpperCase().replace(/\s+/g, ' ');
    found.push({ keyword, start: match.index, end: match.index + match[0].length });
  }
  return found;
}

/** The text split at its top-level commas, each part trimmed. */
export function splitTopLevel(text: string): string[] {
  const depths = depthsOf(text);
  const parts: string[] = [];
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === ',' && depths[i] === 0) {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(text.slice(start).trim());
  return parts;
}

/** The index of the bracket closing the one at `open`, or -1 when it is not closed. */
export function closingBracket(text: string, depths: Depths, open: number): number {
  const level = depths[open];
  for (let i = open + 1; i < text.length; i++) {
    if (depths[i] === level && CLOSING.has(text[i] as string)) return i;
  }
  return -1;
}

export const AGGREGATE_FUNCTIONS = ['COUNT', 'SUM', 'MIN', 'MAX', 'AVG'] as const;
export type AggregateFunction = (typeof AGGREGATE_FUNCTIONS)[number];

const AGGREGATE_CALL = /(COUNT|SUM|MIN|MAX|AVG)\s*\(/iy;

export interface AggregateCall {
  fn: AggregateFunction;
  /** The argument text, between the parentheses. */
  argument: string;
  start: number;
  /** One past the closing parenthesis. */
  end: number;
}

/** The aggregate call starting at `index`, if one does (an `udf.COUNT(` or `c.count` is not). */
export function aggregateCallAt(text: string, depths: Depths, index: number): AggregateCall | undefined {
  if (depths[index] === -1 || !startsWord(text, index)) return undefined;
  AGGREGATE_CALL.lastIndex = index;
  const match = AGGREGATE_CALL.exec(text);
  if (match === null) return undefined;
  const open = index + match[0].length - 1;
  const close = closingBracket(text, depths, open);
  if (close === -1) return undefined;
  return {
    fn: (match[1] as string).toUpperCase() as AggregateFunction,
    argument: text.slice(open + 1, close).trim(),
    start: index,
    end: close + 1,
  };
}

/** The first aggregate call anywhere in the text. */
export function firstAggregateCall(text: string): AggregateCall | undefined {
  const depths = depthsOf(text);
  for (let i = 0; i < text.length; i++) {
    const call = aggregateCallAt(text, depths, i);
    if (call !== undefined) return call;
  }
  return undefined;
}

/** Where `word` occurs as a name of its own (not inside a string, a path or another name). */
export function findWord(text: string, word: string): number {
  const depths = depthsOf(text);
  for (let at = text.indexOf(word); at !== -1; at = text.indexOf(word, at + 1)) {
    if (depths[at] !== -1 && startsWord(text, at) && endsWord(text, at + word.length)) return at;
  }
  return -1;
}
