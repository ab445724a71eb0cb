import { app } from '@azure/functions';

import { shipmentPlanner } from '../sample/src';
import { consumerTrigger } from '../src/app';

app.serviceBusTopic(...consumerTrigger(shipmentPlanner));
