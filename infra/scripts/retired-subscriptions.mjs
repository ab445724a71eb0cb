// The second step of the azd postprovision hook (postprovision.mjs): a consumer removed from, or
// renamed in, src/topology.json leaves its Service Bus subscription behind, because a deployment
// never deletes what the template no longer declares. Left alone, the subscription keeps taking
// its subject's events, which expire into a dead-letter queue nobody drains (and fire the
// dead-letter alert) while the topic grows toward its quota. This step lists each declared topic's
// subscriptions through Azure Resource Manager, as the principal azd signed in as, and for each one
// the topology no longer declares:
//   - empty (no active, dead-lettered, scheduled or transfer message): deletes it, saying so;
//   - holding messages: leaves it, naming it with its counts and what to do (those messages are
//     someone's events: drain or resubmit them first).
// Only names shaped like a consumer's (`area.consumer-name`, the only subscriptions the template
// creates) are considered: a subscription someone made by hand on a topic (`audit`) is left alone.
// RETIRED_SUBSCRIPTIONS=report lists without deleting; =off skips the step. See infra/README.md,
// "Removing a consumer".
//
// Like the first step it never stops `azd up` for Azure's sake (a refused listing is a warning).
// Reads the azd environment: AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP and SERVICEBUS_NAMESPACE
// (outputs of infra/main.bicep), AZURE_TENANT_ID (optional), RETIRED_SUBSCRIPTIONS (delete, the
// default; report; off), AZURE_RESOURCE_MANAGER_ENDPOINT (default https://management.azure.com/).
/* global AbortSignal, fetch, URL */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

import { azdToken, bounded, failureOf, reporter, runStep, SettingsMistake, tokenSafeUrl } from './common.mjs';

const { say, warn } = reporter('retired-subscriptions');
const API_VERSION = '2021-11-01';
const MODES = ['delete', 'report', 'off'];
/** The names the template gives subscriptions: a consumer's (packages/inbox/src/topology.ts CONSUMER_NAME). */
const CONSUMER_NAME = /^(?=.{3,50}$)[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:\.[a-z][a-z0-9]*(?:-[a-z0-9]+)*)+$/;
/** Pages of one listing at most: a topic has at most 2,000 subscriptions, and ARM pages hold 100 or more. */
const MAX_PAGES = 100;

/** The topics and the subscriptions src/topology.json declares. */
function declared() {
  const topology = JSON.parse(readFileSync(new URL('../../src/topology.json', import.meta.url), 'utf8'));
  return new Map(
    (topology.topics ?? []).map((topic) => [
      topic.name,
      new Set((topic.subscriptions ?? []).map((s) => s.name)),
    ]),
  );
}

/** A call to Resource Manager: the parsed answer, or throws with a bounded reason. */
async function arm(url, token, method = 'GET') {
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: { Authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(60_000),
    });
  } catch (error) {
    throw new Error(failureOf(error));
  }
  const text = await response.text().catch(() => '');
  if (!response.ok) {
    let code;
    try {
      code = JSON.parse(text)?.error?.code;
    } catch {
      code = undefined;
    }
    throw new Error(bounded(`${response.status}${typeof code === 'string' ? ` ${code}` : ''}`));
  }
  return text === '' ? undefined : JSON.parse(text);
}

/** Every subscription of a topic, following nextLink (on the same host only). */
async function subscriptionsOf(topicUrl, token) {
  const found = [];
  let next = new URL(`${topicUrl}/subscriptions?api-version=${API_VERSION}`);
  for (let page = 0; next && page < MAX_PAGES; page += 1) {
    const answer = await arm(next, token);
    found.push(...(Array.isArray(answer?.value) ? answer.value : []));
    const link = typeof answer?.nextLink === 'string' ? new URL(answer.nextLink) : undefined;
    next = link && link.origin === next.origin ? link : undefined;
  }
  return found;
}

/** The messages a subscription holds, of every kind, from its countDetails. */
function messagesIn(subscription) {
  const counts = subscription?.properties?.countDetails ?? {};
  const kinds = [
    ['active', counts.activeMessageCount],
    ['dead-lettered', counts.deadLetterMessageCount],
    ['scheduled', counts.scheduledMessageCount],
    ['transfer', counts.transferMessageCount],
    ['transfer dead-lettered', counts.transferDeadLetterMessageCount],
  ].map(([kind, count]) => [kind, Number.isSafeInteger(count) && count > 0 ? count : 0]);
  const total = Math.max(
    kinds.reduce((sum, [, count]) => sum + count, 0),
    Number.isSafeInteger(subscription?.properties?.messageCount) ? subscription.properties.messageCount : 0,
  );
  return {
    total,
    described: kinds
      .filter(([, count]) => count > 0)
      .map(([kind, count]) => `${count} ${kind}`)
      .join(', '),
  };
}

