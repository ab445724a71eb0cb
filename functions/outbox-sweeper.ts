import { app } from '@azure/functions';

import { outboxSweeperTimer } from '../src/app';

app.timer(...outboxSweeperTimer());
