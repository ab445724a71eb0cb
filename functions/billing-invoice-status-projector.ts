import { app } from '@azure/functions';

import { invoiceStatusProjector } from '../sample/src';
import { consumerTrigger } from '../src/app';

app.serviceBusTopic(...consumerTrigger(invoiceStatusProjector));
