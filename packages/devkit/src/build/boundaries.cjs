// @ts-check
/**
 * The ESLint rule that keeps the workspace's boundaries (eslint.config.mjs runs it on every file,
 * tests included):
 *
 * 1. No relative import leaves its package: a file of packages/<name>/ imports only files of that
 *    folder by path, and the app (everything outside packages/) none of packages/. Another package
 *    is imported by its name, through the entries its package.json exports.
 * 2. A package imports only the workspace packages its package.json declares (dependencies,
 *    devDependencies or peerDependencies), and only through an entry the imported package exports;
 *    its sources never import it by its own name (its tests may, to use it as its users do).
 * 3. What the app deploys (src/, functions/, sample/src/) imports only its `dependencies`: a
 *    development dependency (the dev kit, local Azure, a test library) is not in the package.
 *
 * and, inside a package, what package boundaries cannot say:
 *
 * 4. Only the sample itself and the function files that register its consumers import the sample,
 *    so that `npm run remove:samples` can take it away whole.
 * 5. In the dev kit, the CLI kit and the build (src/cli, src/build) import none of the commands
 *    (src/tools, src/emulators), which are built on them.
 */
const { existsSync, readdirSync, readFileSync } = require('node:fs');
const { builtinModules } = require('node:module');
const { dirname, join, relative, resolve } = require('node:path');

const SCOPE = '@idempotent-consumers/';
/** Modules no package.json declares: the one the Azure Functions worker injects. */
const PROVIDED = new Set(['@azure/functions-core']);
const DEPLOYED = ['src/', 'functions/', 'sample/src/'];

/** @typedef {{ name: string; exports?: Record<string, string>; dependencies?: Record<string, string>; devDependencies?: Record<string, string>; peerDependencies?: Record<string, string> }} Manifest */

/** @type {Map<string, Manifest | undefined>} */
const manifests = new Map();
/** @param {string} folder @returns {Manifest | undefined} */
function manifestIn(folder) {
  if (!manifests.has(folder)) {
    const file = join(folder, 'package.json');
    manifests.set(folder, existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : undefined);
  }
  return manifests.get(folder);
}

/**
 * The package a project path (relative, with '/') belongs to: `packages/<name>/`, or '' for the app.
 * @param {string} path
 */
function packageOf(path) {
  const match = /^packages\/([^/]+)\//.exec(`${path}/`);
  return match ? `packages/${match[1]}/` : '';
}

/** @type {Map<string, Map<string, { folder: string; manifest: Manifest }>>} */
const workspaces = new Map();
/** The workspace packages by name: their folder and manifest. @param {string} root */
function workspace(root) {
  let byName = workspaces.get(root);
  if (byName === undefined) {
    byName = new Map();
    const packages = join(root, 'packages');
    for (const entry of existsSync(packages) ? readdirSync(packages) : []) {
      const manifest = manifestIn(join(packages, entry));
      if (manifest) byName.set(manifest.name, { folder: `packages/${entry}/`, manifest });
    }
    workspaces.set(root, byName);
  }
  return byName;
}

/** Whether `subpath` ('.', './internal', './internal/tools/send') is one of `exports`' entries. @param {Record<string, string> | undefined} exports @param {string} subpath */
function exported(exports, subpath) {
  for (const entry of Object.keys(exports ?? { '.': '' })) {
    if (entry === subpath) return true;
    const star = entry.indexOf('*');
    if (star >= 0 && subpath.startsWith(entry.slice(0, star)) && subpath.endsWith(entry.slice(star + 1)))
      return true;
  }
  return false;
}

