// Drives Microsoft.Azure.Cosmos, the SDK the Functions host's Cosmos DB extension runs, in gateway
// mode with its other options at their defaults, against a Cosmos DB endpoint (the local server,
// from packages/local-azure/test/engines/cosmos.test.ts), and prints what it observed as one JSON object. The test
// asserts on it; this program judges nothing, so a check that never ran shows as missing.
//
// Usage: dotnet run -- <endpoint> <key>
//        dotnet run -- <endpoint> <key> --resume <database>      (the .NET processor on our model's leases)
//        dotnet run -- <endpoint> <key> --relay <database>       (the extension's trigger: Relay.cs)
//        dotnet run -- --local-settings <local.settings.json>   (LocalSettings.cs)
using System.Net;
using Microsoft.Azure.Cosmos;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

var results = new Dictionary<string, object?>();
if (args[0] == "--local-settings")
{
    await LocalSettings.Check(args[1], Check);
    Console.WriteLine(JsonConvert.SerializeObject(new { results }));
    return;
}
var (endpoint, key) = (args[0], args[1]);

using var client = new CosmosClient(endpoint, key, new CosmosClientOptions { ConnectionMode = ConnectionMode.Gateway });

// Leases the other way: the .NET processor resumes from leases our trigger model wrote in database
// args[3] (packages/local-azure/test/engines/cosmos.test.ts writes them, then one more change): it must deliver that
// change alone.
if (args.Length > 2 && args[2] == "--relay")
{
    await Relay.Check(client, args[3], Check);
    Console.WriteLine(JsonConvert.SerializeObject(new { results }));
    return;
}
if (args.Length > 2 && args[2] == "--resume")
{
    await Check("resumeFromModel", async () =>
    {
        var database = client.GetDatabase(args[3]);
        var leases = database.GetContainer("leases");
        var delivered = await ChangeFeed.RunUntil(database.GetContainer("state"), leases, "relay-", "instance-3", 1);
        return new { Delivered = delivered, Leases = (await ChangeFeed.Leases(leases)).Select(lease => $"{lease["id"]}").ToList() };
    });
    Console.WriteLine(JsonConvert.SerializeObject(new { results }));
    return;
}

// Each check records what it saw, or the error that stopped it; one failing leaves the others running.
async Task Check(string name, Func<Task<object>> check)
{
    try
    {
        results[name] = await check();
    }
    catch (Exception error)
    {
        results[name] = new { Error = $"{error.GetType().Name}: {error.Message.Split('\n')[0]}" };
        if (Environment.GetEnvironmentVariable("ENGINE_TRACE") == "1") Console.Error.WriteLine(error);
    }
}

Database database = null!;
Container container = null!;
await Check("setup", async () =>
{
    database = (await client.CreateDatabaseIfNotExistsAsync("engine")).Database;
    container = (await database.CreateContainerIfNotExistsAsync("state", "/partitionKey")).Container;
    return new { Database = database.Id, Container = container.Id };
});

// Point operations with ETags: create, read, a replace that names the current ETag, and one that
// names the old one (412).
await Check("pointOperations", async () =>
{
    var pk = new PartitionKey("account-1");
    var created = await container.CreateItemAsync(new JObject { ["id"] = "doc-1", ["partitionKey"] = "account-1", ["balance"] = 10 }, pk);
    var read = await container.ReadItemAsync<JObject>("doc-1", pk);
    var replaced = await container.ReplaceItemAsync(
        new JObject { ["id"] = "doc-1", ["partitionKey"] = "account-1", ["balance"] = 20 }, "doc-1", pk,
        new ItemRequestOptions { IfMatchEtag = read.ETag });
    HttpStatusCode stale;
    try
    {
        await container.ReplaceItemAsync(
            new JObject { ["id"] = "doc-1", ["partitionKey"] = "account-1", ["balance"] = 30 }, "doc-1", pk,
            new ItemRequestOptions { IfMatchEtag = read.ETag });
        stale = HttpStatusCode.OK;
    }
    catch (CosmosException error)
    {
        stale = error.StatusCode;
    }
    return new
    {
        Created = (int)created.StatusCode,
        ReadBalance = (int)read.Resource["balance"]!,
        Replaced = (int)replaced.StatusCode,
        ReplacedBalance = (int)replaced.Resource["balance"]!,
        StaleReplace = (int)stale,
    };
});

