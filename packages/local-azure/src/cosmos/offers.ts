import { randomUUID } from 'node:crypto';

import { asObject } from './documents';
import { badRequest, preconditionFailed } from './errors';
import { flag, type RequestHeaders, single } from './http';

/**
 * Offers: the throughput provisioned on a database (shared by its containers) or on one container,
 * as a provisioned-throughput account keeps them. Here they are bookkeeping: the server's
 * throttling is one account-wide budget (throughput.ts), which only an offer that stands for that
 * budget (`budgetOffer`) changes.
 */

/** How a database's or container's throughput is provisioned. */
export type ProvisionedThroughputSetting =
  { mode: 'manual'; throughput: number } | { mode: 'autoscale'; maxThroughput: number };

/** The RU/s a container created without throughput gets of its own when its database has none. */
export const DEFAULT_CONTAINER_THROUGHPUT: ProvisionedThroughputSetting = { mode: 'manual', throughput: 400 };

/** Azure's range for manual throughput without a support request: 400 to 1,000,000 RU/s, in 100s. */
const MANUAL = { min: 400, max: 1_000_000, step: 100 } as const;
/** Autoscale's maximum: 1,000 to 1,000,000 RU/s in 1,000s; it scales between a tenth of it and it. */
const AUTOSCALE = { min: 1000, max: 1_000_000, step: 1000 } as const;
/** A header or field that is not a number is echoed at most this long in the refusal. */
const MAX_ECHO = 40;

/** What a database or container an offer is for exposes of itself. */
export interface OfferTarget {
  readonly rid: string;
  readonly selfLink: string;
}

export class Offer {
  private etag = `"${randomUUID()}"`;
  private tsSeconds: number;

  constructor(
    readonly id: string,
    private readonly target: OfferTarget,
    private setting: ProvisionedThroughputSetting,
    nowMs: number,
  ) {
    this.tsSeconds = Math.floor(nowMs / 1000);
  }

  get resource(): Record<string, unknown> {
    return offerResource(this.id, this.target, this.setting, this.etag, this.tsSeconds);
  }

  /**
   * `offer.replace()`: the new throughput from the body's content, in the offer's own mode (a
   * manual offer's `offerThroughput`, an autoscale offer's `offerAutopilotSettings.maxThroughput`).
   */
  replace(body: unknown, ifMatch: string | undefined, nowMs: number): void {
    if (ifMatch !== undefined && ifMatch !== '*' && ifMatch !== this.etag) throw preconditionFailed();
    this.setting =
      this.setting.mode === 'manual'
        ? { mode: 'manual', throughput: manualReplacement(body, this.target) }
        : { mode: 'autoscale', maxThroughput: autoscaleReplacement(body, this.target) };
    this.etag = `"${randomUUID()}"`;
    this.tsSeconds = Math.floor(nowMs / 1000);
  }
}

/**
 * The offer that stands for the server's one budget (`--throughput`): a database created without
 * throughput of its own shares it, as if the account provisioned every database with it. Its id is
 * the database's rid (8 characters), so it never meets a stored offer's (4).
 */
export function budgetOffer(database: OfferTarget, throughput: number): Record<string, unknown> {
  return offerResource(database.rid, database, { mode: 'manual', throughput }, `"${throughput}"`, 0);
}

/** The manual throughput a replace of the budget's offer asks for. */
export function replacedBudget(
  body: unknown,
  database: OfferTarget,
  throughput: number,
  ifMatch: string | undefined,
): number {
  if (ifMatch !== undefined && ifMatch !== '*' && ifMatch !== `"${throughput}"`) throw preconditionFailed();
  return manualReplacement(body, database);
}

/**
 * The throughput a create asks for: `x-ms-offer-throughput` (manual) or
 * `x-ms-cosmos-offer-autopilot-settings` (`{"maxThroughput":n}`, autoscale), as @azure/cosmos sends
 * `throughput` and `maxThroughput`; undefined when neither is sent.
 */
