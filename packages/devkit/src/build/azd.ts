import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import ignore from 'ignore';
import { parse } from 'yaml';

/**
 * What azd does with a `host: function`, `language: ts` service, read from azd's source
 * (cli/azd/pkg/project/framework_service_node.go, service_target_functionapp.go, project_utils.go):
 * it runs `npm run build`, then zips the service's `dist` folder, leaving out `.azure/` folders,
 * `local.settings.json`, the `.funcignore` file itself and whatever that file (read from the zipped
 * folder) excludes with gitignore semantics. Without a `.funcignore` it also leaves out
 * `node_modules/` unless `remoteBuild` is false. Whether it builds remotely is read from
 * `remoteBuild`, which must then agree with the project folder's `.funcignore`.
 */
export interface AzdService {
  project: string;
  host: string;
  language: string;
  dist?: string;
  remoteBuild?: boolean;
}

export interface AzdProject {
  requiredVersions?: { azd?: string };
  services: Record<string, AzdService>;
}

export function readAzureYaml(root: string): AzdProject {
  return parse(readFileSync(join(root, 'azure.yaml'), 'utf8')) as AzdProject;
}

/** The files azd puts in the zip it deploys for `service` when it zips `folder` (its `dist`). */
export function azdZipEntries(folder: string, service: AzdService): string[] {
  const ignoreFile = join(folder, '.funcignore');
  const rules = existsSync(ignoreFile) ? ignore().add(readFileSync(ignoreFile, 'utf8')) : undefined;
  return listFiles(folder).filter((file) => {
    const parts = file.split('/');
    const name = parts[parts.length - 1] ?? '';
    if (parts.slice(0, -1).includes('.azure')) return false;
    if (file === '.funcignore' || name === 'local.settings.json') return false;
    if (rules) return !rules.ignores(file);
    return service.remoteBuild === false || !parts.includes('node_modules');
  });
}

/**
 * azd's remote-build decision for a TypeScript function app (1.23.12 and later): `remoteBuild: true`
 * requires the project's `.funcignore` to exclude node_modules, `remoteBuild: false` requires it not
 * to; unset, it builds remotely exactly when node_modules is excluded, or when there is no file.
 */
export function azdRemoteBuild(root: string, service: AzdService): { remoteBuild: boolean; error?: string } {
  const ignoreFile = join(root, service.project, '.funcignore');
  if (!existsSync(ignoreFile)) return { remoteBuild: service.remoteBuild ?? true };
  const excludesNodeModules = ignore().add(readFileSync(ignoreFile, 'utf8')).ignores('node_modules/');
  if (service.remoteBuild === undefined) return { remoteBuild: excludesNodeModules };
  if (service.remoteBuild && !excludesNodeModules) {
    return { remoteBuild: true, error: "'remoteBuild: true' requires '.funcignore' to exclude node_modules" };
  }
  if (!service.remoteBuild && excludesNodeModules) {
    return {
      remoteBuild: false,
      error: "'remoteBuild: false' cannot be used when '.funcignore' excludes node_modules",
    };
  }
  return { remoteBuild: service.remoteBuild };
}

/** Every file under `directory`, relative and sorted, with `/` separators. */
export function listFiles(directory: string): string[] {
  const files: string[] = [];
  const pending = [''];
  while (pending.length > 0) {
    const folder = pending.pop() ?? '';
    for (const entry of readdirSync(join(directory, folder), { withFileTypes: true })) {
      const path = folder === '' ? entry.name : `${folder}/${entry.name}`;
      if (entry.isDirectory()) pending.push(path);
      else files.push(path);
    }
  }
  return files.sort();
}