// A parameterized query, in one partition and across partitions: the SDK asks the gateway for a
// query plan first (there is no local query engine for it on Linux).
await Check("query", async () =>
{
    await container.UpsertItemAsync(new JObject { ["id"] = "doc-2", ["partitionKey"] = "account-2", ["balance"] = 5 }, new PartitionKey("account-2"));
    var definition = new QueryDefinition("SELECT c.id, c.balance FROM c WHERE c.balance >= @min ORDER BY c.id").WithParameter("@min", 1);
    async Task<List<string>> Run(QueryRequestOptions? options)
    {
        var ids = new List<string>();
        using var iterator = container.GetItemQueryIterator<JObject>(definition, requestOptions: options);
        while (iterator.HasMoreResults)
            foreach (var item in await iterator.ReadNextAsync()) ids.Add($"{item["id"]}:{item["balance"]}");
        return ids;
    }
    return new
    {
        AcrossPartitions = await Run(null),
        OnePartition = await Run(new QueryRequestOptions { PartitionKey = new PartitionKey("account-1") }),
    };
});

// GROUP BY across partitions: the query plan carries the rewritten query, which the SDK sends to the
// partition key range; it merges the groups itself.
await Check("groupBy", async () =>
{
    var groups = new List<string>();
    using var iterator = container.GetItemQueryIterator<JObject>(
        "SELECT c.partitionKey, COUNT(1) AS n, SUM(c.balance) AS total FROM c GROUP BY c.partitionKey");
    while (iterator.HasMoreResults)
        foreach (var group in await iterator.ReadNextAsync()) groups.Add($"{group["partitionKey"]}:{group["n"]}:{group["total"]}");
    groups.Sort(StringComparer.Ordinal);
    return new { Groups = groups };
});

// The change feed as the SDK reads it: from the beginning, latest version, until it says 304
// (nothing new); then one more change, read from the continuation.
await Check("changeFeed", async () =>
{
    var seen = new List<string>();
    string? continuation = null;
    var iterator = container.GetChangeFeedIterator<JObject>(ChangeFeedStartFrom.Beginning(), ChangeFeedMode.LatestVersion);
    while (iterator.HasMoreResults)
    {
        var page = await iterator.ReadNextAsync();
        continuation = page.ContinuationToken;
        if (page.StatusCode == HttpStatusCode.NotModified) break;
        foreach (var item in page) seen.Add($"{item["id"]}:{item["balance"]}");
    }
    await container.UpsertItemAsync(new JObject { ["id"] = "doc-3", ["partitionKey"] = "account-3", ["balance"] = 1 }, new PartitionKey("account-3"));
    var later = new List<string>();
    var resumed = container.GetChangeFeedIterator<JObject>(ChangeFeedStartFrom.ContinuationToken(continuation), ChangeFeedMode.LatestVersion);
    while (resumed.HasMoreResults)
    {
        var page = await resumed.ReadNextAsync();
        if (page.StatusCode == HttpStatusCode.NotModified) break;
        foreach (var item in page) later.Add($"{item["id"]}:{item["balance"]}");
    }
    return new { FromBeginning = seen, AfterContinuation = later };
});

// The change feed processor, as the Cosmos DB trigger runs it (the extension's defaults: no lease
// prefix, a 5 s poll delay, start from now unless told otherwise; here from the beginning): it
// acquires a lease in the lease container, delivers each change once, checkpoints, and a second
// instance resumes from the lease, delivering only what came after.
await Check("processor", async () =>
{
    var leases = (await database.CreateContainerIfNotExistsAsync("leases", "/id")).Container;
    // The extension names the processor by the trigger's leaseContainerPrefix: this is the prefix of
    // the test's fixture relay (packages/local-azure/test/host/changeFeedFixtureApp.ts), whose trigger model then
    // resumes from these leases.
    const string processorName = "relay-";
    var first = await ChangeFeed.RunUntil(container, leases, processorName, "instance-1", 3);
    await container.UpsertItemAsync(new JObject { ["id"] = "doc-4", ["partitionKey"] = "account-4", ["balance"] = 4 }, new PartitionKey("account-4"));
    var second = await ChangeFeed.RunUntil(container, leases, processorName, "instance-2", 1);
    var leaseIds = (await ChangeFeed.Leases(leases)).Select(lease => $"{lease["id"]}").ToList();
    return new { First = first, Second = second, Leases = leaseIds };
});

