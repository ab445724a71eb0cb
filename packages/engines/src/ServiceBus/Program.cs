// Drives Azure.Messaging.ServiceBus, the client the Functions host's Service Bus extension runs,
// with its default options against a Service Bus endpoint (the local peer, from
// packages/local-azure/test/engines/serviceBus.test.ts), and prints what it observed as one JSON object. The test
// asserts on it; this program judges nothing, so a check that never ran shows as missing.
//
// Usage: dotnet run -- <connection string> <topic> <subscription> <subject> <max delivery count> <host.json>
//        dotnet run -- --timing <connection string> <topic> <subscription> <subject> <host.json> <slow ms> <messages>   (Timing.cs)
//        dotnet run -- --local-settings <local.settings.json> <topic> <subscription> <subject>   (LocalSettings.cs)
//        dotnet run -- --sessions <connection string> <queue that requires sessions>   (Sessions.cs)
using System.Net;
using System.Security.Cryptography;
using System.Text;
using System.Text.Json;
using Azure.Messaging.ServiceBus;

var results = new Dictionary<string, object?>();
if (args[0] == "--timing")
{
    await Timing.Check(args, Check, ProcessorOptions);
    Console.WriteLine(JsonSerializer.Serialize(new { results }));
    return;
}
if (args[0] == "--sessions")
{
    await Sessions.Check(args, Check);
    Console.WriteLine(JsonSerializer.Serialize(new { results }));
    return;
}
if (args[0] == "--local-settings")
{
    await LocalSettings.Check(args, Check);
    Console.WriteLine(JsonSerializer.Serialize(new { results }));
    return;
}
var (connection, topic, subscription, subject) = (args[0], args[1], args[2], args[3]);
var maxDeliveryCount = int.Parse(args[4]);
var hostJsonPath = args[5];
var wait = TimeSpan.FromSeconds(30);
var run = Guid.NewGuid().ToString("N")[..8];

await using var client = new ServiceBusClient(connection);
await using var sender = client.CreateSender(topic);
await using var receiver = client.CreateReceiver(topic, subscription);

ServiceBusMessage Message(string check) =>
    new(BinaryData.FromString($"{{\"check\":\"{check}\"}}"))
    {
        MessageId = $"{run}-{check}",
        Subject = subject,
        ContentType = "application/json",
    };

async Task<ServiceBusReceivedMessage> Next(ServiceBusReceiver from) =>
    await from.ReceiveMessageAsync(wait) ?? throw new TimeoutException($"No message within {wait}.");

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

object Seen(ServiceBusReceivedMessage m) => new
{
    m.MessageId,
    m.Subject,
    m.ContentType,
    m.CorrelationId,
    Body = m.Body.ToString(),
    m.DeliveryCount,
    m.DeadLetterReason,
    m.DeadLetterErrorDescription,
    Properties = m.ApplicationProperties.ToDictionary(
        p => p.Key,
        p => new
        {
            Type = p.Value?.GetType().Name,
            Value = p.Value is DateTimeOffset or DateTime ? $"{p.Value:o}" : Convert.ToString(p.Value, System.Globalization.CultureInfo.InvariantCulture),
        }),
};

// A message @azure/service-bus sent before this program started (the test sends it): received
// intact, with its properties as the JavaScript client typed them.
await Check("fromJavaScript", async () =>
{
    var received = await Next(receiver);
    await receiver.CompleteMessageAsync(received);
    return Seen(received);
});

// Sent and received intact, with application properties of one type each: `roundtrip` those AMQP
// has types for, `roundtripDescribed` those the client writes as Service Bus's described types.
async Task<object> RoundTrip(string check, Dictionary<string, object> properties)
{
    var message = Message(check);
    message.CorrelationId = "correlation-1";
    foreach (var (key, value) in properties) message.ApplicationProperties[key] = value;
    await sender.SendMessageAsync(message);
    var received = await Next(receiver);
    await receiver.CompleteMessageAsync(received);
    return Seen(received);
}
await Check("roundtrip", () => RoundTrip("roundtrip", new()
{
    ["text"] = "héllo",
    ["int"] = 42,
    ["long"] = 1L << 40,
    ["double"] = 2.5,
    ["bool"] = true,
    ["when"] = new DateTime(2026, 12, 2, 15, 0, 0, DateTimeKind.Utc),
}));
await Check("roundtripDescribed", () => RoundTrip("roundtripDescribed", new()
{
    ["offset"] = new DateTimeOffset(2026, 12, 2, 15, 0, 0, TimeSpan.Zero),
    ["span"] = TimeSpan.FromMinutes(90),
    ["guid"] = Guid.Parse("8f2c1c1e-6a8b-4d8e-9a55-2f4b3c1d0e7a"),
    ["uri"] = new Uri("https://example.com/a"),
    ["bytes"] = new byte[] { 1, 2, 3 },
}));

