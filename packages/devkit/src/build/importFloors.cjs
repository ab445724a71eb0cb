// @ts-check
/**
 * The ESLint rule that keeps imports pointing one way (eslint.config.mjs runs it on every file):
 *
 *   library (packages/inbox/src) → app (src, functions, sample/src) → local Azure (packages/local-azure/src)
 *     → kit and build (packages/devkit/src: cli, build) → commands (packages/devkit/src: tools,
 *     emulators; the sample's demo and benchmarks)
 *
 * A file may import its own floor and those below it, never one above: the library knows nothing of
 * the app, local Azure nothing of the commands that start it. Outside the library, the library is
 * imported through its two entries only, the package `@idempotent-consumers/inbox` (what a consumer author uses)
 * and `@idempotent-consumers/inbox/internal` (what the app, local Azure and the tools use), never by file. And only the
 * sample itself and the function files that register its consumers import the sample, so that
 * `npm run remove:samples` can take it away whole. Tests (test/, sample/test/, each package's test/) may import anything.
 */
const { dirname, relative, resolve } = require('node:path');

/** Floors, lowest first; a file's floor is the one with the longest matching prefix. */
const FLOORS = [
  { floor: 0, name: 'the library', prefixes: ['packages/inbox/src/'] },
  { floor: 1, name: 'the app', prefixes: ['src/', 'functions/', 'sample/src/'] },
  { floor: 2, name: 'local Azure', prefixes: ['packages/local-azure/src/'] },
  {
    floor: 3,
    name: 'the CLI kit and the build',
    prefixes: ['packages/devkit/src/cli/', 'packages/devkit/src/build/'],
  },
  {
    floor: 4,
    name: 'the commands',
    prefixes: ['packages/devkit/src/tools/', 'packages/devkit/src/emulators/', 'sample/'],
  },
];

/** Tests import whatever they test. */
const UNRESTRICTED = [
  'test/',
  'sample/test/',
  'packages/inbox/test/',
  'packages/local-azure/test/',
  'packages/devkit/test/',
];

/** The library's entries (packages/inbox/package.json "exports"). */
const ENTRIES = {
  '@idempotent-consumers/inbox': 'packages/inbox/src/index.ts',
  '@idempotent-consumers/inbox/internal': 'packages/inbox/src/internal.ts',
  '@idempotent-consumers/inbox/testing': 'packages/inbox/src/testing.ts',
};

const LIBRARY = 'packages/inbox/src/';
const SAMPLE = 'sample/';

/** @param {string} path a path relative to the project, with '/' */
function floorOf(path) {
  if (UNRESTRICTED.some((prefix) => `${path}/`.startsWith(prefix))) return undefined;
  // A folder import (its index) is the folder's.
  const candidate = `${path}/`;
  let found;
  for (const floor of FLOORS) {
    for (const prefix of floor.prefixes) {
      if (candidate.startsWith(prefix) && (!found || prefix.length > found.prefix.length))
        found = { ...floor, prefix };
    }
  }
  return found;
}

/** @type {import('eslint').Rule.RuleModule} */
const importFloors = {
  meta: {
    type: 'problem',
    docs: { description: 'Imports point one way: library → app → local Azure → kit and build → commands.' },
    schema: [],
  },
  create(context) {
    const root = context.cwd;
    const file = relative(root, context.filename).split('\\').join('/');
    const from = floorOf(file);
    if (from === undefined) return {};
    /** @param {import('estree').Node} node @param {unknown} specifier */
    const check = (node, specifier) => {
      if (typeof specifier !== 'string') return;
      let target;
      if (specifier in ENTRIES) target = ENTRIES[/** @type {keyof typeof ENTRIES} */ (specifier)];
      else if (specifier.startsWith('.'))
        target = relative(root, resolve(dirname(context.filename), specifier))
          .split('\\')
          .join('/');
      else return; // a package or a Node.js module
      const to = floorOf(target);
      if (to === undefined) return;
      if (to.floor > from.floor) {
        context.report({
          node,
          message: `${file} is ${from.name}, which may not import ${to.name} (${target}): imports point one way, library → app → local Azure → kit and build → commands.`,
        });
      } else if (`${target}/`.startsWith(LIBRARY) && !file.startsWith(LIBRARY) && !(specifier in ENTRIES)) {
        context.report({
          node,
          message: `Import the library through its entries, '@idempotent-consumers/inbox' or '@idempotent-consumers/inbox/internal', not ${specifier}.`,
        });
      } else if (
        `${target}/`.startsWith(SAMPLE) &&
        !file.startsWith(SAMPLE) &&
        !file.startsWith('functions/')
      ) {
        context.report({
          node,
          message: `${file} may not import the sample (${target}): npm run remove:samples takes it away; only its function files and itself import it.`,
        });
      }
    };
    return {
      ImportDeclaration: (node) => check(node, node.source.value),
      ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
      ExportAllDeclaration: (node) => check(node, node.source.value),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value),
      CallExpression: (node) => {
        const { callee, arguments: args } = node;
        const first = args[0];
        if (callee.type === 'Identifier' && callee.name === 'require' && first?.type === 'Literal')
          check(node, first.value);
      },
    };
  },
};

module.exports = { ENTRIES, FLOORS, importFloors };
