import { randomUUID } from 'node:crypto';

import { statusOf, useTarget } from '../../support/conformanceTarget';

const target = useTarget();

describe('account', () => {
  it('describes itself with read and write locations the client can use', async () => {
    const { resource } = await target.client.getDatabaseAccount();
    const account = resource!;

    expect(account.writableLocations.length).toBeGreaterThan(0);
    expect(account.readableLocations.length).toBeGreaterThan(0);
    expect(account.writableLocations[0]?.databaseAccountEndpoint).toMatch(/^https?:\/\//);
    expect(account.consistencyPolicy).toBeDefined();
  });
});

describe('databases', () => {
  it('creates, reads, lists and deletes a database', async () => {
    const id = `db-${randomUUID()}`;

    const created = await target.client.databases.create({ id });
    const read = await target.client.database(id).read();
    const { resources: listed } = await target.client.databases.readAll().fetchAll();
    const deleted = await target.client.database(id).delete();

    expect(created.statusCode).toBe(201);
    expect(read.resource?.id).toBe(id);
    expect(read.resource?._rid).toEqual(expect.any(String));
    expect(listed.map((database) => database.id)).toContain(id);
    expect(deleted.statusCode).toBe(204);
    expect(await statusOf(target.client.database(id).read())).toBe(404);
  });

  it('createIfNotExists creates once and then returns the same database', async () => {
    const id = `db-${randomUUID()}`;

    const first = await target.client.databases.createIfNotExists({ id });
    const second = await target.client.databases.createIfNotExists({ id });
    await target.client.database(id).delete();

    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(200);
    expect(second.resource?._rid).toBe(first.resource?._rid);
  });

  it('refuses a second database with the same id (409)', async () => {
    const database = await target.database();

    expect(await statusOf(target.client.databases.create({ id: database.id }))).toBe(409);
  });
});

describe('containers', () => {
  it('echoes its partition key definition and default TTL', async () => {
    const database = await target.database();

    const { resource } = await database.containers.create({
      id: 'orders',
      partitionKey: { paths: ['/partitionKey'], version: 2 },
      defaultTtl: -1,
    });

    expect(resource?.partitionKey).toMatchObject({ paths: ['/partitionKey'], kind: 'Hash', version: 2 });
    expect(resource?.defaultTtl).toBe(-1);
  });

  it('creates, reads, replaces and deletes a container; createIfNotExists is idempotent', async () => {
    const database = await target.database();

    const first = await database.containers.createIfNotExists({ id: 'c', partitionKey: { paths: ['/pk'] } });
    const second = await database.containers.createIfNotExists({ id: 'c', partitionKey: { paths: ['/pk'] } });
    const replaced = await database
      .container('c')
      .replace({ id: 'c', partitionKey: { paths: ['/pk'] }, defaultTtl: 60 });
    const { resources: listed } = await database.containers.readAll().fetchAll();
    const deleted = await database.container('c').delete();

    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(200);
    expect(replaced.resource?.defaultTtl).toBe(60);
    expect(listed.map((container) => container.id)).toEqual(['c']);
    expect(deleted.statusCode).toBe(204);
    expect(await statusOf(database.container('c').read())).toBe(404);
  });

  it('has no default TTL unless one is set', async () => {
    const container = await target.container();

    const { resource } = await container.read();

    expect(resource?.defaultTtl).toBeUndefined();
  });

  it('lists partition key ranges covering the whole key space', async () => {
    const container = await target.container();

    const { resources: ranges } = await container.readPartitionKeyRanges().fetchAll();

    expect(ranges.length).toBeGreaterThan(0);
    expect(ranges[0]?.minInclusive).toBe('');
    expect(ranges.at(-1)?.maxExclusive).toBe('FF');
  });

  it('deleting a database deletes its containers', async () => {
    const database = await target.database();
    await database.containers.create({ id: 'c', partitionKey: { paths: ['/pk'] } });

    await database.delete();

    expect(await statusOf(database.container('c').read())).toBe(404);
  });
});
