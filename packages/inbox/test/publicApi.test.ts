import { join } from 'node:path';

import ts from 'typescript';

/**
 * The inbox's public entry, packages/inbox/src/index.ts: what a consumer author uses. Changing it is a
 * deliberate decision: update this list, the entry's doc and the README's "Add a consumer" together.
 * Everything else belongs behind packages/inbox/src/internal.ts.
 */
const PUBLIC_API = {
  BusinessDocument: 'type',
  ConcurrencyConflictError: 'value',
  defineInboxConsumer: 'value',
  defineVersionedConsumer: 'value',
  Delivery: 'type',
  InboxConsumer: 'type',
  InboxError: 'value',
  OutgoingMessage: 'type',
  PartitionTransaction: 'value',
  PatchStep: 'type',
  PoisonMessageError: 'value',
  ReadResult: 'type',
  Settings: 'type',
  SettingsError: 'value',
  TransientStoreError: 'value',
  VersionedConsumer: 'type',
  VersionedDocument: 'type',
} as const;

const DECISION =
  'The public API of packages/inbox/src changed. That is a deliberate decision: update PUBLIC_API in ' +
  'packages/inbox/test/publicApi.test.ts and the docs with it, or export the name from packages/inbox/src/internal.ts instead.';

const ENTRY = join(__dirname, '..', 'src', 'index.ts');

interface PublicSymbol {
  name: string;
  kind: 'value' | 'type';
  doc: string;
  tags: string[];
}

/** The entry's exports as the compiler sees them, each resolved to its declaration. */
function publicSymbols(): PublicSymbol[] {
  const program = ts.createProgram([ENTRY], { strict: true, noEmit: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const entry = checker.getSymbolAtLocation(program.getSourceFile(ENTRY) as ts.SourceFile);
  if (!entry) throw new Error(`${ENTRY} is not a module`);
  return checker.getExportsOfModule(entry).map((exported) => {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    return {
      name: exported.name,
      kind: symbol.flags & ts.SymbolFlags.Value ? 'value' : 'type',
      doc: ts.displayPartsToString(symbol.getDocumentationComment(checker)),
      tags: symbol.getJsDocTags(checker).map((tag) => tag.name),
    };
  });
}

/** 'unchanged', or what changed between the pinned list and `actual`, prefixed with why it matters. */
function changes(actual: Record<string, string>, pinned: Record<string, string>): string {
  const lines = [...new Set([...Object.keys(actual), ...Object.keys(pinned)])]
    .filter((name) => actual[name] !== pinned[name])
    .sort()
    .map((name) => `  ${name}: pinned ${pinned[name] ?? 'absent'}, now ${actual[name] ?? 'absent'}`);
  return lines.length === 0 ? 'unchanged' : `${DECISION}\n${lines.join('\n')}`;
}

describe('packages/inbox/src public API', () => {
  const symbols = publicSymbols();

  it('exports exactly the pinned names, values and types', () => {
    const exported = Object.fromEntries(symbols.map(({ name, kind }) => [name, kind]));

    expect(changes(exported, PUBLIC_API)).toBe('unchanged');
  });

  it('has at run time exactly the pinned values', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the module object as a consumer gets it
    const runtime = Object.keys(require('@idempotent-consumers/inbox') as object);
    const values = Object.entries(PUBLIC_API).filter(([, kind]) => kind === 'value');

    expect(
      changes(Object.fromEntries(runtime.map((name) => [name, 'value'])), Object.fromEntries(values)),
    ).toBe('unchanged');
  });

  it('documents every public name on its own declaration', () => {
    const undocumented = symbols.filter(({ doc }) => doc.trim().length < 40).map(({ name }) => name);

    expect(undocumented).toEqual([]);
  });

  it('shows how to use what a consumer author calls or implements', () => {
    const withExample = symbols.filter(({ tags }) => tags.includes('example')).map(({ name }) => name);

    expect(withExample).toEqual(
      expect.arrayContaining([
        'defineInboxConsumer',
        'defineVersionedConsumer',
        'OutgoingMessage',
        'PartitionTransaction',
        'PoisonMessageError',
        'Settings',
      ]),
    );
  });
});