// A query the server does not support is refused at its query plan, with the reason.
await Check("unsupportedQuery", async () =>
{
    try
    {
        using var iterator = container.GetItemQueryIterator<JObject>("SELECT t, COUNT(1) AS n FROM c JOIN t IN c.tags GROUP BY t");
        await iterator.ReadNextAsync();
        return new { Refused = (int?)null, Message = (string?)null };
    }
    catch (CosmosException error)
    {
        return new { Refused = (int?)error.StatusCode, Message = (string?)error.ResponseBody };
    }
});

// A transactional batch, in a container of its own (the checks above read every change of
// "state"): the SDK sends its operations as HybridRow rows and reads HybridRow results. All of it
// commits, or none of it does: the failing operation reports its status, the others 424.
await Check("batch", async () =>
{
    var batches = (await database.CreateContainerIfNotExistsAsync("batch", "/partitionKey")).Container;
    var pk = new PartitionKey("order-1");
    JObject Doc(string id, int n) => new JObject { ["id"] = id, ["partitionKey"] = "order-1", ["n"] = n };
    async Task<List<string>> ReadBack(params string[] ids)
    {
        var seen = new List<string>();
        foreach (var id in ids)
        {
            try
            {
                var read = await batches.ReadItemAsync<JObject>(id, pk);
                seen.Add($"{id}:{read.Resource["n"]}");
            }
            catch (CosmosException error)
            {
                seen.Add($"{id}:{(int)error.StatusCode}");
            }
        }
        return seen;
    }
    List<int> Statuses(TransactionalBatchResponse response) =>
        Enumerable.Range(0, response.Count).Select(i => (int)response[i].StatusCode).ToList();

    var original = await batches.CreateItemAsync(Doc("item-3", 0), pk);

    // (a) Two creates, a replace that names the current ETag, an upsert of the same item and a read
    // of a created one: all succeed, each result with its ETag and resource body.
    TransactionalBatchResponse succeeded = await batches.CreateTransactionalBatch(pk)
        .CreateItem(Doc("item-1", 1))
        .CreateItem(Doc("item-2", 2))
        .ReplaceItem("item-3", Doc("item-3", 3), new TransactionalBatchItemRequestOptions { IfMatchEtag = original.ETag })
        .UpsertItem(Doc("item-3", 4))
        .ReadItem("item-1")
        .ExecuteAsync();
    var item3 = await batches.ReadItemAsync<JObject>("item-3", pk);
    var succeededResult = new
    {
        Status = (int)succeeded.StatusCode,
        Operations = Statuses(succeeded),
        Bodies = Enumerable.Range(0, succeeded.Count)
            .Select(i => succeeded.GetOperationResultAtIndex<JObject>(i).Resource)
            .Select(body => $"{body?["id"]}:{body?["n"]}").ToList(),
        // The upsert's ETag is the one the item now has; the replace's was a step before it.
        UpsertETagIsCurrent = succeeded[3].ETag == item3.ETag,
        ReplaceETagIsNew = succeeded[2].ETag != original.ETag && succeeded[2].ETag != succeeded[3].ETag,
        Charged = succeeded.RequestCharge > 0,
        ReadBack = await ReadBack("item-1", "item-2", "item-3"),
    };

    // (b) The second operation creates an item that exists (409): nothing of the batch is written.
    TransactionalBatchResponse conflict = await batches.CreateTransactionalBatch(pk)
        .CreateItem(Doc("item-5", 5))
        .CreateItem(Doc("item-1", 9))
        .UpsertItem(Doc("item-2", 9))
        .ExecuteAsync();
    var conflictResult = new
    {
        Status = (int)conflict.StatusCode,
        IsSuccess = conflict.IsSuccessStatusCode,
        Operations = Statuses(conflict),
        ReadBack = await ReadBack("item-5", "item-1", "item-2"),
    };

    // (c) A replace that names the ETag item-3 had before (a): 412, and the create before it is
    // not written either.
    TransactionalBatchResponse stale = await batches.CreateTransactionalBatch(pk)
        .CreateItem(Doc("item-6", 6))
        .ReplaceItem("item-3", Doc("item-3", 7), new TransactionalBatchItemRequestOptions { IfMatchEtag = original.ETag })
        .ExecuteAsync();
    var staleResult = new
    {
        Status = (int)stale.StatusCode,
        Operations = Statuses(stale),
        ReadBack = await ReadBack("item-6", "item-3"),
    };
    return new { Succeeded = succeededResult, Conflict = conflictResult, Stale = staleResult };
});

Console.WriteLine(JsonConvert.SerializeObject(new { results }));