export async function retireSubscriptions() {
  const mode = (process.env.RETIRED_SUBSCRIPTIONS ?? '').trim() || 'delete';
  if (!MODES.includes(mode)) {
    throw new SettingsMistake(
      `RETIRED_SUBSCRIPTIONS must be one of ${MODES.join(', ')}, not '${bounded(mode).slice(0, 40)}'`,
    );
  }
  if (mode === 'off') {
    say('skipped: RETIRED_SUBSCRIPTIONS is off.');
    return;
  }
  const names = ['AZURE_SUBSCRIPTION_ID', 'AZURE_RESOURCE_GROUP', 'SERVICEBUS_NAMESPACE'];
  const [subscriptionId, resourceGroup, namespace] = names.map((name) => process.env[name] ?? '');
  if (!subscriptionId || !resourceGroup || !namespace) {
    throw new SettingsMistake(
      `${names.join(', ')} must be set; azd sets them (the last two from the outputs of infra/main.bicep) when it runs this hook after provisioning.`,
    );
  }
  for (const [name, value] of [
    ['AZURE_SUBSCRIPTION_ID', subscriptionId],
    ['AZURE_RESOURCE_GROUP', resourceGroup],
    ['SERVICEBUS_NAMESPACE', namespace],
  ]) {
    if (!/^[A-Za-z0-9._()-]{1,90}$/.test(value)) {
      throw new SettingsMistake(`${name} is not a resource name: '${bounded(value).slice(0, 80)}'`);
    }
  }
  const armEndpoint = tokenSafeUrl(
    'AZURE_RESOURCE_MANAGER_ENDPOINT',
    process.env.AZURE_RESOURCE_MANAGER_ENDPOINT || 'https://management.azure.com/',
  );
  const { token, missing } = await azdToken(new URL('.default', armEndpoint).href);
  if (token === undefined) {
    warn(
      `not checked: ${missing}. Subscriptions of consumers removed from src/topology.json may be left behind.`,
    );
    return;
  }
  const namespaceUrl = new URL(
    `subscriptions/${subscriptionId}/resourceGroups/${resourceGroup}/providers/Microsoft.ServiceBus/namespaces/${namespace}`,
    armEndpoint,
  ).href;
  let deleted = 0;
  let kept = 0;
  for (const [topic, subscriptions] of declared()) {
    const topicUrl = `${namespaceUrl}/topics/${encodeURIComponent(topic)}`;
    let listed;
    try {
      listed = await subscriptionsOf(topicUrl, token);
    } catch (error) {
      warn(`could not list the subscriptions of topic '${topic}' (${error.message}); not checked.`);
      continue;
    }
    for (const subscription of listed) {
      const name = typeof subscription?.name === 'string' ? subscription.name : '';
      if (subscriptions.has(name) || !CONSUMER_NAME.test(name)) continue;
      const { total, described } = messagesIn(subscription);
      if (total > 0) {
        kept += 1;
        warn(
          `subscription '${name}' of topic '${topic}' is no longer in src/topology.json but holds ${described || `${total} messages`}: left in place. ` +
            `Drain it (npm run dead-letters -- list ${name}), or put the consumer back; it is deleted by the first provision that finds it empty.`,
        );
        continue;
      }
      if (mode === 'report') {
        kept += 1;
        say(
          `subscription '${name}' of topic '${topic}' is no longer in src/topology.json and is empty (RETIRED_SUBSCRIPTIONS=report: not deleted).`,
        );
        continue;
      }
      try {
        await arm(
          `${topicUrl}/subscriptions/${encodeURIComponent(name)}?api-version=${API_VERSION}`,
          token,
          'DELETE',
        );
        deleted += 1;
        say(`deleted subscription '${name}' of topic '${topic}': no longer in src/topology.json, and empty.`);
      } catch (error) {
        kept += 1;
        warn(`could not delete subscription '${name}' of topic '${topic}' (${error.message}); it stays.`);
      }
    }
  }
  say(`${deleted} retired subscription(s) deleted, ${kept} left in place.`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await runStep('retired-subscriptions', retireSubscriptions);
}
