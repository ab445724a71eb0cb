// The extension's processor where time matters, for packages/local-azure/test/engines/serviceBus.test.ts to compare with
// our trigger model: a handler slower than the message lock (the processor renews the lock while
// it runs, up to maxAutoLockRenewalDuration, so the message is completed on its first delivery),
// and concurrency (at most maxConcurrentCalls invocations at once). Options from host.json as the
// extension takes them (Program.cs ProcessorOptions).
//
// Usage: dotnet run -- --timing <connection string> <topic> <subscription> <subject> <host.json> <slow handler ms> <messages>
using Azure.Messaging.ServiceBus;

static class Timing
{
    public static async Task Check(string[] args, Func<string, Func<Task<object>>, Task> check, Func<string, ServiceBusProcessorOptions> processorOptions)
    {
        var (connection, topic, subscription, subject) = (args[1], args[2], args[3], args[4]);
        var options = processorOptions(args[5]);
        var slow = TimeSpan.FromMilliseconds(int.Parse(args[6]));
        var messages = int.Parse(args[7]);
        var run = Guid.NewGuid().ToString("N")[..8];
        await using var client = new ServiceBusClient(connection);
        await using var sender = client.CreateSender(topic);
        ServiceBusMessage Message(string id) => new(BinaryData.FromString("{}")) { MessageId = $"{run}-{id}", Subject = subject };

        await check("slowHandler", async () =>
        {
            await sender.SendMessageAsync(Message("slow"));
            await using var processor = client.CreateProcessor(topic, subscription, options);
            var deliveries = new List<object>();
            var done = new TaskCompletionSource();
            processor.ProcessMessageAsync += async e =>
            {
                var lockedAtStart = e.Message.LockedUntil;
                await Task.Delay(slow);
                lock (deliveries) deliveries.Add(new { e.Message.DeliveryCount, Renewed = e.Message.LockedUntil > lockedAtStart });
                done.TrySetResult();
            };
            processor.ProcessErrorAsync += _ => Task.CompletedTask;
            await processor.StartProcessingAsync();
            await done.Task.WaitAsync(TimeSpan.FromSeconds(60));
            // Twice as long again: a lost lock would bring the message back.
            await Task.Delay(slow * 2);
            await processor.StopProcessingAsync();
            await using var receiver = client.CreateReceiver(topic, subscription);
            return new { Deliveries = deliveries, Left = (await receiver.PeekMessagesAsync(10)).Count };
        });

        await check("concurrency", async () =>
        {
            await sender.SendMessagesAsync(Enumerable.Range(0, messages).Select(i => Message($"concurrent-{i}")));
            await using var processor = client.CreateProcessor(topic, subscription, options);
            int running = 0, maxRunning = 0, handled = 0;
            var done = new TaskCompletionSource();
            processor.ProcessMessageAsync += async _ =>
            {
                lock (done) maxRunning = Math.Max(maxRunning, ++running);
                await Task.Delay(slow);
                lock (done)
                {
                    running--;
                    if (++handled == messages) done.TrySetResult();
                }
            };
            processor.ProcessErrorAsync += _ => Task.CompletedTask;
            await processor.StartProcessingAsync();
            await done.Task.WaitAsync(TimeSpan.FromSeconds(120));
            await processor.StopProcessingAsync();
            return new { options.MaxConcurrentCalls, MaxRunning = maxRunning, Handled = handled };
        });
    }
}
