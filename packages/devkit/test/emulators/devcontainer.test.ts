// .devcontainer/devcontainer.json must give a fresh Codespace or dev container what running and
// deploying this template takes: Node 22, Functions Core Tools, azd, the Azure CLI with the Bicep
// version the infra checks are pinned to, Docker for the emulators, and the installed dependencies.

import { readFileSync } from 'node:fs';
import path from 'node:path';

import { PROJECT_ROOT } from '../../src/cli/project';

interface DevContainer {
  image: string;
  features: Record<string, Record<string, unknown>>;
  postCreateCommand: string;
  customizations: { vscode: { extensions: string[] } };
}

const devcontainer = JSON.parse(
  readFileSync(path.join(PROJECT_ROOT, '.devcontainer', 'devcontainer.json'), 'utf8'),
) as DevContainer;
const feature = (id: string): Record<string, unknown> | undefined =>
  Object.entries(devcontainer.features).find(([reference]) => reference.split(':')[0] === id)?.[1];

describe('.devcontainer/devcontainer.json', () => {
  it('starts from the Node.js 22 TypeScript image on Debian bookworm (Core Tools has no trixie packages yet)', () => {
    expect(devcontainer.image).toMatch(
      /^mcr\.microsoft\.com\/devcontainers\/typescript-node:(\d+-)?22-bookworm$/,
    );
  });

  it('installs Functions Core Tools, azd, and Docker in Docker for the emulators', () => {
    expect(feature('ghcr.io/jlaundry/devcontainer-features/azure-functions-core-tools')).toBeDefined();
    expect(feature('ghcr.io/azure/azure-dev/azd')).toBeDefined();
    expect(feature('ghcr.io/devcontainers/features/docker-in-docker')).toBeDefined();
  });

  it('installs the Azure CLI with the Bicep version infra/find-bicep.sh pins', () => {
    const pinned = /BICEP_VERSION="\$\{BICEP_VERSION:-([0-9.]+)\}"/.exec(
      readFileSync(path.join(PROJECT_ROOT, 'infra', 'find-bicep.sh'), 'utf8'),
    )?.[1];

    expect(pinned).toBeDefined();
    expect(feature('ghcr.io/devcontainers/features/azure-cli')).toEqual({
      installBicep: true,
      bicepVersion: `v${pinned}`,
    });
  });

  it('pins every feature to a major version', () => {
    for (const reference of Object.keys(devcontainer.features)) {
      expect(reference).toMatch(/^ghcr\.io\/[\w.-]+\/[\w./-]+:\d+$/);
    }
  });

  it('installs exactly what package-lock.json pins once created', () => {
    expect(devcontainer.postCreateCommand).toBe('npm ci');
  });

  it('recommends the Functions, azd, Bicep, ESLint and Prettier extensions', () => {
    expect(devcontainer.customizations.vscode.extensions).toEqual(
      expect.arrayContaining([
        'ms-azuretools.vscode-azurefunctions',
        'ms-azuretools.azure-dev',
        'ms-azuretools.vscode-bicep',
        'dbaeumer.vscode-eslint',
        'esbenp.prettier-vscode',
      ]),
    );
  });
});
