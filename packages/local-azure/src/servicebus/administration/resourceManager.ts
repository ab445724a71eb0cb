import type { IncomingMessage, ServerResponse } from 'node:http';

import { localListener } from '../../localHttp';
import type { Broker, Subscription, Topic } from '../broker';
import { entityDuration } from './descriptions';

/**
 * The part of Azure Resource Manager the drift guard reads (src/serviceBusEntities.ts), over the
 * peer's model: `GET /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ServiceBus/
 * namespaces/<name>/topics/<topic>[/subscriptions/<subscription>]?api-version=…`, answered with the
 * entity as ARM writes it (`id`, `name`, `type`, `properties` with ARM's property names, the ones
 * infra/modules/servicebus.bicep sets). Only this peer's namespace (LOCAL_NAMESPACE_RESOURCE_ID)
 * is found, as in Azure: a wrong SERVICEBUS_RESOURCE_ID gets 404 ResourceNotFound. Plain HTTP on
 * a port of its own, without a token: a stand-in for
 * management.azure.com on loopback, which settings.ts allows only there. What an entity says changes
 * as the model does, for example after ServiceBusAdministrationClient updates a subscription over
 * the administration endpoint. Anything else: 404 or 405 with ARM's error body; a path that is no
 * URL or not percent-encoding, 400.
 */
export const LOCAL_NAMESPACE_RESOURCE_ID =
  '/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/local/providers/Microsoft.ServiceBus/namespaces/local-peer';

const PATH =
  /^\/subscriptions\/[^/]+\/resourceGroups\/[^/]+\/providers\/Microsoft\.ServiceBus\/namespaces\/[^/]+\/topics\/([^/]+)(?:\/subscriptions\/([^/]+))?$/i;

export function resourceManagerEndpoint(
  broker: Broker,
  listenHost: string,
): (request: IncomingMessage, response: ServerResponse) => void {
  return localListener(
    {
      name: 'local Resource Manager stand-in',
      listenHost,
      refuse: (response, status, message) => answer(response, status, error(codeOf(status), message)),
    },
    (request, response) => {
      if (request.method !== 'GET')
        return answer(response, 405, error('MethodNotAllowed', 'Only GET is served.'));
      const url = URL.parse(request.url ?? '/', 'http://local');
      const match = url && PATH.exec(url.pathname);
      if (!url) return answer(response, 400, error('BadRequest', 'The request path is not a URL.'));
      if (!match || !url.searchParams.get('api-version')) {
        return answer(response, 404, error('NotFound', 'No such resource on the local peer.'));
      }
      const base = url.pathname.slice(0, url.pathname.toLowerCase().indexOf('/topics/'));
      if (base.toLowerCase() !== LOCAL_NAMESPACE_RESOURCE_ID.toLowerCase())
        return answer(response, 404, error('ResourceNotFound', 'No such namespace on the local peer.'));
      const [topicName, subscriptionName] = [match[1]!, match[2]].map(decoded);
      if (topicName === undefined || (match[2] !== undefined && subscriptionName === undefined))
        return answer(response, 400, error('BadRequest', 'The request path is not percent-encoding.'));
      const topic = [...broker.topics.entries()].find(
        ([name]) => name.toLowerCase() === topicName.toLowerCase(),
      )?.[1];
      if (!topic) return answer(response, 404, error('ResourceNotFound', 'The topic does not exist.'));
      if (subscriptionName === undefined) return answer(response, 200, topicResource(base, topic));
      const subscription = topic.subscriptions.find(
        (s) => s.name.toLowerCase() === subscriptionName.toLowerCase(),
      );
      if (!subscription)
        return answer(response, 404, error('ResourceNotFound', 'The subscription does not exist.'));
      return answer(response, 200, subscriptionResource(base, topic, subscription));
    },
  );
}

/** A path segment decoded, or undefined when it is not percent-encoding (or not there). */
function decoded(segment: string | undefined): string | undefined {
  try {
    return segment === undefined ? undefined : decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

const codeOf = (status: number): string =>
  ({ 421: 'MisdirectedRequest', 500: 'InternalServerError' })[status] ?? 'BadRequest';

function topicResource(namespace: string, topic: Topic): object {
  return {
    id: `${namespace}/topics/${topic.name}`,
    name: topic.name,
    type: 'Microsoft.ServiceBus/Namespaces/Topics',
    properties: {
      status: 'Active',
      requiresDuplicateDetection: topic.requiresDuplicateDetection,
      duplicateDetectionHistoryTimeWindow: entityDuration(topic.duplicateWindowMs),
      defaultMessageTimeToLive: entityDuration(topic.messageTimeToLiveMs),
      subscriptionCount: topic.subscriptions.length,
    },
  };
}

function subscriptionResource(namespace: string, topic: Topic, subscription: Subscription): object {
  return {
    id: `${namespace}/topics/${topic.name}/subscriptions/${subscription.name}`,
    name: subscription.name,
    type: 'Microsoft.ServiceBus/Namespaces/Topics/Subscriptions',
    properties: {
      status: 'Active',
      lockDuration: entityDuration(subscription.entity.lockDurationMs),
      maxDeliveryCount: subscription.entity.maxDeliveryCount,
      defaultMessageTimeToLive: entityDuration(subscription.messageTimeToLiveMs),
      deadLetteringOnMessageExpiration: subscription.entity.deadLetteringOnMessageExpiration,
      requiresSession: subscription.entity.sessions !== undefined,
    },
  };
}

const error = (code: string, message: string): object => ({ error: { code, message } });

function answer(response: ServerResponse, status: number, body: object): void {
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  response.end(JSON.stringify(body));
}