// Peeked: seen without a lock or a delivery counted; then received, renewed, abandoned with a
// property to modify, and received again.
await Check("abandon", async () =>
{
    await sender.SendMessageAsync(Message("abandon"));
    var peeked = await receiver.PeekMessageAsync();
    var first = await Next(receiver);
    var lockedUntil = first.LockedUntil;
    await Task.Delay(1000);
    await receiver.RenewMessageLockAsync(first);
    var renewedUntil = first.LockedUntil;
    await receiver.AbandonMessageAsync(first, new Dictionary<string, object> { ["abandonedBy"] = "engine" });
    var second = await Next(receiver);
    await receiver.CompleteMessageAsync(second);
    return new
    {
        Peeked = peeked is null ? null : new { peeked.MessageId, peeked.DeliveryCount },
        First = Seen(first),
        RenewMovedLockMs = (renewedUntil - lockedUntil).TotalMilliseconds,
        Second = Seen(second),
    };
});

// Dead-lettered with a reason and a description, and read from the dead-letter queue.
await Check("deadletter", async () =>
{
    await sender.SendMessageAsync(Message("deadletter"));
    var received = await Next(receiver);
    await receiver.DeadLetterMessageAsync(received, "engine-reason", "engine description");
    await using var deadLetters = client.CreateReceiver(topic, subscription, new ServiceBusReceiverOptions { SubQueue = SubQueue.DeadLetter });
    var dead = await Next(deadLetters);
    await deadLetters.CompleteMessageAsync(dead);
    return Seen(dead);
});

// The processor as the Functions extension runs it: ServiceBusOptions.ToProcessorOptions() takes
// autoCompleteMessages, prefetchCount, maxAutoLockRenewalDuration and maxConcurrentCalls from
// host.json (the extension's defaults where it says nothing), and the function's failure is
// rethrown into the handler (MessageProcessor.CompleteProcessingMessageAsync), so the processor
// itself completes a message after success and abandons it after a throw.
await Check("processor", async () =>
{
    var options = ProcessorOptions(hostJsonPath);
    await using var processor = client.CreateProcessor(topic, subscription, options);
    var deliveries = new List<object>();
    var errors = new List<object>();
    var done = new TaskCompletionSource();
    var failing = $"{run}-processor-fails";
    processor.ProcessMessageAsync += args =>
    {
        var m = args.Message;
        lock (deliveries) deliveries.Add(new { m.MessageId, m.DeliveryCount });
        if (m.MessageId != failing) return Task.CompletedTask;
        if (m.DeliveryCount == maxDeliveryCount) done.TrySetResult();
        throw new InvalidOperationException("The function failed.");
    };
    processor.ProcessErrorAsync += args =>
    {
        lock (errors) errors.Add(new { Source = args.ErrorSource.ToString(), Error = args.Exception.Message });
        return Task.CompletedTask;
    };
    await sender.SendMessageAsync(Message("processor-succeeds"));
    await sender.SendMessageAsync(Message("processor-fails"));
    await processor.StartProcessingAsync();
    await done.Task.WaitAsync(TimeSpan.FromSeconds(60));
    await using var deadLetters = client.CreateReceiver(topic, subscription, new ServiceBusReceiverOptions { SubQueue = SubQueue.DeadLetter });
    var dead = await Next(deadLetters);
    await deadLetters.CompleteMessageAsync(dead);
    await processor.StopProcessingAsync();
    return new
    {
        Options = new { options.AutoCompleteMessages, options.MaxConcurrentCalls, options.PrefetchCount, options.MaxAutoLockRenewalDuration },
        Deliveries = deliveries,
        Errors = errors,
        DeadLettered = Seen(dead),
    };
});

