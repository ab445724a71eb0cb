import { RestError } from '@azure/core-rest-pipeline';
import { ErrorResponse } from '@azure/cosmos';
import { ServiceBusError } from '@azure/service-bus';

import { explainRefusal } from '../../src/tools/console/errors';

describe('a refusal explained: the role it needs', () => {
  it('Cosmos DB without a data-plane role (403)', () => {
    const refused = Object.assign(new ErrorResponse('Request blocked by Auth'), { code: 403 });
    expect(explainRefusal(refused, 'the partition')).toMatch(
      /^Cosmos DB refused to let your identity read the partition: .*Cosmos DB Built-in Data Reader/,
    );
  });

  it('Service Bus, on a link (UnauthorizedAccess) and on an administration read (HTTP 401)', () => {
    const link = new ServiceBusError(
      'Unauthorized access. Listen claim(s) are required',
      'UnauthorizedAccess',
    );
    const administration = new RestError('Manage,EntityRead claims required', { statusCode: 401 });
    expect(explainRefusal(link, 'the dead-letter queue')).toMatch(
      /^Service Bus refused to let your identity read the dead-letter queue: peeking needs Azure Service Bus Data Receiver/,
    );
    expect(explainRefusal(administration, 'the exact message counts')).toContain(
      'Azure Service Bus Data Owner',
    );
  });

  it('says nothing of any other error', () => {
    expect(explainRefusal(Object.assign(new ErrorResponse('Not found'), { code: 404 }), 'x')).toBeUndefined();
    expect(explainRefusal(new ServiceBusError('gone', 'MessagingEntityNotFound'), 'x')).toBeUndefined();
    expect(explainRefusal(new RestError('throttled', { statusCode: 429 }), 'x')).toBeUndefined();
    expect(explainRefusal(new Error('ECONNREFUSED'), 'x')).toBeUndefined();
  });
});
