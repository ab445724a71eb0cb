/**
 * Public list prices, each in one place with where and when it was read. A price that could not be
 * read is `undefined`, and the cost tool says so rather than guess: Azure's pricing pages render
 * their figures with JavaScript for the visitor's region and currency, and the copies read on
 * READ_ON showed "$-" where the amount goes. Pass the prices of your offer with the tool's flags.
 */
export const READ_ON = '2026-12-03';

export interface ListPrice {
  /** US dollars per `unit`; undefined: not found on the page. */
  usd: number | undefined;
  unit: string;
  source: string;
  readOn: string;
}

export const PRICES = {
  cosmosServerlessPerMillionRu: {
    usd: undefined,
    unit: 'million RU (serverless)',
    source: 'https://azure.microsoft.com/pricing/details/cosmos-db/serverless/',
    readOn: READ_ON,
  },
  cosmosProvisionedPer100RuPerSecondHour: {
    usd: undefined,
    unit: '100 RU/s for one hour (provisioned, manual, single region)',
    source: 'https://azure.microsoft.com/pricing/details/cosmos-db/autoscale-provisioned/',
    readOn: READ_ON,
  },
  serviceBusStandardPerMillionOperations: {
    usd: undefined,
    unit: 'million operations beyond the 13 million a month the base charge includes (Standard, 13M-100M tier)',
    source: 'https://azure.microsoft.com/pricing/details/service-bus/',
    readOn: READ_ON,
  },
  serviceBusStandardBasePerHour: {
    usd: undefined,
    unit: 'hour of a Standard namespace (base charge)',
    source: 'https://azure.microsoft.com/pricing/details/service-bus/',
    readOn: READ_ON,
  },
} as const satisfies Record<string, ListPrice>;

export type PriceName = keyof typeof PRICES;
