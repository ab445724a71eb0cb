// Docs are code: docs/development.md's scripts table is package.json's scripts, every relative link and
// anchor resolves, every npm command the docs show exists (with the flags its tool reads), every path
// the README names exists, every TypeScript block compiles, every quoted excerpt is in its file, and
// the sample-only passages are marked so that npm run remove:samples can cut them.

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

import { PROJECT_ROOT } from '@idempotent-consumers/devkit';
import { withoutSamplePassages } from '@idempotent-consumers/devkit/internal/tools/sampleDocs';
import ts from 'typescript';
import { parse } from 'yaml';

import {
  anchors,
  inlineCode,
  links,
  type Markdown,
  markdownFiles,
  npmCommands,
  readMarkdown,
} from '../support/markdown';

const docs = markdownFiles().map(readMarkdown);
const readme = docs.find((doc) => doc.path === 'README.md')!;
const development = docs.find((doc) => doc.path === 'docs/development.md')!;
const packageJson = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  engines: { node: string };
};
const scripts = Object.keys(packageJson.scripts);

/** The prose between a heading and the next heading of the same or a higher level. */
function section(doc: Markdown, heading: string): Markdown['prose'] {
  const start = doc.prose.findIndex(({ text }) => text === heading);
  if (start < 0) throw new Error(`${doc.path} has no heading '${heading}'`);
  const level = /^#+/.exec(heading)![0].length;
  const end = doc.prose.findIndex(
    ({ text }, i) => i > start && /^#+ /.test(text) && /^#+/.exec(text)![0].length <= level,
  );
  return doc.prose.slice(start + 1, end < 0 ? undefined : end);
}

