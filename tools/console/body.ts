/** A body as the console's page shows it on request: UTF-8 text when the bytes are, else base64. */
export function bodyText(body: Buffer): { text: string; encoding: 'utf-8' | 'base64' } {
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(body), encoding: 'utf-8' };
  } catch {
    return { text: body.toString('base64'), encoding: 'base64' };
  }
}
