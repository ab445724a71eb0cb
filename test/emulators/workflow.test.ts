// .github/workflows/ci.yml is what users' CI runs: it must run the README's test command on Node 22
// with the pinned Bicep CLI, and keep the live tests optional, keyless and behind a variable.

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { parse } from 'yaml';

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

const repoRoot = path.resolve(__dirname, '..', '..');
const workflowText = readFileSync(path.join(repoRoot, '.github', 'workflows', 'ci.yml'), 'utf8');
const workflow = parse(workflowText) as Workflow;
const packageJson = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
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

  it('checks out, sets up Node 22 with the npm cache, then runs npm ci before npm test', () => {
    const test = job('test');
    const checkout = stepIndex(test, uses('actions/checkout'), 'checking out');
    const setupNode = stepIndex(test, uses('actions/setup-node'), 'setting up Node');
    const install = stepIndex(test, runs('npm ci'), 'running npm ci');
    const npmTest = stepIndex(test, runs('npm test'), 'running npm test');

    expect(test.steps[setupNode]?.with).toMatchObject({ 'node-version': 22, cache: 'npm' });
    expect(22).toBeGreaterThanOrEqual(Number(/>=\s*(\d+)/.exec(packageJson.engines.node)?.[1]));
    expect(packageJson.scripts['test']).toBeDefined();
    expect(checkout).toBeLessThan(setupNode);
    expect(setupNode).toBeLessThan(install);
    expect(install).toBeLessThan(npmTest);
  });

  it('gives npm test the pinned Bicep CLI through BICEP_PATH, so the infra tests run instead of skipping', () => {
    const test = job('test');
    const bicep = stepIndex(
      test,
      (step) => (step.run ?? '').includes('infra/find-bicep.sh'),
      'finding Bicep',
    );
    const npmTest = stepIndex(test, runs('npm test'), 'running npm test');

    expect(test.steps[bicep]?.run).toMatch(/BICEP_PATH="\$\(bash infra\/find-bicep\.sh\)"/);
    expect(test.steps[bicep]?.run).toContain('>> "$GITHUB_ENV"');
    expect(bicep).toBeLessThan(npmTest);
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
