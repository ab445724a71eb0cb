import type { Container } from '@azure/cosmos';
import {
  ConcurrencyConflictError,
  MARKER_TYPE,
  processDelivery,
  type VersionedConsumer,
} from '@idempotent-consumers/inbox/internal';
import { useLocalStack } from '@idempotent-consumers/local-azure';
import { z } from 'zod';

import { delivery, dependencies, documentsIn, ending } from '../src/testing';
import { writeIfNewer } from '../src/versioned';

/**
 * A versioned consumer (natural idempotency): the message carries a document's whole state and its
 * version, written only over an older version, with no marker. Its outcomes, against the local
 * server: written, stale (a repeat or a late arrival), a race lost and retried, and what is poison.
 */
const stack = useLocalStack();

const Status = z.object({ invoiceId: z.string(), status: z.string(), version: z.number() });
type Status = z.infer<typeof Status>;

let invoices = 0;
const nextInvoice = (): string => `inv-${++invoices}`;

function projector(overrides: Partial<VersionedConsumer<Status>> = {}): VersionedConsumer<Status> {
  return {
    kind: 'versioned',
    name: 'test.projector',
    schema: Status,
    project: (event) => ({
      id: `status-${event.invoiceId}`,
      partitionKey: `invoice:${event.invoiceId}`,
      status: event.status,
      version: event.version,
    }),
    ...overrides,
  };
}

async function stored(invoiceId: string): Promise<Record<string, unknown>[]> {
  return documentsIn(stack.container, `invoice:${invoiceId}`);
}

