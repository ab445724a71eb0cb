import { DefaultAzureCredential, type TokenCredential } from '@azure/identity';
import type {
  DeployedEntities,
  DeployedSubscription,
  DeployedTopic,
  Settings,
} from '@idempotent-consumers/inbox/internal';

/**
 * Reads the deployed topics and subscriptions the app's consumers read from, through Azure
 * Resource Manager (`GET <namespace>/topics/<topic>` and `…/subscriptions/<subscription>`), for the
 * drift guard (packages/inbox/src/entityDrift.ts). Least privilege: the built-in **Reader** role on each
 * topic (infra/modules/servicebus.bicep), control-plane reads only, no message; the data-plane
 * administration API would need the Manage claim (Data Owner). A refused or failed read throws
 * EntitiesUnreadable: the entities could not be checked, which is not drift.
 */
export const RESOURCE_MANAGER_API_VERSION = '2024-01-01';
/** One read may take this long: the worker's initialization allows 2 minutes in all. */
const READ_TIMEOUT_MS = 15_000;
/** An ARM entity is a few KB; more is not one. */
const MAX_RESPONSE_BYTES = 256 * 1024;

export class EntitiesUnreadable extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'EntitiesUnreadable';
  }
}

export function deployedEntitiesReader(
  serviceBus: Settings['serviceBus'],
  clientId: string | undefined,
): ((bindings: readonly { topic: string; subscription: string }[]) => Promise<DeployedEntities>) | undefined {
  const { resourceId, resourceManagerEndpoint } = serviceBus;
  if (resourceId === undefined) return undefined;
  // The local peer's imitation (http on loopback, which settings.ts only allows there) takes no token.
  const credential: TokenCredential | undefined = resourceManagerEndpoint.startsWith('https:')
    ? new DefaultAzureCredential(clientId === undefined ? {} : { managedIdentityClientId: clientId })
    : undefined;
  const scope = `${new URL(resourceManagerEndpoint).origin}/.default`;

  const get = async (path: string): Promise<Record<string, unknown>> => {
    const url = `${resourceManagerEndpoint}${resourceId.replace(/^\//, '')}/${path}?api-version=${RESOURCE_MANAGER_API_VERSION}`;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (credential) {
      const token = await credential.getToken(scope);
      if (!token) throw new EntitiesUnreadable('no token for Azure Resource Manager');
      headers.authorization = `Bearer ${token.token}`;
    }
    let response: Response;
    try {
      response = await fetch(url, { headers, signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
    } catch (error) {
      // fetch's errors come from undici's realm: read their fields, not their class.
      const { name, cause } = (error ?? {}) as { name?: unknown; cause?: { code?: unknown } };
      const code = typeof cause?.code === 'string' ? ` (${cause.code.slice(0, 40)})` : '';
      throw new EntitiesUnreadable(
        `${path}: ${typeof name === 'string' ? name.slice(0, 40) : 'request failed'}${code}`,
      );
    }
    const text = await response.text();
    if (response.status === 403 || response.status === 401) {
      throw new EntitiesUnreadable(
        `${path}: ${response.status}: the app's identity needs the Reader role on the topic (infra/modules/servicebus.bicep assigns it)`,
        response.status,
      );
    }
    if (!response.ok) throw new EntitiesUnreadable(`${path}: ${response.status}`, response.status);
    if (text.length > MAX_RESPONSE_BYTES)
      throw new EntitiesUnreadable(`${path}: response over ${MAX_RESPONSE_BYTES} bytes`);
    const body = JSON.parse(text) as { properties?: unknown };
    if (typeof body.properties !== 'object' || body.properties === null) {
      throw new EntitiesUnreadable(`${path}: no properties in the response`);
    }
    return body.properties as Record<string, unknown>;
  };

  // In parallel: the start-up check must fit the worker's initialization (2 minutes) whatever the
  // number of subscriptions, one READ_TIMEOUT_MS at most.
  return async (bindings) => {
    const topics = [...new Set(bindings.map((binding) => binding.topic))];
    const [topicProperties, subscriptionProperties] = await Promise.all([
      Promise.all(topics.map((topic) => get(`topics/${encodeURIComponent(topic)}`))),
      Promise.all(
        bindings.map(({ topic, subscription }) =>
          get(`topics/${encodeURIComponent(topic)}/subscriptions/${encodeURIComponent(subscription)}`),
        ),
      ),
    ]);
    return {
      topics: topics.map((topic, i): DeployedTopic => ({ topic, properties: topicProperties[i]! })),
      subscriptions: bindings.map(({ topic, subscription }, i): DeployedSubscription => ({
        topic,
        subscription,
        properties: subscriptionProperties[i]!,
      })),
    };
  };
}
