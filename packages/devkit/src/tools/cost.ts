import type { ParseArgsConfig } from 'node:util';

import { type Topology } from '@idempotent-consumers/inbox/internal';

import { bounded } from '../cli/errors';
import { appTopology } from '../cli/project';
import { table } from '../cli/table';
import {
  type Command,
  EXIT_CODES,
  type ExitCode,
  numberFlag,
  parseFlags,
  runCommand,
  type ToolContext,
  usageError,
} from '../cli/tool';
import { cosmosInputs, type TypicalEvent } from './cost/inputs';
import {
  cosmosCosts,
  type EventOperations,
  type OutcomeCost,
  poisonOperations,
  provisionedRequestUnitsPerSecond,
  SERVICE_BUS_THROTTLING_SOURCE,
  serviceBusOperations,
  STANDARD_CREDITS_PER_SECOND,
  sustainableEventsPerSecond,
} from './cost/model';
import { type ListPrice, type PriceName, PRICES } from './cost/prices';

const topology = appTopology();

const USAGE = `Usage:
  npm run cost -- [--rate 10] [--reads 1] [--writes 1] [--document-bytes 500] [--publishes 0] [--event-bytes 300] [--json]
Prints what one message costs for src/topology.json: Cosmos DB request units per outcome, Service Bus
operations per event and the events per second a Standard namespace sustains, the RU/s a provisioned
container needs at --rate, and money per million events at list prices (packages/devkit/src/tools/cost/prices.ts) or yours.
Options:
  --rate <n>            events per second for the provisioned RU/s (default 10)
  --reads <n>           point reads the handler makes per message (tx.read; default 1)
  --writes <n>          business documents it writes per message (default 1)
  --document-bytes <n>  a business document's size as JSON (default 500)
  --publishes <n>       messages it publishes per message (tx.publish; default 0)
  --event-bytes <n>     a published event's body as JSON (default 300)
  --usd-per-million-ru <price>          Cosmos DB serverless
  --usd-per-100-rus-hour <price>        Cosmos DB provisioned throughput
  --usd-per-million-operations <price>  Service Bus Standard operations
  --usd-base-per-hour <price>           Service Bus Standard base charge
  --json                one JSON object instead of tables
Environment: SERVICEBUS_MAX_DELIVERY_COUNT (default 10): the deliveries a poison message gets.
The request units follow Microsoft's rules of thumb (1 KB point read 1 RU, 1 KB write 5 RU), the rules the
local Cosmos DB server charges by: for comparing and sizing, not a bill.`;

