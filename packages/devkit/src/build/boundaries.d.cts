import type { Rule } from 'eslint';

/** See boundaries.cjs. */
export declare const boundaries: Rule.RuleModule;
