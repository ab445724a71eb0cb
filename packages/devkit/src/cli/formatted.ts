import { writeFile } from 'node:fs/promises';

/**
 * Generated text (bench results, records, reports) as the repository's prettier config formats a
 * file at `path`, when prettier knows the file's type; otherwise as it is. So a generated file,
 * committed or left in the working tree, never fails `npm run format:check`.
 */
export async function formatted(path: string, text: string): Promise<string> {
  // Loaded on use: prettier is a dev dependency, and most runs of the tools write nothing.
  const { format, getFileInfo, resolveConfig } = await import('prettier');
  const { inferredParser } = await getFileInfo(path);
  return inferredParser === null ? text : format(text, { ...(await resolveConfig(path)), filepath: path });
}

/** Writes `text` to `path`, formatted; returns what it wrote. */
export async function writeFormatted(path: string, text: string): Promise<string> {
  const output = await formatted(path, text);
  await writeFile(path, output);
  return output;
}
