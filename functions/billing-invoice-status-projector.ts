import { app } from '@azure/functions';

import { consumerTrigger } from '../src/app';
import { invoiceStatusProjector } from '../src/sample';

app.serviceBusTopic(...consumerTrigger(invoiceStatusProjector));
