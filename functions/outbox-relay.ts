import { app } from '@azure/functions';

import { outboxRelayTrigger } from '../src/app';

app.cosmosDB(...outboxRelayTrigger());
