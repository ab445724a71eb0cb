/**
 * The dev kit's one entry (@idempotent-consumers/devkit): the CLI kit every command is built on
 * (flags, exit codes, errors, progress, tables, formatted reports; src/cli/README.md) and the
 * project it works on, and verify (a consumer's test proves it exactly-once under faults, as
 * `npm run verify` does: src/verify, and the app on a deterministic simulation it runs on). The commands themselves run from package.json's scripts.
 */
export { bounded, EnvironmentError, ToolError, UsageError } from './cli/errors';
export { formatted, writeFormatted } from './cli/formatted';
export { type Progress, type ProgressOptions, startProgress } from './cli/progress';
export {
  appFunctions,
  appTopology,
  PROJECT_ROOT,
  relative,
  RETRY_COPIES,
  TOPOLOGY_PATH,
  writeTopology,
} from './cli/project';
export { listening, type LocalServer, serverCommand } from './cli/serve';
export { table } from './cli/table';
export {
  type Command,
  commandWithFlags,
  duplicateWindowFlag,
  EXIT_CODES,
  type ExitCode,
  type FlagValues,
  numberFlag,
  parseFlags,
  processContext,
  runCommand,
  runTool,
  type ToolContext,
  usageError,
} from './cli/tool';
export { connectServiceBus, topicFor, toServiceBusMessage } from './tools/serviceBus';
export {
  type AppOnSimulation,
  appOnSimulation,
  type AppOnSimulationOptions,
  BrokerRetryScheduler,
  type ScheduleRecord,
  settled,
  type SettledOptions,
} from './verify/appOnSimulation';
export { type Failure, type Verdict, verifyConsumers, type VerifyOptions } from './verify/verify';
