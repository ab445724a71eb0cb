// What the docs test reads in the project's markdown: the files, their headings as GitHub anchors,
// their links, code blocks and inline code.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';

/** Every markdown file of the repository, as a path relative to PROJECT_ROOT. */
export { markdownFiles } from '@idempotent-consumers/devkit/internal/tools/sampleDocs';

export interface CodeBlock {
  /** The fence's info string: `ts`, `ts fragment`, `bash`... */
  info: string;
  text: string;
  /** 1-based line of the block's first line of code. */
  line: number;
  /** The `<!-- excerpt: <path> -->` comment just before the fence, if any. */
  excerptOf?: string;
}

export interface Markdown {
  path: string;
  /** The lines outside code blocks, with their 1-based numbers. */
  prose: { line: number; text: string }[];
  blocks: CodeBlock[];
}

export function readMarkdown(path: string): Markdown {
  const lines = readFileSync(join(PROJECT_ROOT, path), 'utf8').split('\n');
  const prose: Markdown['prose'] = [];
  const blocks: CodeBlock[] = [];
  let open: { fence: string; info: string; start: number; excerptOf?: string } | undefined;
  let excerptOf: string | undefined;
  lines.forEach((text, index) => {
    const fence = /^\s*(`{3,})\s*(.*)$/.exec(text);
    if (open) {
      if (fence && fence[1] === open.fence && fence[2] === '') {
        const code = lines.slice(open.start, index);
        const indent = Math.min(...code.filter((l) => l.trim()).map((l) => /^\s*/.exec(l)![0].length));
        blocks.push({
          info: open.info,
          text: code.map((l) => l.slice(indent)).join('\n'),
          line: open.start + 1,
          ...(open.excerptOf === undefined ? {} : { excerptOf: open.excerptOf }),
        });
        open = undefined;
      }
      return;
    }
    if (fence) {
      open = { fence: fence[1]!, info: fence[2]!.trim(), start: index + 1, excerptOf };
      excerptOf = undefined;
      return;
    }
    const marker = /^<!-- excerpt: (\S+) -->$/.exec(text.trim());
    if (marker) excerptOf = marker[1];
    else if (text.trim()) excerptOf = undefined;
    prose.push({ line: index + 1, text });
  });
  return { path, prose, blocks };
}

/** The text of a line without its inline code spans (links inside them are not links). */
export const withoutInlineCode = (text: string): string => text.replace(/`[^`]*`/g, '');

export const inlineCode = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** The anchors GitHub gives a file's headings (github-slugger: lower case, punctuation dropped). */
export function anchors(markdown: Markdown): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const { text } of markdown.prose) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (!heading) continue;
    const base = heading[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/** Relative link targets in the prose: `[text](target)` and `![alt](target)`, outside inline code. */
export function links(markdown: Markdown): { line: number; target: string }[] {
  return markdown.prose.flatMap(({ line, text }) =>
    [...withoutInlineCode(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
      .map((m) => m[1]!)
      .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
      .map((target) => ({ line, target })),
  );
}

/** Every `npm run <script>`, `npm run --silent <script>`, `npm test` and `npm start`, anywhere in the file. */
export function npmCommands(markdown: Markdown): { line: number; script: string; args: string }[] {
  const lines = [
    ...markdown.prose,
    ...markdown.blocks.flatMap((block) =>
      block.text.split('\n').map((text, i) => ({ line: block.line + i, text })),
    ),
  ];
  return lines.flatMap(({ line, text }) =>
    [...text.matchAll(/\bnpm (?:run(?: --silent)? ([a-z][\w:-]*)|(test|start)\b)(.*)/g)].map((m) => ({
      line,
      script: m[1] ?? m[2]!,
      args: m[3]!,
    })),
  );
}