// Received in receiveAndDelete: handed out once, settled by the peer, and gone (a fresh peek finds nothing).
await Check("receiveAndDelete", async () =>
{
    await sender.SendMessageAsync(Message("receive-and-delete"));
    await using var taker = client.CreateReceiver(topic, subscription, new ServiceBusReceiverOptions { ReceiveMode = ServiceBusReceiveMode.ReceiveAndDelete });
    var taken = await Next(taker);
    await using var looker = client.CreateReceiver(topic, subscription);
    var left = await looker.PeekMessageAsync();
    return new { Taken = Seen(taken), Left = left?.MessageId };
});

// Deferred: set aside with a property to modify, not received again by a plain receive, received
// by its sequence number, abandoned (it stays deferred), received again and completed.
await Check("defer", async () =>
{
    await sender.SendMessageAsync(Message("deferred"));
    var first = await Next(receiver);
    await receiver.DeferMessageAsync(first, new Dictionary<string, object> { ["deferredBy"] = "engine" });
    var plain = await receiver.ReceiveMessageAsync(TimeSpan.FromSeconds(1));
    var again = await receiver.ReceiveDeferredMessageAsync(first.SequenceNumber);
    await receiver.AbandonMessageAsync(again);
    var third = await receiver.ReceiveDeferredMessageAsync(first.SequenceNumber);
    await receiver.CompleteMessageAsync(third);
    string? afterComplete = null;
    try { await receiver.ReceiveDeferredMessageAsync(first.SequenceNumber); }
    catch (ServiceBusException error) { afterComplete = error.Reason.ToString(); }
    return new
    {
        PlainReceive = plain?.MessageId,
        Again = Seen(again),
        AgainLocked = again.LockedUntil > DateTimeOffset.UtcNow,
        ThirdDeliveryCount = third.DeliveryCount,
        AfterComplete = afterComplete,
    };
});

// Scheduled: one message held until its time and then received with it; one cancelled by the
// sequence number scheduling returned, which never arrives; cancelling it again is refused.
await Check("schedule", async () =>
{
    var at = DateTimeOffset.UtcNow.AddSeconds(1);
    var kept = await sender.ScheduleMessageAsync(Message("scheduled"), at);
    var cancelled = await sender.ScheduleMessageAsync(Message("cancelled"), at);
    await sender.CancelScheduledMessageAsync(cancelled);
    string? cancelAgain = null;
    try { await sender.CancelScheduledMessageAsync(cancelled); }
    catch (ServiceBusException error) { cancelAgain = error.Reason.ToString(); }
    await using var looker = client.CreateReceiver(topic, subscription);
    var before = await looker.PeekMessageAsync();
    var received = await Next(receiver);
    await receiver.CompleteMessageAsync(received);
    var after = await receiver.ReceiveMessageAsync(TimeSpan.FromSeconds(2));
    return new
    {
        SequenceNumbers = new[] { kept, cancelled },
        CancelAgain = cancelAgain,
        PeekedBefore = before?.MessageId,
        Received = Seen(received),
        ScheduledFor = received.ScheduledEnqueueTime.ToUnixTimeMilliseconds(),
        Asked = at.ToUnixTimeMilliseconds(),
        EnqueuedOnTime = received.EnqueuedTime >= at.AddMilliseconds(-1),
        After = after?.MessageId,
    };
});

