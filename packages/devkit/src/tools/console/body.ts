import type { BodyView } from './types';

/** The most of a body the page is given: what the feed keeps, and what a dead letter's view shows. */
export const PAGE_BODY_BYTES = 64 * 1024;

/**
 * A body as the page shows it on request: its first PAGE_BODY_BYTES, as UTF-8 text when they are,
 * else base64, with its full size.
 */
export function bodyForPage(body: Buffer): BodyView {
  const shown = body.subarray(0, PAGE_BODY_BYTES);
  const truncated = body.length > PAGE_BODY_BYTES;
  try {
    // A cut can split a character: the decoder then stops at the last whole one.
    const text = new TextDecoder('utf-8', { fatal: !truncated }).decode(shown);
    return { text, encoding: 'utf-8', bytes: body.length, truncated };
  } catch {
    return { text: shown.toString('base64'), encoding: 'base64', bytes: body.length, truncated };
  }
}
