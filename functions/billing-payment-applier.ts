import { app } from '@azure/functions';

import { paymentApplier } from '../sample/src';
import { consumerTrigger } from '../src/app';

app.serviceBusTopic(...consumerTrigger(paymentApplier));