describe('the docs', () => {
  it('covers the markdown of the whole repository', () => {
    expect(docs.map((doc) => doc.path)).toEqual(
      expect.arrayContaining([
        'README.md',
        'packages/local-azure/README.md',
        'packages/inbox/README.md',
        'infra/README.md',
      ]),
    );
  });

  it("lists every package.json script in docs/development.md's Scripts table, and nothing else", () => {
    const rows = section(development, '## Scripts')
      .filter(({ text }) => text.startsWith('| `'))
      .map(
        ({ text }) => /^\| `npm (?:run ([\w:-]+)|(test|start))`/.exec(text)?.slice(1).find(Boolean) ?? text,
      );

    // npm runs `pre<x>` and `post<x>` along with `x`: x's row tells them, they have no row of their own.
    const owner = (name: string) => name.replace(/^(pre|post)/, '');
    const hooks = scripts.filter((name) => owner(name) !== name && scripts.includes(owner(name)));
    expect([...rows].sort()).toEqual(scripts.filter((name) => !hooks.includes(name)).sort());
    for (const hook of hooks) {
      const command = ['test', 'start'].includes(owner(hook))
        ? `npm ${owner(hook)}`
        : `npm run ${owner(hook)}`;
      const row = section(development, '## Scripts').find(({ text }) => text.startsWith(`| \`${command}\``));
      expect(row?.text).toContain(`\`${hook}\``);
    }
  });

  it("shows, in the README's Commands table, only scripts package.json has", () => {
    const rows = section(readme, '## Commands')
      .filter(({ text }) => text.startsWith('| `'))
      .map(
        ({ text }) => /^\| `npm (?:run ([\w:-]+)|(test|start))`/.exec(text)?.slice(1).find(Boolean) ?? text,
      );

    expect(rows.length).toBeGreaterThan(5);
    expect(rows.filter((name) => !scripts.includes(name))).toEqual([]);
  });

  it('resolves every relative link and anchor', () => {
    const broken = docs.flatMap((doc) =>
      links(doc).flatMap(({ line, target }) => {
        const [path = '', anchor] = target.split('#');
        const file =
          path === ''
            ? doc.path
            : relative(PROJECT_ROOT, resolve(PROJECT_ROOT, dirname(doc.path), decodeURI(path)));
        const where = `${doc.path}:${line}: ${target}`;
        if (!existsSync(join(PROJECT_ROOT, file))) return [`${where} (no ${file})`];
        if (anchor === undefined) return [];
        if (!file.endsWith('.md')) return [`${where} (an anchor into a file that is not markdown)`];
        const target_ = docs.find((d) => d.path === file) ?? readMarkdown(file);
        return anchors(target_).has(anchor) ? [] : [`${where} (no heading with that anchor in ${file})`];
      }),
    );

    expect(broken).toEqual([]);
  });

  it('runs only scripts package.json has, with flags their tools read', () => {
    const problems = docs.flatMap((doc) =>
      npmCommands(doc).flatMap(({ line, script, args }) => {
        const where = `${doc.path}:${line}: npm run ${script}`;
        if (!scripts.includes(script)) return [`${where} (no such script)`];
        const flags = [
          ...(/^\s*--\s+(.*)/.exec(args)?.[1] ?? '')
            .split(/\s(?:#|>|\||&&)/)[0]!
            .matchAll(/(?:^|\s)--([a-z][\w-]*)/g),
        ].map((m) => m[1]!);
        const source = `${sourceOf(script)}\n${helpOf(script)}`;
        return flags
          .filter((flag) => !new RegExp(`--${flag}\\b|'${flag}'|\\b${flag}:`).test(source))
          .map((flag) => `${where} --${flag} (not read by ${packageJson.scripts[script]})`);
      }),
    );

    expect(problems).toEqual([]);
  });

  it('names only paths that exist in the README', () => {
    const generated = /^(dist|\.cache)\/|^local\.settings\.json$|^report\.json$|^events\.jsonl$/;
    const missing = readme.prose.flatMap(({ line, text }) =>
      inlineCode(text)
        .filter((code) =>
          /^[\w.-]*(\/[\w.*-]*)+$|^[\w-]*\.(json|ts|yml|yaml|md|sh|bicep)$|^\.\w+$/.test(code),
        )
        .filter((code) => !generated.test(code) && !code.includes('*'))
        .filter((code) => !existsSync(join(PROJECT_ROOT, code)))
        .map((code) => `README.md:${line}: ${code}`),
    );

    expect(missing).toEqual([]);
  });

  it('keeps the README a front page: at most 200 lines, the long tables in docs/ and the packages', () => {
    const lines = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8').trimEnd().split('\n');

    expect(lines.length).toBeLessThanOrEqual(200);
  });

  it('states the Node.js and azd versions the project requires', () => {
    const node = /^>=(\d+)$/.exec(packageJson.engines.node)![1];
    const azure = parse(readFileSync(join(PROJECT_ROOT, 'azure.yaml'), 'utf8')) as {
      requiredVersions: { azd: string };
    };
    const azd = /^>= ([\d.]+)$/.exec(azure.requiredVersions.azd)![1];
    const text = readme.prose.map(({ text }) => text).join('\n');

    expect(text).toContain(`Node.js **${node}** or later`);
    // The opening lines too: offline needs that Node.js, not any.
    expect(text).toContain(`Everything also runs offline with Node.js ${node} or later alone`);
    expect(readFileSync(join(PROJECT_ROOT, '.nvmrc'), 'utf8').trim()).toBe(node);
    expect(text).toContain(`You need azd ${azd} or later`);
  });

  it('says what the Bicep CLI download costs as find-bicep.sh says it', () => {
    const script = readFileSync(join(PROJECT_ROOT, 'infra', 'find-bicep.sh'), 'utf8');
    const download = /^download_mb=(\d+)$/m.exec(script)?.[1];
    const onDisk = /^expected_mb=(\d+)$/m.exec(script)?.[1];

    expect([download, onDisk]).toEqual([expect.any(String), expect.any(String)]);
    expect(readFileSync(join(PROJECT_ROOT, 'infra', 'README.md'), 'utf8').replace(/\s+/g, ' ')).toContain(
      `a download of about ${download} MB, about ${onDisk} MB on disk`,
    );
  });

  // The demo's sentence says only what a run does: the faults it injects by default are on by
  // default, and the others are named with the flag that adds them.
  const demo = join(PROJECT_ROOT, 'sample', 'demo.ts');
  (existsSync(demo) ? it : it.skip)(
    'says what npm run demo injects: its defaults, and the flags that add more',
    () => {
      const usage = readFileSync(demo, 'utf8');
      const sentence = /^`npm run demo` sends[\s\S]*?(?=\n\n)/m
        .exec(readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8'))?.[0]
        .replace(/\s+/g, ' ');
      const defaultRate = (flag: string): number =>
        Number(new RegExp(`--${flag} <rate>[^\\n]*\\(default ([\\d.]+)\\)`).exec(usage)?.[1] ?? 0);

      expect(sentence).toBeDefined();
      const said = {
        crashes: defaultRate('crash-before') + defaultRate('crash-after'),
        'lost completions': defaultRate('completion-lost'),
        'writes that outlast the lock': defaultRate('slow'),
        throttling: defaultRate('cosmos-429'),
        'single 503s': defaultRate('cosmos-503'),
      };
      for (const [words, rate] of Object.entries(said)) {
        expect([words, sentence!.includes(words), rate > 0]).toEqual([words, true, true]);
      }
      const flags = [...sentence!.matchAll(/`(--[\w-]+)`/g)].map((match) => match[1]!);
      expect(flags).toEqual(['--cosmos-outage', '--slow-dependency']);
      for (const flag of flags) expect(usage).toContain(`  ${flag} <start-minute>:<minutes>`);
    },
  );

  it('quotes excerpts exactly as they stand in their files', () => {
    const quoted = docs.flatMap((doc) =>
      doc.blocks.filter((block) => block.excerptOf !== undefined).map((block) => ({ doc, block })),
    );
    const stale = quoted
      .filter(({ doc, block }) => {
        const file = join(PROJECT_ROOT, dirname(doc.path), block.excerptOf!);
        return !existsSync(file) || !readFileSync(file, 'utf8').includes(block.text);
      })
      .map(({ doc, block }) => `${doc.path}:${block.line}: not in ${block.excerptOf}`);

    // Every excerpt marker was read as one (none is lost to a block that does not follow it).
    const markers = docs.flatMap((doc) =>
      doc.prose.filter(({ text }) => /^<!-- excerpt: /.test(text.trim())),
    );
    expect(quoted).toHaveLength(markers.length);
    expect(stale).toEqual([]);
  });

  it('marks its sample-only passages with balanced, unnested markers (npm run remove:samples cuts them)', () => {
    const problems = docs.flatMap((doc) =>
      withoutSamplePassages(readFileSync(join(PROJECT_ROOT, doc.path), 'utf8')).problems.map(
        (problem) => `${doc.path}: ${problem}`,
      ),
    );

    expect(problems).toEqual([]);
  });

  it('compiles every ts code block (`ts fragment` blocks and excerpts excepted)', () => {
    const blocks = docs.flatMap((doc) =>
      doc.blocks
        .filter((block) => /^(ts|typescript)$/.test(block.info) && block.excerptOf === undefined)
        .map((block) => ({
          file: join(PROJECT_ROOT, dirname(doc.path), `__docs_${block.line}.ts`),
          doc,
          block,
        })),
    );

    expect(blocks.length).toBeGreaterThan(0);
    expect(typeErrors(blocks)).toEqual([]);
  }, 120_000);
});

/** The files a script runs (a .js file compiled into .cache/bench is its .ts source) and what they import. */
const helpTexts = new Map<string, string>();

/**
 * What `npm run <script> -- --help` prints, for a script that runs a TypeScript tool with tsx (the
 * flags a tool builds from data, like the send tool's sample shortcuts, are only there).
 */
/** What a script's command says of its flags when asked: our tools' `--help`, or Stryker's. */
function helpOf(script: string): string {
  const command = packageJson.scripts[script] ?? '';
  const entry = /^tsx ([\w@./-]+\.ts)$/.exec(command)?.[1];
  const cli =
    entry !== undefined
      ? [require.resolve('tsx/cli'), entry]
      : command.startsWith('stryker run ')
        ? [join(PROJECT_ROOT, 'node_modules', '@stryker-mutator', 'core', 'bin', 'stryker.js'), 'run']
        : undefined;
  if (cli === undefined) return '';
  if (!helpTexts.has(script)) {
    const run = spawnSync(process.execPath, [...cli, '--help'], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    helpTexts.set(script, `${run.stdout}${run.stderr}`);
  }
  return helpTexts.get(script)!;
}

function sourceOf(script: string): string {
  const entries = [...packageJson.scripts[script]!.matchAll(/[\w@./-]+\.(?:ts|js)\b/g)]
    .map((m) => m[0].replace(/^\.cache\/bench\//, '').replace(/\.js$/, '.ts'))
    .filter((file) => existsSync(join(PROJECT_ROOT, file)));
  return entries
    .flatMap((entry) => {
      const text = readFileSync(join(PROJECT_ROOT, entry), 'utf8');
      const imports = [...text.matchAll(/from '(\.[^']+)'/g)]
        .map((m) => join(dirname(entry), m[1]!))
        .flatMap((path) => [`${path}.ts`, join(path, 'index.ts')])
        .filter(
          (path) => existsSync(join(PROJECT_ROOT, path)) && statSync(join(PROJECT_ROOT, path)).isFile(),
        );
      return [text, ...imports.map((path) => readFileSync(join(PROJECT_ROOT, path), 'utf8'))];
    })
    .join('\n');
}

/** Type-checks the blocks as files next to their markdown, with the project's compiler options. */
function typeErrors(blocks: { file: string; doc: Markdown; block: Markdown['blocks'][number] }[]): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(PROJECT_ROOT, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  )!;
  const virtual = new Map(blocks.map(({ file, block }) => [file, block.text]));
  const base = ts.createCompilerHost(config.options);
  const host: ts.CompilerHost = {
    ...base,
    fileExists: (name) => virtual.has(name) || base.fileExists(name),
    readFile: (name) => virtual.get(name) ?? base.readFile(name),
    getSourceFile: (name, language, ...rest) => {
      const text = virtual.get(name);
      return text === undefined
        ? base.getSourceFile(name, language, ...rest)
        : ts.createSourceFile(name, text, language);
    },
  };
  const program = ts.createProgram({
    rootNames: [...virtual.keys()],
    options: { ...config.options, noEmit: true },
    host,
  });
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
    const owner = blocks.find(({ file }) => file === diagnostic.file?.fileName);
    if (!owner || diagnostic.start === undefined) return message;
    const { line } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start);
    return `${owner.doc.path}:${owner.block.line + line}: ${message}`;
  });
}

/** Every folder of test/ is in test/README.md's table. */
describe('test/README.md', () => {
  it('lists every test folder', () => {
    const table = readFileSync(join(PROJECT_ROOT, 'test', 'README.md'), 'utf8');
    const folders = (folder: string): string[] =>
      readdirSync(join(PROJECT_ROOT, folder), { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .flatMap((entry) => {
          const path = `${folder}/${entry.name}`;
          return path.split('/').length < 4 ? [path, ...folders(path)] : [];
        });

    const unlisted = folders('test').filter(
      (folder) => !table.includes(`\`${folder}/\``) && !table.includes(`\`${folder}/*`),
    );
    expect(unlisted).toEqual([]);
  });
});
