import { invoiceStatusProjector } from './invoiceStatusProjector';
import { paymentApplier } from './paymentApplier';
import { shipmentPlanner } from './shipmentPlanner';
import { stockReserver } from './stockReserver';

export * from './documents';
export * from './messages';
export { invoiceStatusProjector, paymentApplier, shipmentPlanner, stockReserver };
export * from './events';
