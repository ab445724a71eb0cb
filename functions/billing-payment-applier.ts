import { app } from '@azure/functions';

import { consumerTrigger } from '../src/app';
import { paymentApplier } from '../src/sample';

app.serviceBusTopic(...consumerTrigger(paymentApplier));
