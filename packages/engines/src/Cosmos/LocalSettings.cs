// The Cosmos DB side of `npm run func:local`: the values it wrote to local.settings.json, read as the
// Functions host's Cosmos DB extension reads them (the CosmosDBConnection connection string, the
// connection mode of AzureFunctionsJobHost__extensions__cosmosDB__connectionMode, gateway when
// unset as in the extension's CosmosDBUtility.BuildClientOptions), and the containers the outbox
// relay's trigger names (COSMOS_DATABASE, COSMOS_CONTAINER, COSMOS_LEASE_CONTAINER), which the
// trigger does not create. Prints what it observed as one JSON object; packages/devkit/test/engines/funcLocal.test.ts
// asserts on it.
using System.Text.Json;
using Microsoft.Azure.Cosmos;
using Newtonsoft.Json.Linq;

static class LocalSettings
{
    public static async Task Check(string path, Func<string, Func<Task<object>>, Task> check)
    {
        var values = JsonDocument.Parse(File.ReadAllText(path)).RootElement.GetProperty("Values");
        string? Value(string name) => values.TryGetProperty(name, out var value) ? value.GetString() : null;
        var mode = Value("AzureFunctionsJobHost__extensions__cosmosDB__connectionMode");
        var options = new CosmosClientOptions
        {
            ConnectionMode = mode is null ? ConnectionMode.Gateway : Enum.Parse<ConnectionMode>(mode, ignoreCase: true),
        };
        using var client = new CosmosClient(Value("CosmosDBConnection"), options);
        var database = client.GetDatabase(Value("COSMOS_DATABASE"));
        var container = database.GetContainer(Value("COSMOS_CONTAINER"));
        var leases = database.GetContainer(Value("COSMOS_LEASE_CONTAINER"));

        await check("containers", async () =>
        {
            var app = (await container.ReadContainerAsync()).Resource;
            var lease = (await leases.ReadContainerAsync()).Resource;
            return new
            {
                ConnectionMode = options.ConnectionMode.ToString(),
                Container = new { app.Id, app.PartitionKeyPath, app.DefaultTimeToLive },
                Leases = new { lease.Id, lease.PartitionKeyPath },
            };
        });

        // The outbox relay's trigger in miniature: a change feed processor on the app's container with
        // its leases in the lease container, delivering a document written after it started.
        await check("processor", async () =>
        {
            var delivered = new List<string>();
            var seen = new TaskCompletionSource();
            var processor = container
                .GetChangeFeedProcessorBuilder<JObject>("local-settings-", (IReadOnlyCollection<JObject> changes, CancellationToken _) =>
                {
                    lock (delivered) delivered.AddRange(changes.Select(item => $"{item["id"]}"));
                    seen.TrySetResult();
                    return Task.CompletedTask;
                })
                .WithInstanceName("func-local")
                .WithLeaseContainer(leases)
                .WithPollInterval(TimeSpan.FromSeconds(1))
                // As the relay's trigger (startFromBeginning): a change made before the first read counts.
                .WithStartTime(DateTime.MinValue.ToUniversalTime())
                .Build();
            await processor.StartAsync();
            var written = await container.CreateItemAsync(
                new JObject { ["id"] = "local-settings-1", ["partitionKey"] = "local-settings" }, new PartitionKey("local-settings"));
            await seen.Task.WaitAsync(TimeSpan.FromSeconds(60));
            await processor.StopAsync();
            return new { Written = (int)written.StatusCode, Delivered = delivered };
        });
    }
}
