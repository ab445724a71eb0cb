// The postprovision hook's second step (infra/scripts/retired-subscriptions.mjs): the subscriptions
// of consumers src/topology.json no longer declares are deleted when empty and named when they hold
// messages. It runs here as azd runs it, with Node.js, against a stand-in for Azure Resource Manager
// (the subscriptions of each topic, their counts, the deletes) and a fake `azd` that the real
// AzureDeveloperCliCredential asks for the token.

import { topology } from '../../src/topology';
import {
  type Answer,
  AZD_TOKEN,
  type FakeAzd,
  type RecordedRequest,
  runHookScript,
} from '../support/azdHook';

const script = 'infra/scripts/retired-subscriptions.mjs';
const namespacePath =
  '/subscriptions/0000-sub/resourceGroups/rg-env/providers/Microsoft.ServiceBus/namespaces/sb-ns';
const [firstTopic] = topology.topics;
const topic = firstTopic!.name;
const declared = firstTopic!.subscriptions.map((subscription) => subscription.name);

interface ArmSubscription {
  name: string;
  counts?: Partial<Record<'active' | 'deadLetter' | 'scheduled' | 'transfer' | 'transferDeadLetter', number>>;
}

function armSubscription({ name, counts = {} }: ArmSubscription): Record<string, unknown> {
  const countDetails = {
    activeMessageCount: counts.active ?? 0,
    deadLetterMessageCount: counts.deadLetter ?? 0,
    scheduledMessageCount: counts.scheduled ?? 0,
    transferMessageCount: counts.transfer ?? 0,
    transferDeadLetterMessageCount: counts.transferDeadLetter ?? 0,
  };
  return {
    id: `${namespacePath}/topics/${topic}/subscriptions/${name}`,
    name,
    properties: {
      countDetails,
      messageCount: Object.values(countDetails).reduce((sum, count) => sum + count, 0),
    },
  };
}

interface Run {
  options?: { azd?: FakeAzd; env?: Record<string, string> };
  /** The subscriptions of the first topic, in pages; other topics have none. */
  pages?: ArmSubscription[][];
  /** The answer to a listing of the first topic instead of its pages. */
  listing?: Answer;
}

async function retire({ options = {}, pages = [[]], listing }: Run) {
  return runHookScript({
    script,
    azd: options.azd ?? { kind: 'signed-in' },
    env: (endpoint) => ({
      AZURE_SUBSCRIPTION_ID: '0000-sub',
      AZURE_RESOURCE_GROUP: 'rg-env',
      SERVICEBUS_NAMESPACE: 'sb-ns',
      AZURE_RESOURCE_MANAGER_ENDPOINT: endpoint,
      ...options.env,
    }),
    answer: (request: RecordedRequest) => {
      const url = new URL(request.url, `http://${String(request.headers.host)}`);
      if (request.method === 'DELETE') return { status: 200, body: '' };
      if (!url.pathname.startsWith(`${namespacePath}/topics/${topic}/subscriptions`)) {
        return { status: 200, body: JSON.stringify({ value: [] }) };
      }
      if (listing) return listing;
      const page = Number(url.searchParams.get('page') ?? '0');
      const next =
        page + 1 < pages.length
          ? `${url.origin}${url.pathname}?api-version=2021-11-01&page=${page + 1}`
          : undefined;
      return {
        status: 200,
        body: JSON.stringify({
          value: (pages[page] ?? []).map(armSubscription),
          ...(next ? { nextLink: next } : {}),
        }),
      };
    },
  });
}

const deletes = (requests: readonly RecordedRequest[]): string[] =>
  requests
    .filter((request) => request.method === 'DELETE')
    .map((request) => new URL(request.url, 'http://x').pathname);

