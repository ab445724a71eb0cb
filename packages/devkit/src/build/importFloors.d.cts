import type { Rule } from 'eslint';

/** See importFloors.cjs. */
export declare const ENTRIES: Record<'#inbox' | '#inbox/internal', string>;
export declare const FLOORS: readonly { floor: number; name: string; prefixes: readonly string[] }[];
export declare const importFloors: Rule.RuleModule;