describe('a versioned consumer', () => {
  it('writes a newer version, and takes a repeat or an older one for a duplicate, writing nothing', async () => {
    const invoiceId = nextInvoice();
    const deps = dependencies(stack.container);
    const event = (status: string, version: number) =>
      delivery({ invoiceId, status, version }, { messageId: `${invoiceId}-${version}` });

    const first = await processDelivery(projector(), event('issued', 1), deps);
    const second = await processDelivery(projector(), event('paid', 3), deps);
    const repeat = await processDelivery(projector(), event('paid', 3), deps);
    const late = await processDelivery(projector(), event('sent', 2), deps);

    expect([first, second, repeat, late].map((r) => [r.outcome, r.requests, r.attempts])).toEqual([
      // A read that finds nothing and a create; a read and a replace; a read each for the rest.
      ['processed', 2, 1],
      ['processed', 2, 1],
      ['duplicate', 1, 1],
      ['duplicate', 1, 1],
    ]);
    expect(first.requestCharge).toBeGreaterThan(0);
    expect(repeat.requestCharge).toBeGreaterThan(0);
    // What each write changed (none for a duplicate).
    expect([first, second, repeat].map((result) => result.wrote)).toEqual([
      { partitionKey: `invoice:${invoiceId}`, documents: [{ kind: 'create', id: `status-${invoiceId}` }] },
      { partitionKey: `invoice:${invoiceId}`, documents: [{ kind: 'replace', id: `status-${invoiceId}` }] },
      undefined,
    ]);
    expect(await stored(invoiceId)).toEqual([
      expect.objectContaining({ id: `status-${invoiceId}`, status: 'paid', version: 3 }),
    ]);
    expect((await stored(invoiceId)).filter((doc) => doc.type === MARKER_TYPE)).toEqual([]);
  });

  it('loses a race (412 on the replace), reads again, and writes when it is still newer', async () => {
    const invoiceId = nextInvoice();
    const partitionKey = `invoice:${invoiceId}`;
    await stack.container.items.create({
      id: `status-${invoiceId}`,
      partitionKey,
      status: 'issued',
      version: 1,
    });
    // Another writer replaces the document between the consumer's read and its replace, once.
    const racing = raceOnce(stack.container, async () => {
      await stack.container.items.upsert({
        id: `status-${invoiceId}`,
        partitionKey,
        status: 'sent',
        version: 2,
      });
    });

    const result = await processDelivery(
      projector(),
      delivery({ invoiceId, status: 'paid', version: 3 }),
      dependencies(racing),
    );

    expect([result.outcome, result.requests]).toEqual(['processed', 4]);
    expect(await stored(invoiceId)).toEqual([expect.objectContaining({ status: 'paid', version: 3 })]);
  });

  it('loses a race to a newer version: a duplicate, and the newer one stays', async () => {
    const invoiceId = nextInvoice();
    const partitionKey = `invoice:${invoiceId}`;
    const racing = raceOnce(stack.container, async () => {
      await stack.container.items.create({
        id: `status-${invoiceId}`,
        partitionKey,
        status: 'void',
        version: 9,
      });
    });

    const result = await processDelivery(
      projector(),
      delivery({ invoiceId, status: 'paid', version: 3 }),
      dependencies(racing),
    );

    // The create meets the other writer's document (409); the second read finds version 9.
    expect([result.outcome, result.requests]).toEqual(['duplicate', 3]);
    expect(await stored(invoiceId)).toEqual([expect.objectContaining({ status: 'void', version: 9 })]);
  });

  it('gives up after maxAttempts races lost, writing nothing', async () => {
    const invoiceId = nextInvoice();
    const partitionKey = `invoice:${invoiceId}`;
    await stack.container.items.create({
      id: `status-${invoiceId}`,
      partitionKey,
      status: 'issued',
      version: 1,
    });
    let version = 1;
    let reads = 0;
    const racing = raceAlways(stack.container, async () => {
      reads++;
      version += 0.001;
      await stack.container.items.upsert({
        id: `status-${invoiceId}`,
        partitionKey,
        status: 'issued',
        version,
      });
    });
    const deps = dependencies(racing);

    const error = await processDelivery(projector(), delivery({ invoiceId, status: 'paid', version: 3 }), {
      ...deps,
      settings: { inbox: { ...deps.settings.inbox, maxAttempts: 2 } },
    }).catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(ConcurrencyConflictError);
    expect((error as Error).message).toContain('in 2 attempts');
    expect(reads).toBe(2);
    expect(await stored(invoiceId)).toEqual([expect.objectContaining({ status: 'issued' })]);
  });

  it('is transient when the write itself fails with another status than a lost race, and writes nothing', async () => {
    const invoiceId = nextInvoice();
    stack.server.faults.inject({ kind: 'unavailable', on: 'write', times: 1 });

    const result = await ending(
      processDelivery(
        projector(),
        delivery({ invoiceId, status: 'paid', version: 1 }),
        dependencies(stack.container),
      ),
    );

    expect(result).toBe('transient 503');
    expect(await stored(invoiceId)).toEqual([]);
  });

  it('says stale, with the stored version, for a version not newer than the stored one', async () => {
    const document = { id: 'status-direct', partitionKey: `invoice:${nextInvoice()}`, version: 4 };

    const written = await writeIfNewer(stack.container, document);
    const again = await writeIfNewer(stack.container, { ...document, version: 4 });

    expect(written).toMatchObject({ result: 'written', previousVersion: undefined, requests: 2 });
    expect(again).toMatchObject({ result: 'stale', previousVersion: 4, requests: 1 });
  });

  it('is transient when Cosmos DB fails, and poison for no version or no partition key', async () => {
    const invoiceId = nextInvoice();
    const endingOf = (consumer: VersionedConsumer<Status>) =>
      ending(
        processDelivery(
          consumer,
          delivery({ invoiceId, status: 'paid', version: 1 }),
          dependencies(stack.container),
        ),
      );

    stack.server.faults.inject({ kind: 'unavailable', on: 'read' });
    const unavailable = await endingOf(projector());
    stack.server.faults.clear();
    const noVersion = await endingOf(
      projector({ project: (event) => ({ id: event.invoiceId, partitionKey: 'p', version: Number.NaN }) }),
    );
    const noKey = await endingOf(
      projector({ project: (event) => ({ id: event.invoiceId, partitionKey: '', version: 1 }) }),
    );

    expect([unavailable, noVersion, noKey]).toEqual([
      'transient 503',
      'poison schema-violation',
      'poison no-partition-key',
    ]);
    expect(await stored(invoiceId)).toEqual([]);
  });
});

/** The container, with `work` run (once, or every time) right after a point read is answered. */
function raceOnce(container: Container, work: () => Promise<void>): Container {
  let done = false;
  return afterRead(container, async () => {
    if (done) return;
    done = true;
    await work();
  });
}

const raceAlways = (container: Container, work: () => Promise<void>): Container => afterRead(container, work);

function afterRead(container: Container, work: () => Promise<void>): Container {
  return new Proxy(container, {
    get(target, property) {
      if (property !== 'item') return Reflect.get(target, property, target) as unknown;
      return (id: string, partitionKey: string) => {
        const item = target.item(id, partitionKey);
        return new Proxy(item, {
          get(itemTarget, itemProperty) {
            if (itemProperty !== 'read') return Reflect.get(itemTarget, itemProperty, itemTarget) as unknown;
            return async (...args: Parameters<typeof item.read>) => {
              const response = await itemTarget.read(...args);
              await work();
              return response;
            };
          },
        });
      };
    },
  });
}