describe(script, () => {
  it('deletes an empty subscription of a consumer src/topology.json no longer declares, on every page, and keeps the declared ones', async () => {
    const run = await retire({
      pages: [
        [...declared.map((name) => ({ name })), { name: 'billing.retired-one' }],
        [{ name: 'shipping.renamed-before' }],
      ],
    });

    expect(run.status).toBe(0);
    expect(deletes(run.requests)).toEqual([
      `${namespacePath}/topics/${topic}/subscriptions/billing.retired-one`,
      `${namespacePath}/topics/${topic}/subscriptions/shipping.renamed-before`,
    ]);
    expect(run.stdout).toContain(
      `deleted subscription 'billing.retired-one' of topic '${topic}': no longer in src/topology.json, and empty.`,
    );
    expect(run.stdout).toContain('2 retired subscription(s) deleted, 0 left in place.');
    for (const request of run.requests) expect(request.headers.authorization).toBe(`Bearer ${AZD_TOKEN}`);
    // The token is for the Resource Manager endpoint the script calls.
    expect(run.azdCalls[0]).toMatch(
      /^auth token --output json --no-prompt --scope http:\/\/127\.0\.0\.1:\d+\/\.default$/,
    );
    // Every declared topic is listed.
    expect(
      new Set(
        run.requests
          .filter((r) => r.method === 'GET')
          .map((r) => new URL(r.url, 'http://x').pathname.split('/')[10]),
      ),
    ).toEqual(new Set(topology.topics.map((declaredTopic) => declaredTopic.name)));
  });

  it.each([
    ['active', { active: 3 }, '3 active'],
    ['dead-lettered', { deadLetter: 2 }, '2 dead-lettered'],
    ['scheduled', { scheduled: 1 }, '1 scheduled'],
    ['transfer', { transfer: 4 }, '4 transfer'],
    ['transfer dead-lettered', { transferDeadLetter: 5 }, '5 transfer dead-lettered'],
  ] as const)(
    'leaves one that holds %s messages in place, naming it, its counts and what to do',
    async (_kind, counts, described) => {
      const run = await retire({ pages: [[{ name: 'billing.retired-one', counts }]] });

      expect(run.status).toBe(0);
      expect(deletes(run.requests)).toEqual([]);
      expect(run.stderr).toContain(
        `warning: subscription 'billing.retired-one' of topic '${topic}' is no longer in src/topology.json but holds ${described}: left in place.`,
      );
      expect(run.stderr).toContain('npm run dead-letters -- list billing.retired-one');
      expect(run.stdout).toContain('0 retired subscription(s) deleted, 1 left in place.');
    },
  );

  it("leaves a subscription whose name is not a consumer's alone: someone made it by hand", async () => {
    const run = await retire({ pages: [[{ name: 'audit' }, { name: 'Ops_Tap' }]] });

    expect(deletes(run.requests)).toEqual([]);
    expect(run.stdout).toContain('0 retired subscription(s) deleted, 0 left in place.');
  });

  it('only reports with RETIRED_SUBSCRIPTIONS=report, and does nothing with off', async () => {
    const report = await retire({
      options: { env: { RETIRED_SUBSCRIPTIONS: 'report' } },
      pages: [[{ name: 'billing.retired-one' }]],
    });
    const off = await retire({
      options: { env: { RETIRED_SUBSCRIPTIONS: 'off' } },
      pages: [[{ name: 'billing.retired-one' }]],
    });

    expect(deletes(report.requests)).toEqual([]);
    expect(report.stdout).toContain("subscription 'billing.retired-one' of topic");
    expect(report.stdout).toContain('(RETIRED_SUBSCRIPTIONS=report: not deleted)');
    expect(off.requests).toEqual([]);
    expect(off.azdCalls).toEqual([]);
    expect(off.stdout).toContain('skipped: RETIRED_SUBSCRIPTIONS is off.');
  });

  it('warns and goes on when a listing is refused, or azd gives no token', async () => {
    const refused = await retire({
      listing: {
        status: 403,
        body: JSON.stringify({ error: { code: 'AuthorizationFailed', message: 'x'.repeat(500) } }),
      },
    });
    const signedOut = await retire({ options: { azd: { kind: 'signed-out' } } });

    expect(refused.status).toBe(0);
    expect(refused.stderr).toContain(
      `warning: could not list the subscriptions of topic '${topic}' (403 AuthorizationFailed); not checked.`,
    );
    expect(refused.stderr).not.toContain('xxx');
    expect(signedOut.status).toBe(0);
    expect(signedOut.requests).toEqual([]);
    expect(signedOut.stderr).toContain('warning: not checked: azd gave no token');
  });

  it('stops azd, saying why, only for a mistake in its own settings', async () => {
    const mode = await retire({ options: { env: { RETIRED_SUBSCRIPTIONS: 'purge-all' } } });
    const missing = await retire({ options: { env: { SERVICEBUS_NAMESPACE: '' } } });
    const odd = await retire({ options: { env: { AZURE_RESOURCE_GROUP: 'rg/../../other' } } });

    expect(mode.stderr).toContain(
      "RETIRED_SUBSCRIPTIONS must be one of delete, report, off, not 'purge-all'",
    );
    expect(missing.stderr).toContain(
      'AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, SERVICEBUS_NAMESPACE must be set',
    );
    expect(odd.stderr).toContain("AZURE_RESOURCE_GROUP is not a resource name: 'rg/../../other'");
    for (const run of [mode, missing, odd]) {
      expect(run.status).toBe(1);
      expect(run.requests).toEqual([]);
    }
  });
});
