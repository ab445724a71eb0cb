export { CONDITIONS, PeerError } from './errors';
export { type LocalServiceBus, type LocalServiceBusOptions, start } from './server';
