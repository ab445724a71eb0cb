import {
  OUTBOX_TYPE,
  type OutboxDocument,
  type OutboxMessage,
  type OutboxPublisher,
  processDelivery,
  relayOutbox,
} from '@idempotent-consumers/inbox/internal';
import {
  delivery,
  dependencies,
  documentsIn,
  OUTBOX_SETTINGS,
  testConsumer,
} from '@idempotent-consumers/inbox/testing';
import { useLocalStack } from '@idempotent-consumers/local-azure';

import { runTool, type ToolContext } from '../../src/cli/tool';
import { captured } from '../../src/testing/tools';
import { main } from '../../src/tools/outbox';

/**
 * npm run outbox against the local Cosmos DB server: the outbox documents are staged by tx.publish
 * and set aside by the relay itself (a size Service Bus refused, a document changed by hand), so the
 * tool sees them exactly as the app leaves them.
 */
const stack = useLocalStack();
let env: Record<string, string>;
beforeAll(() => {
  env = {
    COSMOS_ENDPOINT: stack.server.endpoint,
    COSMOS_KEY: stack.server.key,
    COSMOS_DATABASE: 'app',
    COSMOS_CONTAINER: 'state',
  };
});

const outbox = (argv: string[], context: ToolContext): Promise<number> =>
  runTool('outbox', main, argv, context);

/** A publisher that takes every message but those whose subject is `Huge`, which it finds too large. */
const sent: OutboxMessage[] = [];
const publisher: OutboxPublisher = {
  send: (_topic, messages) => {
    sent.push(...messages.filter((m) => m.subject !== 'Huge'));
    return Promise.resolve(messages.filter((m) => m.subject === 'Huge').map((m) => m.messageId));
  },
  close: () => Promise.resolve(),
};
const relayDependencies = {
  publisher,
  now: () => new Date(),
  settings: OUTBOX_SETTINGS,
};

/** Publishes one message per subject in the account's partition and relays them: `Huge` ones are set aside. */
async function publishedAndRelayed(account: string, subjects: string[]): Promise<OutboxDocument[]> {
  await processDelivery(
    testConsumer((_message, tx) => {
      for (const subject of subjects)
        tx.publish({ topic: 'orders', subject, name: subject, body: { account } });
    }),
    delivery({ accountId: account, amount: 1 }, { messageId: `m-${account}` }),
    dependencies(stack.container),
  );
  const page = await documentsIn(stack.container, `account:${account}`);
  await relayOutbox(page, { container: stack.container, ...relayDependencies });
  return (await documentsIn(stack.container, `account:${account}`)).filter(
    (d) => d.type === OUTBOX_TYPE,
  ) as OutboxDocument[];
}

const idOf = (documents: OutboxDocument[], subject: string): string =>
  documents.find((d) => d.subject === subject)?.messageId ?? '';

describe('npm run outbox', () => {
  it('lists the unsendable messages with why, never their content, and leaves out what was sent', async () => {
    const documents = await publishedAndRelayed('list-1', ['Huge', 'Fine']);
    const { context, out } = captured(env);

    const code = await outbox(['list', '--unsendable'], context);

    expect(code).toBe(0);
    const text = out.join('\n');
    expect(text).toContain('unsendable: 1 message(s).');
    // list is the default: the same without it.
    const { context: bare, out: bareOut } = captured(env);
    expect(await outbox(['--unsendable'], bare)).toBe(0);
    expect(bareOut).toEqual(out);
    expect(text).toContain(idOf(documents, 'Huge'));
    expect(text).toContain('too-large: Service Bus refused its size');
    expect(text).not.toContain(idOf(documents, 'Fine'));
    expect(text).not.toContain('list-1"'); // the body's content
    expect(text).toMatch(/\d+ B sha256:[0-9a-f]{16}/);
  });

  it('shows one message by its MessageId, and its body only when asked', async () => {
    const documents = await publishedAndRelayed('show-1', ['Huge']);
    const first = captured(env);
    const second = captured(env);

    await outbox(['show', idOf(documents, 'Huge')], first.context);
    await outbox(['show', idOf(documents, 'Huge'), '--body'], second.context);

    expect(first.out.join('\n')).toMatch(/status: +unsendable for /);
    expect(first.out.join('\n')).not.toContain('"account"');
    expect(second.out.join('\n')).toContain('"account": "show-1"');
  });

  it('resends an unsendable message: pending again, and the relay sends it once Service Bus takes it', async () => {
    const documents = await publishedAndRelayed('resend-1', ['Huge']);
    const messageId = idOf(documents, 'Huge');
    const { context, out } = captured(env);

    const code = await outbox(['resend', messageId], context);
    const [after] = (await documentsIn(stack.container, 'account:resend-1')).filter(
      (d) => d.type === OUTBOX_TYPE,
    ) as OutboxDocument[];
    // As if the namespace now took larger messages: the relay reads the change and sends it.
    const relayed = await relayOutbox(after ? [after] : [], {
      container: stack.container,
      ...relayDependencies,
      publisher: { send: () => Promise.resolve([]), close: () => Promise.resolve() },
    });

    expect(code).toBe(0);
    expect(out.join('\n')).toContain('pending again');
    expect(after).toMatchObject({ status: 'pending' });
    expect(after?.unsendableReason).toBeUndefined();
    expect(after?.unsendableSinceEpochSeconds).toBeUndefined();
    expect(relayed).toMatchObject({ sent: 1, marked: 1 });
  });

  it('discards an unsendable message, and refuses to touch one that is not unsendable', async () => {
    const documents = await publishedAndRelayed('discard-1', ['Huge', 'Fine']);
    const { context, out, err } = captured(env);

    const code = await outbox(['discard', idOf(documents, 'Huge'), idOf(documents, 'Fine')], context);
    const left = (await documentsIn(stack.container, 'account:discard-1')).filter(
      (d) => d.type === OUTBOX_TYPE,
    );

    expect(code).toBe(1);
    expect(out.join('\n')).toContain('discarded; it will never be sent');
    expect(err.join('\n')).toContain('is dispatched, not unsendable: left as it is');
    expect(left.map((d) => d.subject)).toEqual(['Fine']);
  });

  it('changes nothing with --dry-run', async () => {
    const documents = await publishedAndRelayed('dry-1', ['Huge']);
    const { context, out } = captured(env);

    await outbox(['discard', idOf(documents, 'Huge'), '--dry-run'], context);

    expect(out.join('\n')).toContain('would be deleted (--dry-run)');
    expect((await documentsIn(stack.container, 'account:dry-1')).some((d) => d.status === 'unsendable')).toBe(
      true,
    );
  });

  it.each([
    [['resend'], 'Say which MessageIds to resend'],
    [['list', '--body'], 'list does not take --body'],
    [['show', 'a', 'b'], 'show takes one MessageId'],
    [['purge'], "Unknown command 'purge': list, show, resend or discard"],
  ])('refuses %j with its usage (exit 2) before connecting', async (argv, message) => {
    const { context, err } = captured({});

    expect(await outbox(argv, context)).toBe(2);
    expect(err.join('\n')).toContain(message);
  });
});
