import { bounded as boundedText } from '@idempotent-consumers/inbox/internal';

/**
 * Errors the operator tools report. A ToolError is the operator's to fix (a flag, a file, an
 * environment variable) and is printed as a message without a stack; anything else is a bug or an
 * outage and is printed in full.
 */
export class ToolError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ToolError';
  }
}

/** Bad flags or input (exit code 2). */
export class UsageError extends ToolError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'UsageError';
  }
}

/**
 * The tool's environment does not say how to reach Service Bus or Cosmos DB, or says it unsafely
 * (exit code 2). The app's own settings failing at start-up are packages/inbox/src's SettingsError.
 */
export class EnvironmentError extends ToolError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'EnvironmentError';
  }
}

/**
 * An untrusted value as the tools echo it: one line (whitespace and control characters folded) and
 * at most `length` characters, the library's bounded (@idempotent-consumers/inbox/internal) in its one-line, compact form.
 */
export function bounded(text: string, length = 64): string {
  return boundedText(text, length, { oneLine: true, compact: true });
}
