/**
 * What the console's server sends its page: plain JSON, every untrusted value already bounded on the
 * server. The page (packages/devkit/src/tools/console/page) imports these types only.
 */

/** One thing that happened to a message, as the live feed shows it. */
export interface FeedEvent {
  /** Increases by one per event: the page asks for the events after the last it has. */
  seq: number;
  /** ISO time the console saw it. */
  at: string;
  kind: 'delivery' | 'dropped-as-duplicate' | 'no-subscription' | 'dead-lettered';
  /** The topic, and for a delivery or a dead letter the subscription. */
  topic: string | undefined;
  subscription: string | undefined;
  /** The function that ran, for a delivery. */
  function: string | undefined;
  messageId: string | undefined;
  subject: string | undefined;
  sequenceNumber: number | undefined;
  deliveryCount: number | undefined;
  /**
   * processed, duplicate, poison, retried, failed (an error without an outcome), dead-lettered,
   * dropped-as-duplicate, no-subscription, or what else the consumer logged.
   */
  outcome: string;
  /** A duplicate's cause, a poison message's or a dead letter's reason, an alternative, an error. */
  detail: string | undefined;
  settlement: string | undefined;
  handlerMs: number | undefined;
  traceId: string | undefined;
  /** The business documents the delivery wrote, from its debug line. */
  wrote: { partitionKey: string; documents: string[]; count: number } | undefined;
  /** The body's size and SHA-256 prefix; the body itself only on request, while the console keeps it. */
  bodyBytes: number | undefined;
  bodySha256: string | undefined;
}

export interface FeedPage {
  events: FeedEvent[];
  /** The seq to ask after next time. */
  last: number;
}

export interface SubscriptionView {
  name: string;
  topic: string;
  subjects: string[];
  /** The function that consumes it, when the app registers one. */
  function: string | undefined;
  delayedRetry: { attempts: number; firstDelaySeconds: number } | undefined;
  /**
   * Active (waiting or locked), dead-lettered, and locked now (in flight, npm start's only); undefined
   * when not readable. `atLeast`: counted by peeking up to a bound, which one of them reached.
   */
  counts:
    { active: number; deadLettered: number; inFlight: number | undefined; atLeast?: boolean } | undefined;
}

export interface TopicView {
  name: string;
  /** The consumers that publish to it through their outbox. */
  publishers: string[];
  unsubscribedSubjects: string[];
  subscriptions: SubscriptionView[];
}

export interface Overview {
  /** Where the console looks: "npm start (local)" or the deployment's namespace and account. */
  target: string;
  /** Whether resubmit, discard and send are allowed. */
  actions: boolean;
  /** Whether there is a live feed (npm start's); a deployment's events are in Application Insights. */
  feed: boolean;
  topics: TopicView[];
  /** Functions that are not Service Bus consumers: timers and the change-feed relay. */
  others: { name: string; kind: 'timer' | 'change feed'; detail: string }[];
  /** A read that failed, with the role or setting that would allow it. */
  problems: string[];
}

export interface ConsumerView {
  consumer: string;
  inbox: { markers: number; oldestProcessedAt: string | undefined } | undefined;
  /** The next run of the purge timer, when the console knows it. */
  nextPurge: string | undefined;
  outbox: { pending: number; oldestPendingSince: string | undefined } | undefined;
  /** The partitions it wrote most recently, newest first, from its markers. */
  recentPartitions: { partitionKey: string; messageId: string; processedAt: string }[];
  problems: string[];
}

export interface DocumentSummary {
  id: string;
  type: string | undefined;
  /** Epoch seconds of the last write. */
  ts: number | undefined;
}

export interface PartitionView {
  partitionKey: string;
  documents: DocumentSummary[];
  /** Opaque: the next page, when there is one. */
  continuation: string | undefined;
}

export interface DocumentView {
  partitionKey: string;
  id: string;
  /** Pretty-printed, cut at a bound (`truncated` says so). */
  json: string;
  truncated: boolean;
}

/**
 * One dead letter with the verdicts `npm run dead-letters -- list` prints: packages/devkit/src/tools/deadLetterReport.ts's
 * DeadLetterRow, restated here because the page's type check has no Node.js types to read that file
 * with. toolSide.ts returns DeadLetterRows as these, so the compiler keeps the two in step.
 */
