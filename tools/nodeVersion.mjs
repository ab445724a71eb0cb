// `npm test` runs this first (package.json "pretest"), with whatever Node.js the shell has: on an
// older one, `npm ci` refuses (engine-strict in .npmrc) and every later step would only say
// `tsc: not found`. Plain JavaScript, so it runs before anything is installed.
//
//   node tools/nodeVersion.mjs [version]    (default: this Node.js; exit 1 when it is too old)
/* global console, URL */
import { readFileSync } from 'node:fs';

// .nvmrc is the one place the project's Node.js version is written.
const required = Number(readFileSync(new URL('../.nvmrc', import.meta.url), 'utf8'));
const version = process.argv[2] ?? process.version;

if (!(Number(/^v?(\d+)/.exec(version)?.[1] ?? 0) >= required)) {
  console.error(
    [
      `This project needs Node.js ${required} or later; this is Node.js ${version.slice(0, 20)}.`,
      `  With nvm:   nvm install && nvm use   (both read .nvmrc), then npm ci`,
      `  Without:    bash .ci/run   (fetches Node.js ${required} from the npm registry into .cache/node22, then runs npm ci and npm test)`,
    ].join('\n'),
  );
  process.exit(1);
}
