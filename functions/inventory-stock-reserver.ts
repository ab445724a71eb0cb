import { app } from '@azure/functions';

import { consumerTrigger } from '../src/app';
import { stockReserver } from '../src/sample';

app.serviceBusTopic(...consumerTrigger(stockReserver));