export interface DeadLetterRowView {
  sequence: string;
  messageId: string | undefined;
  subject: string | undefined;
  /** Its delayed-retry family: 'original', or the attempt of a copy. */
  family: string | undefined;
  reason: string | undefined;
  description: string | undefined;
  deliveries: number | undefined;
  enqueuedAt: string | undefined;
  inbox: { state: string; detail?: string; text: string; meaning: string } | undefined;
  /** When a resubmitted copy would pass duplicate detection; `never` when no subscription would take it. */
  resubmittableFrom: string | undefined;
  never: string | undefined;
  bodyBytes: number;
  bodySha256: string;
}

export interface DeadLetterPage {
  subscription: string;
  queue: string;
  rows: DeadLetterRowView[];
  /** What the columns mean, as list prints it after its table. */
  legend: string[];
  /** Whether the inbox was checked, and where. */
  inboxNote: string;
  /** The sequence number the next page starts from, when there is more. */
  next: string | undefined;
}

/** What an action would do, line by line, as the CLI's --dry-run says it. */
export interface PlanView {
  action: 'resubmit' | 'discard';
  lines: { verdict: string; sequence: string | undefined; text: string }[];
  /** How many dead letters it would send, complete or remove. */
  acting: number;
  /** What it would do to which message, hashed: `act` refuses to do anything else. */
  fingerprint: string;
}

export interface ActionResult {
  lines: string[];
  summary: string;
  ok: boolean;
}

/** A subject the send form offers: where it goes, and the schema its consumers validate. */
export interface SendSubject {
  subject: string;
  topic: string;
  consumers: string[];
  /** JSON Schema of the body (a union: `anyOf`), from the zod schema of the first consumer that reads it (each validates it on send). */
  schema: unknown;
}

export interface SendForm {
  subjects: SendSubject[];
}

/** What the page asks of a send: the form's fields, as npm run send takes them (the server checks each). */
export interface SendRequest {
  subject: string;
  body?: unknown;
  /** Text sent as its bytes, unparsed (`--raw-body`). */
  rawBody?: string;
  /** Default: derived from the event. */
  messageId?: string;
  /** Send it although its consumers refuse it (`--allow-invalid`). */
  allowInvalid: boolean;
  /** For `send`: the fingerprint of the plan the user confirmed. */
  fingerprint?: string;
}

/** What a send would do, as `npm run send -- --dry-run` says it (`lines`), and its fingerprint. */
export interface SendPlanView {
  topic: string;
  subject: string;
  messageId: string;
  /** Given in the form, rather than derived from the event. */
  messageIdGiven: boolean;
  copies: number;
  /** The body as Service Bus receives it: its size and SHA-256 (hex). */
  bodyBytes: number;
  bodySha256: string;
  /** The subscriptions whose filters take its Subject; none: Service Bus would drop it. */
  subscriptions: string[];
  /** Each consumer that reads the Subject, and why it refuses the body (none: it accepts it). */
  consumers: { consumer: string; refusal?: string }[];
  /** Why its consumers refuse it, when it is sent although refused (a poison message, on purpose). */
  poison: string | undefined;
  lines: string[];
  /** What it would send, hashed: `send` refuses anything else. */
  fingerprint: string;
}

export interface SendResult {
  lines: string[];
  messageId: string;
  topic: string;
}

/** What the page asks of a dead-letter action (the server checks it before it goes further). */
export interface ActionRequest {
  action: 'resubmit' | 'discard';
  /** Sequence numbers, as list shows them. */
  sequences: string[];
  /** Resubmit: unknown inbox state and payload mismatches too; discard: messages never applied too. */
  force: boolean;
  /** Resubmit poison and rejected messages too. */
  includePoison: boolean;
  /** For `act`: the fingerprint of the plan the user confirmed. */
  fingerprint?: string;
}

/** A message body, shown on request: at most 64 KB of it (`truncated` says so), and its full size. */
export interface BodyView {
  text: string;
  encoding: 'utf-8' | 'base64';
  bytes: number;
  truncated: boolean;
}
