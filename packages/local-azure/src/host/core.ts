import { randomUUID } from 'node:crypto';
import { basename, dirname } from 'node:path';

import { traceIdOf } from './invocationRequest';

/**
 * A stand-in for `@azure/functions-core`, the module the Azure Functions Node.js worker injects
 * into the app's process (it is not an npm package). `@azure/functions` finds it with
 * `require('@azure/functions-core')`, hands it its programming model and registers every function
 * with it; without it the library runs in "test mode" and registers nothing.
 *
 * Written from the worker's source (Azure/azure-functions-nodejs-worker 3.9:
 * `setupCoreModule.ts`, `coreApi/registerFunction.ts`, `coreApi/setProgrammingModel.ts`,
 * `hooks/`, `startApp.ts`, `eventHandlers/InvocationHandler.ts`, `setupEventStream.ts`). The
 * exports up to `Disposable` are the module the app sees; the rest is the worker's side: the
 * registered functions, `startApp` and `invokeFunction`, which runs an RPC `InvocationRequest`
 * through the library's own `InvocationModel` as the worker does.
 */

// #region RPC types: the subset of the worker's types-core/index.d.ts that the offline stack uses.
export type RpcLogLevel = 'trace' | 'debug' | 'information' | 'warning' | 'error' | 'critical' | 'none';
export type RpcLogCategory = 'user' | 'system' | 'customMetric';

/** One value on the wire: exactly one field is set. */
export interface RpcTypedData {
  string?: string | null;
  json?: string | null;
  bytes?: Uint8Array | null;
  int?: number | null;
  double?: number | null;
}

export interface RpcParameterBinding {
  name?: string | null;
  data?: RpcTypedData | null;
}

export interface RpcTraceContext {
  traceParent?: string | null;
  traceState?: string | null;
  attributes?: Record<string, string> | null;
}

export interface RpcInvocationRequest {
  invocationId?: string | null;
  functionId?: string | null;
  inputData?: RpcParameterBinding[] | null;
  triggerMetadata?: Record<string, RpcTypedData> | null;
  traceContext?: RpcTraceContext | null;
  retryContext?: RpcRetryContext | null;
}

/** Set by the host on every attempt of a function with a retry policy (the first is retryCount 0). */
export interface RpcRetryContext {
  retryCount?: number | null;
  maxRetryCount?: number | null;
  exception?: { message?: string | null; stackTrace?: string | null; source?: string | null } | null;
}

export interface RpcStatusResult {
  status?: 'success' | 'failure' | 'cancelled' | null;
  exception?: { message?: string | null; stackTrace?: string | null } | null;
}

export interface RpcInvocationResponse {
  invocationId?: string | null;
  outputData?: RpcParameterBinding[] | null;
  returnValue?: RpcTypedData | null;
  result?: RpcStatusResult | null;
}

export interface RpcBindingInfo {
  type?: string | null;
  direction?: 'in' | 'out' | 'inout' | null;
  dataType?: 'undefined' | 'string' | 'binary' | 'stream' | null;
  /** Trigger options as the library passes them: topicName, subscriptionName, connection, schedule, ... */
  [option: string]: unknown;
}

/** What `@azure/functions` passes to `registerFunction`. */
export interface FunctionMetadata {
  name: string;
  functionId?: string;
  bindings: Record<string, RpcBindingInfo>;
  retryOptions?: unknown;
}

/** What the worker keeps, and hands back to the programming model on every invocation. */
export interface RpcFunctionMetadata extends FunctionMetadata {
  functionId: string;
  /** What the host reads: one JSON text per binding, its name included. */
  rawBindings: string[];
  scriptFile: string;
  directory?: string;
}

export type FunctionCallback = (...args: unknown[]) => unknown;
export type InvocationState = 'preInvocationHooks' | 'postInvocationHooks' | 'invocation';

export interface CoreInvocationContext {
  invocationId: string;
  request: RpcInvocationRequest;
  metadata: RpcFunctionMetadata;
  state?: InvocationState;
  log(level: RpcLogLevel, category: RpcLogCategory, message: string): void;
}

