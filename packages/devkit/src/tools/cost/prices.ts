/**
 * Public list prices (US dollars, pay-as-you-go, East US), each in one place with where and when it
 * was read. The serverless, operations and base-charge prices are the ones infra/README.md ("Cost")
 * quotes, and test/docs/cost.test.ts keeps the two the same. Prices change and differ by region and
 * offer: the cost tool's flags take yours.
 */
export const READ_ON = '2026-12-02';

export interface ListPrice {
  usd: number;
  unit: string;
  source: string;
  readOn: string;
}

export const PRICES = {
  cosmosServerlessPerMillionRu: {
    usd: 0.25,
    unit: 'million RU (serverless)',
    source: 'https://azure.microsoft.com/pricing/details/cosmos-db/serverless/',
    readOn: READ_ON,
  },
  cosmosProvisionedPer100RuPerSecondHour: {
    usd: 0.008,
    unit: '100 RU/s for one hour (provisioned, manual, single region)',
    // The billing examples of this page price provisioned throughput in those units.
    source: 'https://learn.microsoft.com/azure/cosmos-db/understand-your-bill',
    readOn: READ_ON,
  },
  serviceBusStandardPerMillionOperations: {
    usd: 0.8,
    unit: 'million operations beyond the 13 million a month the base charge includes (Standard, 13M-100M tier)',
    source: 'https://azure.microsoft.com/pricing/details/service-bus/',
    readOn: READ_ON,
  },
  serviceBusStandardBasePerHour: {
    usd: 0.0135,
    unit: 'hour of a Standard namespace (base charge)',
    source: 'https://azure.microsoft.com/pricing/details/service-bus/',
    readOn: READ_ON,
  },
} as const satisfies Record<string, ListPrice>;

export type PriceName = keyof typeof PRICES;