const FLAGS = {
  allowPositionals: false,
  strict: true,
  options: {
    rate: { type: 'string' },
    reads: { type: 'string' },
    writes: { type: 'string' },
    'document-bytes': { type: 'string' },
    publishes: { type: 'string' },
    'event-bytes': { type: 'string' },
    'usd-per-million-ru': { type: 'string' },
    'usd-per-100-rus-hour': { type: 'string' },
    'usd-per-million-operations': { type: 'string' },
    'usd-base-per-hour': { type: 'string' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
} satisfies ParseArgsConfig;

type Flags = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

/** Each price flag and the list price it replaces. */
const PRICE_FLAGS = {
  'usd-per-million-ru': 'cosmosServerlessPerMillionRu',
  'usd-per-100-rus-hour': 'cosmosProvisionedPer100RuPerSecondHour',
  'usd-per-million-operations': 'serviceBusStandardPerMillionOperations',
  'usd-base-per-hour': 'serviceBusStandardBasePerHour',
} as const satisfies Record<string, PriceName>;

/** A price as the report uses it: the list price, or the one the user passed. */
interface UsedPrice extends ListPrice {
  given: boolean;
}

export interface CostReport {
  assumptions: TypicalEvent & { rate: number; markerBytes: number; outboxDocumentBytes: number };
  basis: string;
  cosmos: OutcomeCost[];
  serviceBus: (EventOperations & { sustainableEventsPerSecond: number })[];
  /** A poison message in one subscription that takes it, at SERVICEBUS_MAX_DELIVERY_COUNT. */
  poison: ReturnType<typeof poisonOperations>;
  throttling: { creditsPerSecond: number; source: string };
  provisioned: { eventsPerSecond: number; requestUnitsPerSecond: number };
  prices: Record<PriceName, UsedPrice>;
  /** Per subject, US dollars per million events. */
  perMillionEvents: {
    topic: string;
    subject: string;
    cosmosServerlessUsd: number;
    cosmosProvisionedUsd: number;
    serviceBusOperationsUsd: number;
  }[];
  serviceBusBasePerMonthUsd: number;
}

const BASIS =
  "Request units from Microsoft's rules of thumb (https://learn.microsoft.com/azure/cosmos-db/request-units), " +
  'the rules the local Cosmos DB server charges by (packages/local-azure/src/cosmos/requestCharge.ts): estimates for sizing, not a bill.';

/** The report for the flags' typical event: what `npm run cost` prints. */
export function costReport(
  event: TypicalEvent,
  rate: number,
  prices: Record<PriceName, UsedPrice>,
  maxDeliveryCount = 10,
  declared: Topology = topology,
): CostReport {
  const inputs = cosmosInputs(event, declared);
  const cosmos = cosmosCosts(inputs);
  const newRu = cosmos[0]!.requestUnits;
  const serviceBus = serviceBusOperations(declared).map((operations) => ({
    ...operations,
    sustainableEventsPerSecond: sustainableEventsPerSecond(operations.credits),
  }));
  const provisioned = {
    eventsPerSecond: rate,
    requestUnitsPerSecond: provisionedRequestUnitsPerSecond(rate, newRu),
  };
  const usd = (name: PriceName): number => prices[name].usd;
  const times = (price: number, value: number): number => Math.round(price * value * 10_000) / 10_000;
  const eventsPerHour = rate * 3600;
  return {
    assumptions: {
      ...event,
      rate,
      markerBytes: inputs.markerBytes,
      outboxDocumentBytes: inputs.outboxDocumentBytes,
    },
    basis: BASIS,
    cosmos,
    serviceBus,
    poison: poisonOperations(maxDeliveryCount),
    throttling: { creditsPerSecond: STANDARD_CREDITS_PER_SECOND, source: SERVICE_BUS_THROTTLING_SOURCE },
    provisioned,
    prices,
    perMillionEvents: serviceBus.map(({ topic, subject, billedOperations, receives }) => ({
      topic,
      subject,
      // Each consumer that takes the event spends the new outcome's RU on it.
      cosmosServerlessUsd: times(usd('cosmosServerlessPerMillionRu'), newRu * receives),
      cosmosProvisionedUsd: times(
        usd('cosmosProvisionedPer100RuPerSecondHour'),
        (provisioned.requestUnitsPerSecond / 100) * (1_000_000 / eventsPerHour),
      ),
      serviceBusOperationsUsd: times(usd('serviceBusStandardPerMillionOperations'), billedOperations),
    })),
    serviceBusBasePerMonthUsd: times(usd('serviceBusStandardBasePerHour'), 730),
  };
}

/** Computes and prints; nothing to wait for, but a command's main returns a promise. */
export function main(argv: string[], context: ToolContext): Promise<ExitCode> {
  const { values } = parseFlags(argv, FLAGS, USAGE, context.env);
  if (values.help) {
    context.out(USAGE);
    return Promise.resolve(EXIT_CODES.ok);
  }
  const count = (name: keyof Flags, fallback: number, max = 99): number =>
    numberFlag(name, values[name] ?? String(fallback), USAGE, { min: 0, max, integer: true });
  const event: TypicalEvent = {
    handlerReads: count('reads', 1),
    businessWrites: count('writes', 1),
    publishes: count('publishes', 0),
    businessDocumentBytes: numberFlag('document-bytes', values['document-bytes'] ?? '500', USAGE, {
      min: 1,
      max: 2 * 1024 * 1024,
      integer: true,
    }),
    eventBytes: numberFlag('event-bytes', values['event-bytes'] ?? '300', USAGE, {
      min: 2,
      max: 192 * 1024,
      integer: true,
    }),
  };
  const rate = numberFlag('rate', values.rate ?? '10', USAGE, { min: 0.001, max: 1_000_000 });
  const prices = Object.fromEntries(
    Object.entries(PRICES).map(([name, price]) => [name, { ...price, given: false }]),
  ) as Record<PriceName, UsedPrice>;
  for (const [flag, name] of Object.entries(PRICE_FLAGS)) {
    const text = values[flag as keyof typeof PRICE_FLAGS];
    if (text === undefined) continue;
    prices[name] = {
      ...prices[name],
      usd: numberFlag(flag, text, USAGE, { min: 0, max: 1_000_000 }),
      given: true,
    };
  }
  const maxDeliveryCount = deliveryCount(context.env.SERVICEBUS_MAX_DELIVERY_COUNT);
  const report = costReport(event, rate, prices, maxDeliveryCount);
  if (values.json) context.out(JSON.stringify(report, null, 2));
  else for (const line of readable(report)) context.out(line);
  return Promise.resolve(EXIT_CODES.ok);
}

/** SERVICEBUS_MAX_DELIVERY_COUNT as the app reads it (packages/inbox/src/settings.ts): 1 to 2000, default 10. */
function deliveryCount(text: string | undefined): number {
  const value = Number(text?.trim() || '10');
  if (!Number.isInteger(value) || value < 1 || value > 2000) {
    throw usageError(
      `SERVICEBUS_MAX_DELIVERY_COUNT must be a whole number from 1 to 2000; got '${bounded(text ?? '')}'.`,
      USAGE,
    );
  }
  return value;
}

function readable(report: CostReport): string[] {
  const { assumptions: a } = report;
  const dollars = (value: number): string => `$${value}`;
  return [
    `A typical message: ${a.handlerReads} read(s) and ${a.businessWrites} write(s) of ${a.businessDocumentBytes}-byte documents, ` +
      `${a.publishes} publish(es) of ${a.eventBytes}-byte events; a marker stores ${a.markerBytes} bytes, an outbox document ${a.outboxDocumentBytes}.`,
    report.basis,
    '',
    'Cosmos DB, per delivery to one consumer:',
    ...table([
      ['outcome', 'RU', 'requests', 'what it makes'],
      ...report.cosmos.map((row) => [row.outcome, String(row.requestUnits), String(row.requests), row.made]),
    ]),
    '',
    `Service Bus, per event (Standard: ${report.throttling.creditsPerSecond} credits a second per namespace; ` +
      `a send, each filter evaluation of each subscription and each receive cost one: ${report.throttling.source}):`,
    ...table([
      [
        'topic',
        'subject',
        'sends',
        'filter evaluations',
        'receives',
        'settles',
        'credits',
        'operations billed',
        'events per second',
      ],
      ...report.serviceBus.map((row) => [
        row.topic,
        row.subject,
        String(row.sends),
        String(row.filterEvaluations),
        String(row.receives),
        String(row.settles),
        String(row.credits),
        String(row.billedOperations),
        String(row.sustainableEventsPerSecond),
      ]),
    ]),
    'events per second: what the namespace sustains if it carries only that event. Operations billed: every API call ' +
      '(send, receive, complete); a lock renewal is one more.',
    `A poison message, in each subscription that takes it: ${report.poison.deliveries} deliveries ` +
      '(SERVICEBUS_MAX_DELIVERY_COUNT), each received and abandoned until it is dead-lettered: ' +
      `${report.poison.credits} credits, ${report.poison.billedOperations} operations billed.`,
    '',
    `Provisioned throughput at ${report.provisioned.eventsPerSecond} new events a second: ` +
      `${report.provisioned.requestUnitsPerSecond} RU/s for one consumer (steps of 100, at least 400).`,
    '',
    'Money per million events (US dollars; each consumer that takes the event spends the new outcome):',
    ...table([
      ['topic', 'subject', 'Cosmos DB serverless', 'Cosmos DB provisioned', 'Service Bus operations'],
      ...report.perMillionEvents.map((row) => [
        row.topic,
        row.subject,
        dollars(row.cosmosServerlessUsd),
        dollars(row.cosmosProvisionedUsd),
        dollars(row.serviceBusOperationsUsd),
      ]),
    ]),
    `Service Bus Standard base charge: ${dollars(report.serviceBusBasePerMonthUsd)} a month (730 hours).`,
    ...Object.values(report.prices).map((price) =>
      price.given
        ? `Price given: $${price.usd} per ${price.unit}.`
        : `List price: $${price.usd} per ${price.unit}, ${price.source}, read ${price.readOn}; prices differ by region and change: pass yours with its flag (--help).`,
    ),
  ];
}

export const command: Command = { name: 'cost', main };

if (require.main === module) runCommand(command);
