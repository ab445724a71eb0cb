import {
  type Delivery,
  type EventContext,
  message as amqpMessage,
  type Receiver,
  type Sender,
  types,
} from 'rhea';

import { asPeerError, STATUS_OF } from './errors';

/**
 * The request/response pattern of $cbs and $management: the client sends a request on one link,
 * naming in reply-to the address of the link it receives answers on; the answer carries the
 * request's message-id as correlation-id and a status in its application properties. $cbs spells
 * the keys `status-code`/`status-description`, $management `statusCode`/`statusDescription`, and
 * @azure/service-bus reads both (and `errorCondition`, which picks the error it throws).
 */
export interface ManagementRequest {
  operation: string | undefined;
  /** The request's application properties ($cbs: type and name). */
  properties: Record<string, unknown>;
  /** The request body as a map ($management), or {} when it is not one. */
  body: Record<string, unknown>;
  /** The body as it came ($cbs put-token: the token, a string). */
  value: unknown;
}

export interface ManagementResponse {
  statusCode: number;
  statusDescription?: string;
  body?: Record<string, unknown>;
}

export const STATUS_KEYS = {
  cbs: { code: 'status-code', description: 'status-description', condition: 'error-condition' },
  management: { code: 'statusCode', description: 'statusDescription', condition: 'errorCondition' },
} as const;

export function serveRequestLink(
  receiver: Receiver,
  keys: (typeof STATUS_KEYS)[keyof typeof STATUS_KEYS],
  handle: (request: ManagementRequest) => ManagementResponse,
  replyLink: (address: string) => Sender | undefined,
): void {
  receiver.on('message', (context: EventContext) => {
    const delivery = context.delivery as Delivery;
    const request = (context.message ?? {}) as Record<string, unknown>;
    delivery.accept();
    // The status code is an AMQP int, as Service Bus sends it (the .NET client casts it to Int32).
    const properties: Record<string, unknown> = {};
    let body: Record<string, unknown> | undefined;
    try {
      const applicationProperties = isMap(request.application_properties)
        ? request.application_properties
        : {};
      const { operation } = applicationProperties;
      const response = handle({
        operation: typeof operation === 'string' ? operation : undefined,
        properties: applicationProperties,
        body: isMap(request.body) ? request.body : {},
        value: request.body,
      });
      properties[keys.code] = types.wrap_int(response.statusCode);
      if (response.statusDescription) properties[keys.description] = response.statusDescription;
      body = response.body;
    } catch (error) {
      const refusal = asPeerError(error);
      properties[keys.code] = types.wrap_int(STATUS_OF[refusal.condition]);
      properties[keys.description] = refusal.message;
      // A symbol, as Service Bus sends it (the .NET client casts it to AmqpSymbol).
      properties[keys.condition] = types.wrap_symbol(refusal.condition);
    }
    const replyTo = typeof request.reply_to === 'string' ? request.reply_to : undefined;
    const link = replyTo === undefined ? undefined : replyLink(replyTo);
    // A request that names no open reply link has nowhere to be answered.
    if (!link?.is_open()) return;
    link.send(
      amqpMessage.encode({
        to: replyTo,
        correlation_id: request.message_id,
        application_properties: properties,
        ...(body === undefined ? {} : { body }),
      }),
      undefined,
      0,
    );
  });
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Buffer.isBuffer(value) && !Array.isArray(value);
}
