/**
 * Request units reported in `x-ms-request-charge`. These are ESTIMATES shaped like Cosmos DB's
 * published rules of thumb (a 1 KB point read ≈ 1 RU, a 1 KB write ≈ 5 RU), not what Azure would
 * bill: they let tests and benchmarks compare designs, not predict a bill.
 */
const KB = 1024;

export const readCharge = (bytes: number): number => Math.max(1, Math.ceil(bytes / KB));
export const writeCharge = (bytes: number): number => 5 * Math.max(1, Math.ceil(bytes / KB));
export const queryCharge = (bytesScanned: number, bytesReturned: number): number =>
  round(2 + bytesScanned / (10 * KB) + bytesReturned / KB);
/** A request that fails before touching data (404, 409, 412, 400) still costs about one read. */
export const FAILED_REQUEST_CHARGE = 1;
export const METADATA_CHARGE = 1;

const round = (value: number): number => Math.round(value * 100) / 100;
