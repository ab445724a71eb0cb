// The Service Bus side of `npm run func:local`: the ServiceBusConnection it wrote to
// local.settings.json, used as the Functions host's Service Bus extension uses it (a connection
// string in the emulator's format), to send an event to a topic and take it from a subscription
// with a processor that completes it. Prints what it observed as one JSON object;
// packages/devkit/test/engines/funcLocal.test.ts asserts on it.
//
// Usage: dotnet run -- --local-settings <local.settings.json> <topic> <subscription> <subject>
using System.Text.Json;
using Azure.Messaging.ServiceBus;

static class LocalSettings
{
    public static async Task Check(string[] args, Func<string, Func<Task<object>>, Task> check)
    {
        var (path, topic, subscription, subject) = (args[1], args[2], args[3], args[4]);
        var connection = JsonDocument.Parse(File.ReadAllText(path)).RootElement
            .GetProperty("Values").GetProperty("ServiceBusConnection").GetString()!;

        await check("connection", () =>
        {
            var properties = ServiceBusConnectionStringProperties.Parse(connection);
            return Task.FromResult<object>(new { Endpoint = properties.Endpoint.ToString(), properties.SharedAccessKeyName });
        });

        await check("sendAndProcess", async () =>
        {
            await using var client = new ServiceBusClient(connection);
            await using var sender = client.CreateSender(topic);
            var messageId = $"local-settings-{Guid.NewGuid():N}";
            await sender.SendMessageAsync(new ServiceBusMessage(BinaryData.FromString("{\"check\":\"local-settings\"}"))
            {
                MessageId = messageId,
                Subject = subject,
                ContentType = "application/json",
            });
            await using var processor = client.CreateProcessor(topic, subscription);
            var received = new TaskCompletionSource<ServiceBusReceivedMessage>();
            processor.ProcessMessageAsync += args =>
            {
                received.TrySetResult(args.Message);
                return Task.CompletedTask;
            };
            processor.ProcessErrorAsync += args =>
            {
                received.TrySetException(args.Exception);
                return Task.CompletedTask;
            };
            await processor.StartProcessingAsync();
            var message = await received.Task.WaitAsync(TimeSpan.FromSeconds(30));
            await processor.StopProcessingAsync();
            await using var receiver = client.CreateReceiver(topic, subscription);
            var left = await receiver.PeekMessagesAsync(10);
            return new
            {
                Sent = messageId,
                Received = new { message.MessageId, message.Subject, Body = message.Body.ToString(), message.DeliveryCount },
                LeftInSubscription = left.Count,
            };
        });
    }
}