export function requestedThroughput(headers: RequestHeaders): ProvisionedThroughputSetting | undefined {
  const manual = single(headers['x-ms-offer-throughput']);
  const autopilot = single(headers['x-ms-cosmos-offer-autopilot-settings']);
  if (flag(headers['x-ms-offer-is-ru-per-minute-throughput-enabled']))
    throw badRequest('RU per minute throughput is retired; provision throughput without it.');
  if (manual !== undefined && autopilot !== undefined)
    throw badRequest('Specify either a manual throughput or autoscale settings (maxThroughput), not both.');
  if (manual !== undefined) return { mode: 'manual', throughput: validThroughput(manual, MANUAL) };
  if (autopilot === undefined) return undefined;
  let settings: unknown;
  try {
    settings = JSON.parse(autopilot);
  } catch {
    throw badRequest('The autoscale settings (x-ms-cosmos-offer-autopilot-settings) are not valid JSON.');
  }
  const maxThroughput = (settings as { maxThroughput?: unknown } | null)?.maxThroughput;
  return { mode: 'autoscale', maxThroughput: validThroughput(maxThroughput, AUTOSCALE) };
}

function manualReplacement(body: unknown, target: OfferTarget): number {
  const content = replacedContent(body, target);
  if (autoscaleMaximum(content) !== undefined)
    throw badRequest('Moving an offer from manual to autoscale throughput is not supported.');
  return validThroughput(content.offerThroughput, MANUAL);
}

function autoscaleReplacement(body: unknown, target: OfferTarget): number {
  const maxThroughput = autoscaleMaximum(replacedContent(body, target));
  if (maxThroughput === undefined)
    throw badRequest(
      'An autoscale offer is replaced with content.offerAutopilotSettings.maxThroughput; moving it to manual throughput is not supported.',
    );
  return validThroughput(maxThroughput, AUTOSCALE);
}

/** The content of a replace's body, which must be for the offer's own resource. */
function replacedContent(body: unknown, target: OfferTarget): Record<string, unknown> {
  const offer = asObject(body);
  if (
    (offer.offerResourceId !== undefined && offer.offerResourceId !== target.rid) ||
    (offer.resource !== undefined && offer.resource !== target.selfLink)
  )
    throw badRequest('The resource of an offer cannot be changed.');
  return asObject(offer.content, "The offer's content");
}

const autoscaleMaximum = (content: Record<string, unknown>): unknown =>
  (content.offerAutopilotSettings as { maxThroughput?: unknown } | undefined | null)?.maxThroughput;

/** A whole number of RU/s in the range and steps Azure accepts, refused in Azure's words. */
function validThroughput(value: unknown, range: { min: number; max: number; step: number }): number {
  const throughput = typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : value;
  if (
    typeof throughput === 'number' &&
    Number.isInteger(throughput) &&
    throughput >= range.min &&
    throughput <= range.max &&
    throughput % range.step === 0
  )
    return throughput;
  const requested =
    typeof throughput === 'number' ? String(throughput) : JSON.stringify(value ?? null).slice(0, MAX_ECHO);
  throw badRequest(
    `The offer should have valid throughput values between ${range.min} and ${range.max} inclusive in increments of ${range.step}. Requested throughput ${requested} is not valid.`,
  );
}

function offerResource(
  id: string,
  target: OfferTarget,
  setting: ProvisionedThroughputSetting,
  etag: string,
  tsSeconds: number,
): Record<string, unknown> {
  return {
    id,
    _rid: id,
    _self: `offers/${id}/`,
    _etag: etag,
    _ts: tsSeconds,
    offerVersion: 'V2',
    offerType: 'Invalid',
    resource: target.selfLink,
    offerResourceId: target.rid,
    content:
      setting.mode === 'manual'
        ? { offerThroughput: setting.throughput, offerIsRUPerMinuteThroughputEnabled: false }
        : {
            // Autoscale scales between a tenth of its maximum and the maximum; Azure reports the tenth.
            offerThroughput: setting.maxThroughput / 10,
            offerIsRUPerMinuteThroughputEnabled: false,
            offerAutopilotSettings: {
              tier: 0,
              maximumTierThroughput: 0,
              autoUpgrade: false,
              maxThroughput: setting.maxThroughput,
            },
          },
  };
}
