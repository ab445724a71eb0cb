import { readdirSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '../cli/project';

const SKIPPED_FOLDERS = new Set(['node_modules', '.cache', 'dist', '.git', 'coverage', '.scratch']);

/** Every markdown file of the project (or of another checkout of it), as a path relative to it. */
export function markdownFiles(root = PROJECT_ROOT): string[] {
  const walk = (folder: string): string[] =>
    readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
      if (SKIPPED_FOLDERS.has(entry.name) || entry.isSymbolicLink()) return [];
      const file = path.join(folder, entry.name);
      if (entry.isDirectory()) return walk(file);
      return entry.name.endsWith('.md') ? [path.relative(root, file)] : [];
    });
  return walk(root);
}

/**
 * The markdown without its sample-only passages, which `npm run remove:samples` cuts (GitHub does
 * not show the comments):
 *
 * - a line `<!-- sample -->` opens a region and a line `<!-- /sample -->` closes it: both go, with
 *   every line between;
 * - a region closed by a comment `<!-- /sample` ... `-->` over several lines is replaced by the
 *   lines inside that comment (what the docs say once the sample is gone);
 * - a line of text ending in `<!-- sample -->` (a list item; a table row, where it ends the last
 *   cell) goes.
 *
 * Regions do not nest. Markers in code blocks and code spans are text. `problems` names each
 * malformed or unbalanced marker by its line; the text is only meaningful when there are none.
 */
export function withoutSamplePassages(markdown: string): { text: string; problems: string[] } {
  const kept: string[] = [];
  const problems: string[] = [];
  let fence: string | undefined;
  let region: number | undefined;
  let replacement: string[] | undefined;
  markdown.split('\n').forEach((line, index) => {
    const at = `line ${index + 1}`;
    const trimmed = line.trim();
    if (replacement) {
      if (trimmed === '-->') {
        kept.push(...replacement);
        [region, replacement] = [undefined, undefined];
      } else replacement.push(line);
      return;
    }
    const fenceMark = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== undefined || fenceMark !== undefined) {
      if (fence === undefined) fence = fenceMark;
      else if (fenceMark?.startsWith(fence) && trimmed === fenceMark) fence = undefined;
      if (region === undefined) kept.push(line);
      return;
    }
    if (!/<!--\s*\/?\s*sample/.test(line.replace(/`[^`]*`/g, ''))) {
      if (region === undefined) kept.push(line);
      return;
    }
    if (trimmed === '<!-- sample -->') {
      if (region !== undefined) problems.push(`${at}: a region opened inside the region of line ${region}`);
      region = index + 1;
    } else if (trimmed === '<!-- /sample -->' || trimmed === '<!-- /sample') {
      if (region === undefined) problems.push(`${at}: closes a region that is not open`);
      if (trimmed === '<!-- /sample') replacement = [];
      else region = undefined;
    } else if (/\S <!-- sample -->( *\|)?$/.test(trimmed)) {
      if (region !== undefined) problems.push(`${at}: a sample line inside the region of line ${region}`);
    } else {
      problems.push(
        `${at}: not a sample marker (a line '<!-- sample -->', '<!-- /sample -->' or '<!-- /sample', or text ending in ' <!-- sample -->', in a table row before its last '|')`,
      );
    }
  });
  if (replacement) problems.push(`the replacement of the region of line ${region} has no closing '-->'`);
  else if (region !== undefined) problems.push(`the region of line ${region} is not closed`);
  return { text: kept.join('\n'), problems };
}