// Shared access signatures: the peer checks them as Service Bus does. A send with the wrong key,
// with a token this program signs itself (valid for an hour, then one that expired a minute ago):
// each outcome is recorded, a refusal as the exception the client throws.
var settings = ServiceBusConnectionStringProperties.Parse(connection);
async Task<object> SendWith(string connectionString, string check)
{
    try
    {
        await using var other = new ServiceBusClient(connectionString, new ServiceBusClientOptions
        {
            RetryOptions = new ServiceBusRetryOptions { MaxRetries = 0 },
        });
        await using var otherSender = other.CreateSender(topic);
        await otherSender.SendMessageAsync(Message(check));
        return new { Sent = true };
    }
    catch (Exception error)
    {
        return new { Sent = false, Refused = error.GetType().Name, Reason = (error as ServiceBusException)?.Reason.ToString(), error.Message };
    }
}
async Task<string> ReceiveAndComplete()
{
    var received = await Next(receiver);
    await receiver.CompleteMessageAsync(received);
    return received.MessageId;
}
string Signed(DateTimeOffset expiry)
{
    var resource = WebUtility.UrlEncode($"sb://{settings.FullyQualifiedNamespace}/{topic}");
    var se = expiry.ToUnixTimeSeconds();
    using var hmac = new HMACSHA256(Encoding.UTF8.GetBytes(settings.SharedAccessKey));
    var sig = Convert.ToBase64String(hmac.ComputeHash(Encoding.UTF8.GetBytes($"{resource}\n{se}")));
    var token = $"SharedAccessSignature sr={resource}&sig={WebUtility.UrlEncode(sig)}&se={se}&skn={settings.SharedAccessKeyName}";
    return $"Endpoint={settings.Endpoint};SharedAccessSignature={token};UseDevelopmentEmulator=true;";
}
await Check("sas", async () => new
{
    WrongKey = await SendWith(connection.Replace($"SharedAccessKey={settings.SharedAccessKey}", "SharedAccessKey=not-the-key"), "sas-wrong-key"),
    Signed = await SendWith(Signed(DateTimeOffset.UtcNow.AddHours(1)), "sas-signed"),
    SignedReceived = await ReceiveAndComplete(),
    Expired = await SendWith(Signed(DateTimeOffset.UtcNow.AddMinutes(-1)), "sas-expired"),
});

// Released: a receive that times out leaves its credit with the peer, so a message sent then arrives
// on the idle link with nobody waiting, and the client releases it. Peeked, and received by another
// receiver: given back, its delivery not counted.
await Check("released", async () =>
{
    await using var idle = client.CreateReceiver(topic, subscription);
    var timedOut = await idle.ReceiveMessageAsync(TimeSpan.FromSeconds(1));
    await sender.SendMessageAsync(Message("released"));
    await Task.Delay(TimeSpan.FromSeconds(1));
    var peeked = await receiver.PeekMessageAsync();
    var received = await Next(receiver);
    await receiver.CompleteMessageAsync(received);
    return new
    {
        TimedOut = timedOut is null,
        Peeked = peeked is null ? null : new { peeked.MessageId, peeked.DeliveryCount },
        Received = Seen(received),
    };
});

// Left for @azure/service-bus to receive once this program has ended (the test does).
await Check("forJavaScript", async () =>
{
    var message = Message("forJavaScript");
    message.CorrelationId = "correlation-2";
    message.ApplicationProperties["text"] = "from .NET";
    message.ApplicationProperties["int"] = 7;
    message.ApplicationProperties["long"] = 1L << 40;
    message.ApplicationProperties["double"] = 0.5;
    message.ApplicationProperties["bool"] = false;
    message.ApplicationProperties["when"] = new DateTime(2026, 12, 2, 16, 0, 0, DateTimeKind.Utc);
    await sender.SendMessageAsync(message);
    return new { message.MessageId };
});

Console.WriteLine(JsonSerializer.Serialize(new { run, results }));

// The processor's options as the extension derives them (ServiceBusOptions.ToProcessorOptions):
// autoCompleteMessages, prefetchCount, maxAutoLockRenewalDuration and maxConcurrentCalls from
// host.json, the extension's defaults where it says nothing.
static ServiceBusProcessorOptions ProcessorOptions(string hostJsonPath)
{
    var serviceBus = JsonDocument.Parse(File.ReadAllText(hostJsonPath)).RootElement
        .GetProperty("extensions").GetProperty("serviceBus");
    return new ServiceBusProcessorOptions
    {
        AutoCompleteMessages = serviceBus.TryGetProperty("autoCompleteMessages", out var auto) ? auto.GetBoolean() : true,
        MaxConcurrentCalls = serviceBus.TryGetProperty("maxConcurrentCalls", out var calls) ? calls.GetInt32() : 16 * Environment.ProcessorCount,
        PrefetchCount = serviceBus.TryGetProperty("prefetchCount", out var prefetch) ? prefetch.GetInt32() : 0,
        MaxAutoLockRenewalDuration = serviceBus.TryGetProperty("maxAutoLockRenewalDuration", out var renewal)
            ? TimeSpan.Parse(renewal.GetString()!, System.Globalization.CultureInfo.InvariantCulture)
            : TimeSpan.FromMinutes(5),
    };
}
