export type { FaultHandle, FaultRule, FaultTarget } from './faults';
export { DEFAULT_KEY, type LocalCosmos, type LocalCosmosOptions, start } from './server';
export type { ClientUsage } from './throughput';
