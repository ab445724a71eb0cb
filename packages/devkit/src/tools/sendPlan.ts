import { createHash } from 'node:crypto';

import type { Topology } from '@idempotent-consumers/inbox/internal';

import { bounded } from '../cli/errors';
import type { OutgoingEvent } from './events';
import { topicFor } from './serviceBus';

/**
 * What sending an event would do, decided before anything is sent: `npm run send -- --dry-run`
 * prints its lines, the console shows them in its dialog and sends only the plan the user confirmed
 * (packages/devkit/src/tools/console/toolSide.ts), and sendEvent (packages/devkit/src/tools/send.ts) sends what it says.
 */
export interface SendPlan {
  event: OutgoingEvent;
  topic: string;
  /** How many copies, all with the same MessageId (`--repeat`). */
  copies: number;
  /** The body as Service Bus receives it: a raw body's bytes, or a JSON body's text. */
  bodyBytes: number;
  /** Its SHA-256, in hex. */
  bodySha256: string;
  /** The subscriptions of the topic whose filters take the Subject; none: Service Bus drops it. */
  subscriptions: string[];
}

/**
 * Plans a send to `topic` (else the topic whose subscriptions filter on the Subject in `topology`),
 * routed by the filters of `topology`: the running npm start's, or what azd deploys.
 */
export function planSend(
  event: OutgoingEvent,
  options: { topic?: string; copies: number; topology: Topology },
): SendPlan {
  const topic = topicFor(event.subject, options.topic, options.topology);
  const body = messageBody(event);
  const subscriptions =
    options.topology.topics
      .find((candidate) => candidate.name === topic)
      ?.subscriptions.filter((subscription) => subscription.subjects.includes(event.subject))
      .map((subscription) => subscription.name) ?? [];
  return {
    event,
    topic,
    copies: options.copies,
    bodyBytes: body.length,
    bodySha256: createHash('sha256').update(body).digest('hex'),
    subscriptions,
  };
}

/** What the plan would do, line by line: what `--dry-run` prints and the console's dialog shows. */
export function sendPlanLines(plan: SendPlan): string[] {
  const { event } = plan;
  const messageId = `${bounded(event.messageId, 128)} (${event.messageIdGiven ? 'given' : 'derived from the event'})`;
  const copies = plan.copies > 1 ? `, ${plan.copies} copies with the same MessageId` : '';
  return [
    `would send ${event.subject} messageId=${messageId} to ${bounded(plan.topic, 60)}${copies}`,
    // The first 12 hex digits, as the feed and the dead-letter table show a body's hash.
    `  body: ${plan.bodyBytes} bytes, sha256 ${plan.bodySha256.slice(0, 12)}`,
    plan.subscriptions.length > 0
      ? `  taken by the filters of ${plan.subscriptions.join(', ')}`
      : `  taken by no subscription of ${bounded(plan.topic, 60)}: Service Bus would report success and drop it`,
    ...event.consumers.map(({ consumer, refusal }) =>
      refusal === undefined ? `  ${consumer} accepts it` : `  ${consumer} refuses it: ${refusal}`,
    ),
    ...(event.poison === undefined
      ? []
      : [
          '  sent although refused (--allow-invalid): a poison message, on purpose. The host retries it until ' +
            'maxDeliveryCount, then Service Bus dead-letters it.',
        ]),
  ];
}

/**
 * The body's bytes as @azure/service-bus puts them on the wire: a Buffer as it is, anything else as
 * its JSON text.
 */
function messageBody(event: OutgoingEvent): Buffer {
  return Buffer.isBuffer(event.body) ? event.body : Buffer.from(JSON.stringify(event.body ?? null), 'utf8');
}