export interface InvocationModel {
  getArguments(): Promise<{ context: unknown; inputs: unknown[] }>;
  invokeFunction(context: unknown, inputs: unknown[], callback: FunctionCallback): Promise<unknown>;
  getResponse(context: unknown, result: unknown): Promise<RpcInvocationResponse>;
}

export interface ProgrammingModel {
  name: string;
  version: string;
  getInvocationModel(coreContext: CoreInvocationContext): InvocationModel | Promise<InvocationModel>;
  getCapabilities?(
    capabilities: Record<string, string>,
  ): Record<string, string> | Promise<Record<string, string>>;
}

export type HookData = Record<string, unknown>;
// The worker's hook contexts differ per hook; callbacks get the one for their hook.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type HookCallback = (context: any) => void | Promise<void>;
// #endregion

/** A log line the worker would send to the host (an RpcLog). */
export interface LogLine {
  level: RpcLogLevel;
  category: RpcLogCategory;
  text: string;
}

export interface RegisteredFunction {
  name: string;
  metadata: RpcFunctionMetadata;
  callback: FunctionCallback;
}

export interface InvocationResult {
  /** What the worker sends back: `result.status` is `success`, or `failure` with the exception. */
  response: RpcInvocationResponse;
  /** The error the function threw (the host then abandons a Service Bus message). */
  error?: Error;
  /** The invocation's log lines: the function's (`user`) and the worker's (`system`). */
  logs: LogLine[];
  /** The trace the invocation ran in (its request's trace context), when it names one. */
  traceId?: string;
}

/** The worker's errors carry this flag (they are the platform's, not the app's). */
class AzFuncSystemError extends Error {
  readonly isAzureFunctionsSystemError = true;
}

class AzFuncRangeError extends RangeError {
  readonly isAzureFunctionsSystemError = true;
}

class ReadOnlyError extends TypeError {
  readonly isAzureFunctionsSystemError = true;
  constructor(property: string) {
    super(`Cannot assign to read only property '${property}'`);
  }
}

const WORKER_ID = randomUUID();

/** The worker's AppContext: one per process. */
const worker = {
  programmingModel: undefined as ProgrammingModel | undefined,
  functions: new Map<string, RegisteredFunction>(),
  hooks: {
    preInvocation: [] as HookCallback[],
    postInvocation: [] as HookCallback[],
    appStart: [] as HookCallback[],
    appTerminate: [] as HookCallback[],
  },
  appHookData: {} as HookData,
  appLevelOnlyHookData: {} as HookData,
  currentEntryPoint: undefined as string | undefined,
};

// #region The module the app sees.
/** The worker version whose behaviour this models. */
export const version = '3.9.1';
/** A Functions host 4.x version (the worker reports the one it is started by). */
export const hostVersion = '4.1037.0.0';

/** VS Code's Disposable, as the worker ships it. */
export class Disposable {
  static from(...disposables: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => {
      for (const disposable of disposables) disposable.dispose();
    });
  }

  #callOnDispose: (() => unknown) | undefined;

  constructor(callOnDispose: () => unknown) {
    this.#callOnDispose = callOnDispose;
  }

  dispose(): unknown {
    const callback = this.#callOnDispose;
    this.#callOnDispose = undefined;
    return callback?.();
  }
}

export function setProgrammingModel(programmingModel: ProgrammingModel): void {
  if (worker.programmingModel) {
    log(
      'information',
      'system',
      `Setting Node.js programming model to "${programmingModel.name}" version "${programmingModel.version}"`,
    );
  }
  worker.programmingModel = programmingModel;
}

export function getProgrammingModel(): ProgrammingModel | undefined {
  return worker.programmingModel;
}

/**
 * Logging outside an invocation, which the worker forwards to the host. Offline, warnings and
 * errors go to the console (so loadFunctionApp reports those written while loading); the rest is
 * dropped.
 */
export function log(level: RpcLogLevel, category: RpcLogCategory, message: string): void {
  if (level === 'warning') console.warn(`[${category}] ${message}`);
  else if (level === 'error' || level === 'critical') console.error(`[${category}] ${message}`);
}

