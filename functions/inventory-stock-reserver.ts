import { app } from '@azure/functions';

import { stockReserver } from '../sample/src';
import { consumerTrigger } from '../src/app';

app.serviceBusTopic(...consumerTrigger(stockReserver));
