import { app } from '@azure/functions';

import { purge } from '../src/app';

// Every five minutes; each run is bounded (PURGE_MAX_ITEMS, PURGE_MAX_DURATION) and the next one
// continues from whatever is still expired.
app.timer('purge-expired-markers', {
  schedule: '0 */5 * * * *',
  runOnStartup: false,
  handler: purge,
});