export function registerFunction(metadata: FunctionMetadata, callback: FunctionCallback): Disposable {
  const functionId = metadata.functionId || metadata.name;
  if (worker.functions.has(functionId)) {
    throw new AzFuncSystemError(`A function with id "${functionId}" has already been registered.`);
  }
  const entryPoint = worker.currentEntryPoint;
  worker.functions.set(functionId, {
    name: metadata.name,
    metadata: {
      ...metadata,
      functionId,
      rawBindings: Object.entries(metadata.bindings).map(([name, binding]) =>
        JSON.stringify({ ...binding, name }),
      ),
      scriptFile: entryPoint ? basename(entryPoint) : 'unknown',
      ...(entryPoint ? { directory: dirname(entryPoint) } : {}),
    },
    callback,
  });
  return new Disposable(() => worker.functions.delete(functionId));
}

export function registerHook(hookName: string, callback: HookCallback): Disposable {
  const hooks = hooksNamed(hookName);
  hooks.push(callback);
  return new Disposable(() => {
    const index = hooks.indexOf(callback);
    if (index > -1) hooks.splice(index, 1);
  });
}
// #endregion

// #region The worker's side.
/** What the worker registered, in registration order. */
export function registeredFunctions(): RegisteredFunction[] {
  return [...worker.functions.values()];
}

/**
 * The worker's start-up (`startApp`, then the capabilities exchange): loads each entry point with
 * `load`, noting it as the current entry point so that registrations record their script file,
 * then runs the `appStart` hooks and asks the programming model for its capabilities (which
 * locks `app.setup()`). `definitionsOnly` stops after loading: a tool that reads what the app
 * registered, and never runs it, does not start it (the worker has no such mode).
 */
export async function startApp(
  functionAppDirectory: string,
  entryPoints: readonly string[],
  load: (entryPoint: string) => unknown,
  { definitionsOnly = false }: { definitionsOnly?: boolean } = {},
): Promise<void> {
  for (const entryPoint of entryPoints) {
    worker.currentEntryPoint = entryPoint;
    try {
      await load(entryPoint);
    } catch (error) {
      if (error instanceof Error) {
        error.message = `Worker was unable to load entry point "${entryPoint}": ${error.message}`;
      }
      throw error;
    } finally {
      worker.currentEntryPoint = undefined;
    }
  }
  if (definitionsOnly) return;
  await executeHooks('appStart', {
    get hookData() {
      return worker.appLevelOnlyHookData;
    },
    get appHookData() {
      return worker.appHookData;
    },
    functionAppDirectory,
  });
  await worker.programmingModel?.getCapabilities?.({});
}

/**
 * The worker's terminate handler (`terminateWorker`): runs the `appTerminate` hooks, after which
 * the worker process exits. Here the process goes on, so what the app registered is forgotten
 * instead, as a new worker process would start: the next startApp loads the app afresh.
 */
export async function terminateApp(): Promise<void> {
  await executeHooks('appTerminate', {
    get hookData() {
      return worker.appLevelOnlyHookData;
    },
    get appHookData() {
      return worker.appHookData;
    },
  });
  worker.programmingModel = undefined;
  worker.functions.clear();
  for (const hooks of Object.values(worker.hooks)) hooks.splice(0);
  worker.appHookData = {};
  worker.appLevelOnlyHookData = {};
}

/**
 * The worker's InvocationHandler: builds the CoreInvocationContext, asks the programming model for
 * its InvocationModel, then getArguments → preInvocation hooks → invokeFunction → postInvocation
 * hooks → getResponse. A failure becomes a `failure` response, as setupEventStream sends it.
 */
export async function invokeFunction(request: RpcInvocationRequest): Promise<InvocationResult> {
  const logs: LogLine[] = [];
  const invocationId = request.invocationId ?? randomUUID();
  const traceId = traceIdOf(request.traceContext?.traceParent);
  const traced = traceId === undefined ? {} : { traceId };
  try {
    const response = await invoke({ ...request, invocationId }, logs);
    return { response: { ...response, result: { status: 'success' } }, logs, ...traced };
  } catch (thrown) {
    const error = thrown instanceof Error ? thrown : new Error(String(thrown));
    if ((error as Partial<AzFuncSystemError>).isAzureFunctionsSystemError) {
      logs.push({ level: 'error', category: 'system', text: error.message });
    }
    return {
      response: {
        invocationId,
        result: { status: 'failure', exception: { message: error.message, stackTrace: error.stack ?? null } },
      },
      error,
      logs,
      ...traced,
    };
  }
}

