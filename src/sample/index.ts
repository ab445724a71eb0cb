import { invoiceStatusProjector } from './invoiceStatusProjector';
import { paymentApplier } from './paymentApplier';
import { stockReserver } from './stockReserver';

export * from './documents';
export * from './messages';
export { invoiceStatusProjector, paymentApplier, stockReserver };

/** Every consumer of the sample, for tests and the offline model. */
export const sampleConsumers = [paymentApplier, stockReserver, invoiceStatusProjector] as const;