/** The package name of a bare specifier ('@scope/name/sub' → '@scope/name'). @param {string} specifier */
function packageName(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

/** @type {import('eslint').Rule.RuleModule} */
const boundaries = {
  meta: {
    type: 'problem',
    docs: {
      description:
        "Imports keep the workspace's package boundaries (packages/devkit/src/build/boundaries.cjs).",
    },
    schema: [],
  },
  create(context) {
    const root = context.cwd;
    const file = relative(root, context.filename).split('\\').join('/');
    if (file.startsWith('..') || file.includes('node_modules/')) return {};
    const home = packageOf(file);
    const manifest = manifestIn(join(root, home));
    const label = home === '' ? 'the app' : `${manifest?.name ?? home} (${home})`;
    const deployed = home === '' && DEPLOYED.some((prefix) => file.startsWith(prefix));
    const inSample = file.startsWith('sample/');
    const devkitFloor = /^packages\/devkit\/src\/(cli|build)\//.test(file);

    /** @param {import('estree').Node} node @param {unknown} specifier @param {boolean} typeOnly */
    const check = (node, specifier, typeOnly) => {
      if (typeof specifier !== 'string') return;
      const report = (/** @type {string} */ message) => context.report({ node, message });
      if (specifier.startsWith('.')) {
        const target = relative(root, resolve(dirname(context.filename), specifier))
          .split('\\')
          .join('/');
        if (target.startsWith('..') || packageOf(target) !== home) {
          const owner = [...workspace(root).values()].find(({ folder }) => `${target}/`.startsWith(folder));
          report(
            `${file} is in ${label}; a relative import may not leave it (${target}): ` +
              (owner
                ? `import ${owner.manifest.name} through its entries.`
                : 'that file belongs to another package.'),
          );
          return;
        }
        if (`${target}/`.startsWith('sample/') && !inSample && !file.startsWith('functions/'))
          report(
            `${file} may not import the sample (${target}): npm run remove:samples takes it away; only its function files and itself import it.`,
          );
        if (devkitFloor && /^packages\/devkit\/src\/(tools|emulators)(\/|$)/.test(target))
          report(
            `${file} is the dev kit's CLI kit or build, which may not import a command (${target}): the commands are built on the kit.`,
          );
        return;
      }
      if (specifier.startsWith('node:') || builtinModules.includes(specifier)) return;
      const name = packageName(specifier);
      if (PROVIDED.has(name)) return;
      const declared = {
        ...manifest?.dependencies,
        ...manifest?.devDependencies,
        ...manifest?.peerDependencies,
      };
      if (name.startsWith(SCOPE)) {
        const target = workspace(root).get(name);
        if (manifest?.name === name) {
          // A package's tests may use its entries as its users do; its sources import their own modules.
          if (!file.startsWith(`${home}test/`))
            report(
              `${file} is in ${name}: import its own modules by relative path, not by the package's name.`,
            );
          return;
        }
        if (!(name in declared)) {
          report(`${label} imports ${name}, which its package.json does not declare.`);
          return;
        }
        const subpath = `.${specifier.slice(name.length)}`;
        if (target && !exported(target.manifest.exports, subpath))
          report(
            `${specifier} is not an entry of ${name} (its package.json exports ${Object.keys(target.manifest.exports ?? {}).join(', ')}).`,
          );
      }
      if (deployed && !typeOnly && !(name in (manifest?.dependencies ?? {})))
        report(
          `${file} is deployed, and imports ${name}, which is not among the app's dependencies: a development dependency is not in the deployment package.`,
        );
    };
    /** Whether a TypeScript declaration imports or exports types only (`import type`). @param {unknown} node */
    const typeOnly = (node) => {
      const kinds = /** @type {{ importKind?: string; exportKind?: string }} */ (node);
      return kinds.importKind === 'type' || kinds.exportKind === 'type';
    };
    return {
      ImportDeclaration: (node) => check(node, node.source.value, typeOnly(node)),
      ExportNamedDeclaration: (node) => node.source && check(node, node.source.value, typeOnly(node)),
      ExportAllDeclaration: (node) => check(node, node.source.value, typeOnly(node)),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value, false),
      CallExpression: (node) => {
        const { callee, arguments: args } = node;
        const first = args[0];
        if (callee.type === 'Identifier' && callee.name === 'require' && first?.type === 'Literal')
          check(node, first.value, false);
      },
    };
  },
};

module.exports = { boundaries };
