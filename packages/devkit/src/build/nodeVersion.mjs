// `npm test` (packages/devkit/src/build/test.mjs) checks this first, with whatever Node.js the shell has: on an older
// one, `npm ci` refuses (engine-strict in .npmrc) and every later step would only say
// `tsc: not found`. Plain JavaScript, so it runs before anything is installed. Not a `pretest`
// script: .npmrc's ignore-scripts makes npm skip every pre- and post-script.
//
//   node packages/devkit/src/build/nodeVersion.mjs [version]    (default: this Node.js; exit 1 when it is too old)
/* global console */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Why this project cannot run on Node.js `version`, or undefined when it can. */
export function tooOld(version = process.version) {
  // .nvmrc is the one place the project's Node.js version is written: the app's, where npm runs
  // the script from (the dev kit may be installed anywhere under it).
  const required = Number(readFileSync(join(process.cwd(), '.nvmrc'), 'utf8'));
  if (Number(/^v?(\d+)/.exec(version)?.[1] ?? 0) >= required) return undefined;
  return [
    `This project needs Node.js ${required} or later; this is Node.js ${version.slice(0, 20)}.`,
    `  With nvm:   nvm install && nvm use   (both read .nvmrc), then npm ci`,
    `  Without:    bash .ci/run   (fetches Node.js ${required} from the npm registry into .cache/node22, then runs npm ci and npm test)`,
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const problem = tooOld(process.argv[2]);
  if (problem !== undefined) {
    console.error(problem);
    process.exit(1);
  }
}
