import { invoiceStatusProjector } from './invoiceStatusProjector';
import { paymentApplier } from './paymentApplier';
import { SHIPPING_EVENTS, shipmentPlanner } from './shipmentPlanner';
import { stockReserver } from './stockReserver';

export * from './documents';
export * from './messages';
export { invoiceStatusProjector, paymentApplier, SHIPPING_EVENTS, shipmentPlanner, stockReserver };
export * from './events';
