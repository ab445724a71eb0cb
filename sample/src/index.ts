import { invoiceStatusProjector } from './invoiceStatusProjector';
import { paymentApplier } from './paymentApplier';
import { shipmentPlanner, SHIPPING_EVENTS } from './shipmentPlanner';
import { stockReserver } from './stockReserver';

export * from './documents';
export * from './messages';
export { invoiceStatusProjector, paymentApplier, shipmentPlanner, SHIPPING_EVENTS, stockReserver };
export * from './events';
