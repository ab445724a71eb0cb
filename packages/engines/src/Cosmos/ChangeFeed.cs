// The change feed processor as the Cosmos DB trigger runs it (the extension names the processor by
// the trigger's leaseContainerPrefix and polls every 5 s unless feedPollDelay says otherwise), until
// it has delivered `expected` changes, then one more poll so that anything delivered twice shows.
using Microsoft.Azure.Cosmos;
using Newtonsoft.Json.Linq;

static class ChangeFeed
{
    /// <summary>Runs one processor instance from its lease (from the beginning when there is none) and returns what it delivered.</summary>
    public static async Task<List<string>> RunUntil(Container monitored, Container leases, string processorName, string instance, int expected)
    {
        var delivered = new List<string>();
        var enough = new TaskCompletionSource();
        var processor = monitored
            .GetChangeFeedProcessorBuilder<JObject>(processorName, (IReadOnlyCollection<JObject> changes, CancellationToken _) =>
            {
                lock (delivered)
                {
                    delivered.AddRange(changes.Select(item => $"{item["id"]}:{item["balance"]}"));
                    if (delivered.Count >= expected) enough.TrySetResult();
                }
                return Task.CompletedTask;
            })
            .WithInstanceName(instance)
            .WithLeaseContainer(leases)
            .WithPollInterval(TimeSpan.FromSeconds(5))
            .WithStartTime(DateTime.MinValue.ToUniversalTime())
            .Build();
        await processor.StartAsync();
        await enough.Task.WaitAsync(TimeSpan.FromSeconds(60));
        await Task.Delay(TimeSpan.FromSeconds(6));
        await processor.StopAsync();
        return delivered;
    }

    /// <summary>Every document in the lease container.</summary>
    public static async Task<List<JObject>> Leases(Container leases)
    {
        var all = new List<JObject>();
        using var iterator = leases.GetItemQueryIterator<JObject>("SELECT * FROM c");
        while (iterator.HasMoreResults) all.AddRange(await iterator.ReadNextAsync());
        return all;
    }
}
