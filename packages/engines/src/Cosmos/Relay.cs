// The Cosmos DB trigger as the extension builds it (CosmosDBTriggerListener.InitializeBuilder and
// ProcessChangesAsync in azure-webjobs-sdk-extensions), with the attribute values of the test's
// fixture relay (packages/local-azure/test/host/changeFeedFixtureApp.ts: leaseContainerPrefix "relay-",
// maxItemsPerInvocation 3, startFromBeginning, feedPollDelay 1000, retry fixedDelay 2 times 2 s).
// The engine is Microsoft.Azure.Cosmos's change feed processor: its pages, its checkpoint when the
// delegate returns, its lease on a restart. The delegate does what the listener does: the host
// runs the function with its retry policy (here a document with "fail": true makes every attempt
// fail), a failure is only reported, and the delegate returns, so the processor checkpoints.
// packages/local-azure/test/engines/cosmos.test.ts runs the same script through our trigger model and compares.
using Microsoft.Azure.Cosmos;
using Newtonsoft.Json.Linq;

static class Relay
{
    const int MaxRetryCount = 2;
    static readonly TimeSpan RetryDelay = TimeSpan.FromSeconds(2);

    public static async Task Check(CosmosClient client, string databaseId, Func<string, Func<Task<object>>, Task> check)
    {
        var database = client.GetDatabase(databaseId);
        var monitored = database.GetContainer("state");
        var leases = database.GetContainer("leases");

        // Until the page with `lastId` has been handled, then one more poll.
        async Task<List<object>> RunUntil(string lastId)
        {
            var invocations = new List<object>();
            var done = new TaskCompletionSource();
            var processor = monitored
                .GetChangeFeedProcessorBuilder<JObject>("relay-", async (ChangeFeedProcessorContext context, IReadOnlyCollection<JObject> docs, CancellationToken _) =>
                {
                    var attempts = 0;
                    bool succeeded;
                    while (true)
                    {
                        attempts++;
                        succeeded = !docs.Any(doc => doc["fail"]?.Value<bool>() == true);
                        if (succeeded || attempts > MaxRetryCount) break;
                        await Task.Delay(RetryDelay);
                    }
                    var ids = docs.Select(doc => $"{doc["id"]}").ToList();
                    lock (invocations) invocations.Add(new { Ids = ids, Attempts = attempts, Outcome = succeeded ? "succeeded" : "failed" });
                    if (ids.Contains(lastId)) done.TrySetResult();
                })
                .WithInstanceName(Guid.NewGuid().ToString())
                .WithLeaseContainer(leases)
                .WithMaxItems(3)
                .WithStartTime(DateTime.MinValue.ToUniversalTime())
                .WithPollInterval(TimeSpan.FromMilliseconds(1000))
                .Build();
            await processor.StartAsync();
            await done.Task.WaitAsync(TimeSpan.FromSeconds(60));
            await Task.Delay(TimeSpan.FromSeconds(1.5));
            await processor.StopAsync();
            return invocations;
        }

        await check("relay", async () =>
        {
            var first = await RunUntil("doc-e");
            // A restart: a new instance takes the lease over and resumes from its checkpoint.
            await monitored.CreateItemAsync(new JObject { ["id"] = "doc-f", ["partitionKey"] = "f" }, new PartitionKey("f"));
            var second = await RunUntil("doc-f");
            return new { First = first, Second = second };
        });
    }
}
