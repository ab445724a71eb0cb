import { writeFile } from 'node:fs/promises';

/**
 * Writes generated text (bench results, records, reports) formatted as the repository's prettier
 * config wants it, when prettier knows the file's type, so that a generated file, committed or left
 * in the working tree, never fails `npm run format:check`. Returns what it wrote.
 */
export async function writeFormatted(path: string, text: string): Promise<string> {
  // Loaded on use: prettier is a dev dependency, and most runs of the tools write nothing.
  const { format, getFileInfo, resolveConfig } = await import('prettier');
  const { inferredParser } = await getFileInfo(path);
  const output =
    inferredParser === null ? text : await format(text, { ...(await resolveConfig(path)), filepath: path });
  await writeFile(path, output);
  return output;
}
