import { existsSync, readFileSync } from 'node:fs';
import Module from 'node:module';
import { isAbsolute, join, resolve, sep } from 'node:path';

import {
  installCoreModule,
  loadFunctionApp,
  loggedOutcome,
  type ServiceBusDelivery,
} from '@idempotent-consumers/local-azure';

/**
 * Boots a deployment package in this (fresh) process the way the Azure Functions Node.js worker
 * does, and prints one JSON line: how long `main` took to load, what it registered, which settings
 * it read, and the outcome of each planned invocation. `npm run package` and the package
 * tests run it with plain `node` after bundling it (no tsx hooks in the timing).
 *
 *   node loadPackage.js <package folder> [<plan.json>]
 *
 * plan.json: { "invocations": [{ "function": "billing-payment-applier", "delivery": { "body": "...", ... } },
 *                              { "function": "outbox-relay", "documents": [ ...a change feed page ] }],
 *              "lingerMs": 0 }
 */
export interface LoadReport {
  loadMs: number;
  /** Milliseconds to require azureMonitor.js afterwards: the cost deferred past registration. */
  deferredMs: number;
  warnings: string[];
  functions: { name: string; bindings: Record<string, unknown> }[];
  /** Environment variables the app read while loading and invoking, sorted. */
  settingsRead: string[];
  /**
   * Modules the app asked for that are not in the package folder. They are refused, as on a host
   * where nothing else is on the app's module path: the app must cope (an optional probe) or fail.
   */
  refusedModules: string[];
  invocations: { function: string; outcome?: string; error?: string }[];
}

interface Plan {
  /** A Service Bus delivery, or a page of changes for a Cosmos DB trigger. */
  invocations?: (
    | { function: string; delivery: Omit<ServiceBusDelivery, 'enqueuedTimeUtc'> }
    | { function: string; documents: unknown[] }
  )[];
  /** Keep the process alive this long after the invocations (for telemetry to be exported). */
  lingerMs?: number;
}

async function main(directory: string, planFile: string | undefined): Promise<LoadReport> {
  const plan = planFile === undefined ? {} : (JSON.parse(readFileSync(planFile, 'utf8')) as Plan);
  const settingsRead = new Set<string>();
  process.env = new Proxy(process.env, {
    get(target, key) {
      if (typeof key === 'string') settingsRead.add(key);
      return Reflect.get(target, key) as unknown;
    },
    // process.env coerces what is assigned to it; a Proxy's default would define a property instead.
    set(target, key, value) {
      return Reflect.set(target, key, value);
    },
  });
  installCoreModule();
  const refusedModules = new Set<string>();
  const inside = resolve(directory) + sep;
  const loader = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
  const resolveFilename = loader._resolveFilename;
  loader._resolveFilename = function (request: string, ...rest: unknown[]): string {
    const resolved = resolveFilename.call(this, request, ...rest);
    if (isAbsolute(resolved) && !resolved.startsWith(inside)) {
      refusedModules.add(request);
      throw Object.assign(new Error(`Cannot find module '${request}' (outside the package)`), {
        code: 'MODULE_NOT_FOUND',
      });
    }
    return resolved;
  };
  const started = performance.now();
  const app = await loadFunctionApp(directory);
  const loadMs = performance.now() - started;
  const deferredStart = performance.now();
  const deferred = join(directory, 'azureMonitor.js');
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- timing the deferred module on its own
  if (existsSync(deferred)) require(deferred);
  const deferredMs = performance.now() - deferredStart;

  const invocations: LoadReport['invocations'] = [];
  for (const invocation of plan.invocations ?? []) {
    const name = invocation.function;
    const result =
      'documents' in invocation
        ? await app.invokeCosmosDB(name, invocation.documents, { retryCount: 0, maxRetryCount: 8 })
        : await app.invokeServiceBus(name, invocation.delivery);
    const outcome = loggedOutcome(result.logs);
    invocations.push({
      function: name,
      ...(outcome === undefined ? {} : { outcome }),
      ...(result.error === undefined ? {} : { error: `${result.error.name}: ${result.error.message}` }),
    });
  }
  if (plan.lingerMs) await new Promise((resolve) => setTimeout(resolve, plan.lingerMs));
  return {
    loadMs,
    deferredMs,
    warnings: app.warnings,
    functions: app.functions.map(({ name, metadata }) => ({ name, bindings: metadata.bindings })),
    settingsRead: [...settingsRead].sort(),
    refusedModules: [...refusedModules].sort(),
    invocations,
  };
}

const [directory, planFile] = process.argv.slice(2);
if (directory === undefined) {
  console.error('Usage: node loadPackage.js <package folder> [<plan.json>]');
  process.exitCode = 2;
} else {
  main(directory, planFile).then(
    (report) => {
      console.log(JSON.stringify(report));
      // The app's timers and clients must not keep a measurement waiting.
      process.exit(0);
    },
    (error: unknown) => {
      console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
      process.exit(1);
    },
  );
}
