import { app } from '@azure/functions';

import { consumerTrigger } from '../src/app';
import { shipmentPlanner } from '../src/sample';

app.serviceBusTopic(...consumerTrigger(shipmentPlanner));
