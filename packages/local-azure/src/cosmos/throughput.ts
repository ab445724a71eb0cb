/**
 * Provisioned throughput: a request-unit budget per second, as Cosmos DB enforces the RU/s provisioned
 * on a container. Modelled as a bucket that holds at most one second of budget and refills
 * continuously. A data request is served while the bucket is not empty, and its charge (known only
 * once it has been served, as in Cosmos DB) is then taken out, possibly into debt; while in debt every
 * data request is answered 429 with `x-ms-retry-after-ms`, the time until the debt is repaid. A
 * throttled request costs nothing. One budget covers the whole server (like throughput shared by a
 * database): the app uses one container.
 */
export class ProvisionedThroughput {
  private available: number;
  private refilledAt: number;

  constructor(
    readonly requestUnitsPerSecond: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    if (!Number.isFinite(requestUnitsPerSecond) || requestUnitsPerSecond <= 0) {
      throw new Error(`The throughput must be a positive number of RU/s; got ${requestUnitsPerSecond}.`);
    }
    this.available = requestUnitsPerSecond;
    this.refilledAt = clock();
  }

  /** undefined: serve the request; a number: answer 429 and ask the client to retry after that many ms. */
  retryAfterMs(): number | undefined {
    this.refill();
    if (this.available > 0) return undefined;
    return Math.max(1, Math.ceil((-this.available / this.requestUnitsPerSecond) * 1000));
  }

  charge(requestUnits: number): void {
    this.refill();
    this.available -= requestUnits;
  }

  private refill(): void {
    const now = this.clock();
    const refilled = ((now - this.refilledAt) / 1000) * this.requestUnitsPerSecond;
    this.available = Math.min(this.requestUnitsPerSecond, this.available + refilled);
    this.refilledAt = now;
  }
}

/** What one client (one user agent) spent on data requests, as the server counted it. */
export interface ClientUsage {
  /** The `user-agent` header (the SDK appends `userAgentSuffix` to it), at most 256 characters. */
  userAgent: string;
  requests: number;
  /** Requests answered 429 because the budget was spent (or by an injected throttle). */
  throttled: number;
  requestCharge: number;
  /** The largest charge of one request. */
  maxRequestCharge: number;
  /** When its first data request arrived and its last one was answered, in ms of the server's clock. */
  firstAtMs: number;
  lastAtMs: number;
}

const MAX_USER_AGENT_LENGTH = 256;
const MAX_CLIENTS = 100;

/** Request charges by user agent, so that a test can tell what one client spent. */
export class UsageByClient {
  private readonly clients = new Map<string, ClientUsage>();

  constructor(private readonly clock: () => number = () => performance.now()) {}

  start(userAgent: string | undefined): ClientUsage {
    let key = (userAgent ?? '').slice(0, MAX_USER_AGENT_LENGTH);
    if (!this.clients.has(key) && this.clients.size >= MAX_CLIENTS) key = '(other clients)';
    let usage = this.clients.get(key);
    if (!usage) {
      const now = this.clock();
      usage = {
        userAgent: key,
        requests: 0,
        throttled: 0,
        requestCharge: 0,
        maxRequestCharge: 0,
        firstAtMs: now,
        lastAtMs: now,
      };
      this.clients.set(key, usage);
    }
    return usage;
  }

  record(usage: ClientUsage, status: number, requestCharge: number): void {
    usage.requests++;
    if (status === 429) usage.throttled++;
    usage.requestCharge += requestCharge;
    usage.maxRequestCharge = Math.max(usage.maxRequestCharge, requestCharge);
    usage.lastAtMs = this.clock();
  }

  snapshot(): ClientUsage[] {
    return [...this.clients.values()].map((usage) => ({ ...usage }));
  }
}
