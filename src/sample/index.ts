import { invoiceStatusProjector } from './invoiceStatusProjector';
import { paymentApplier } from './paymentApplier';
import { stockReserver } from './stockReserver';

export * from './documents';
export * from './messages';
export { invoiceStatusProjector, paymentApplier, stockReserver };
export * from './events';