async function invoke(
  request: RpcInvocationRequest & { invocationId: string },
  logs: LogLine[],
): Promise<RpcInvocationResponse> {
  const functionId = request.functionId ?? '';
  const registered = worker.functions.get(functionId);
  if (!registered) {
    throw new AzFuncSystemError(`Function code for '${functionId}' is not loaded and cannot be invoked.`);
  }
  const coreContext: CoreInvocationContext = {
    invocationId: request.invocationId,
    request,
    metadata: registered.metadata,
    log: (level, category, message) => logs.push({ level, category, text: message }),
  };
  coreContext.log(
    'debug',
    'system',
    `Worker ${WORKER_ID} received FunctionInvocationRequest with invocationId ${request.invocationId}`,
  );
  const programmingModel = worker.programmingModel;
  if (!programmingModel) throw new AzFuncSystemError('No programming model was set.');
  const invocationModel = await programmingModel.getInvocationModel(coreContext);

  const hookData: HookData = {};
  const { context, inputs: initialInputs } = await invocationModel.getArguments();
  const readOnly = <T>(name: string, value: () => T): PropertyDescriptor => ({
    get: value,
    set: () => {
      throw new ReadOnlyError(name);
    },
    enumerable: true,
  });
  const hookContext = (): object =>
    Object.defineProperties(
      {},
      {
        hookData: readOnly('hookData', () => hookData),
        appHookData: readOnly('appHookData', () => worker.appHookData),
        invocationContext: readOnly('invocationContext', () => context),
      },
    );

  const preInvocation = Object.assign(hookContext(), {
    functionCallback: registered.callback,
    inputs: initialInputs,
  });
  await inState(coreContext, 'preInvocationHooks', () => executeHooks('preInvocation', preInvocation, logs));
  const inputs = preInvocation.inputs;

  const outcome: { inputs: unknown[]; result: unknown; error: unknown } = {
    inputs,
    result: null,
    error: null,
  };
  const postInvocation = Object.assign(hookContext(), outcome);
  await inState(coreContext, 'invocation', async () => {
    try {
      postInvocation.result = await invocationModel.invokeFunction(
        context,
        inputs,
        preInvocation.functionCallback,
      );
    } catch (error) {
      postInvocation.error = error;
    }
  });
  await inState(coreContext, 'postInvocationHooks', () =>
    executeHooks('postInvocation', postInvocation, logs),
  );

  if (postInvocation.error !== null && postInvocation.error !== undefined) {
    // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows what the function threw, as the worker does
    throw postInvocation.error;
  }
  return invocationModel.getResponse(context, postInvocation.result);
}

async function inState(
  coreContext: CoreInvocationContext,
  state: InvocationState,
  action: () => Promise<void>,
): Promise<void> {
  coreContext.state = state;
  try {
    await action();
  } finally {
    coreContext.state = undefined;
  }
}

async function executeHooks(hookName: string, context: object, logs?: LogLine[]): Promise<void> {
  const callbacks = hooksNamed(hookName);
  if (callbacks.length === 0) return;
  const note = (text: string): void => {
    const line: LogLine = { level: 'debug', category: 'system', text };
    if (logs) logs.push(line);
    else log(line.level, line.category, line.text);
  };
  note(`Executing ${callbacks.length} "${hookName}" hooks`);
  for (const callback of callbacks) await callback(context);
  note(`Executed "${hookName}" hooks`);
}

function hooksNamed(hookName: string): HookCallback[] {
  switch (hookName) {
    case 'preInvocation':
    case 'postInvocation':
    case 'appStart':
    case 'appTerminate':
      return worker.hooks[hookName];
    default:
      // The library turns this into "Log hooks require Azure Functions Host v4.34 or higher".
      throw new AzFuncRangeError(`Unrecognized hook "${hookName}"`);
  }
}
// #endregion
