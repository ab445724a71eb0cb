// Message sessions through the .NET client, on a queue that requires them (the local peer, from
// packages/local-azure/test/engines/serviceBus.test.ts): AcceptSessionAsync and AcceptNextSessionAsync, one receiver per
// session, session state, renewing the session lock, and a send without a SessionId. Prints what it
// observed; the test asserts on it.
//
// Usage: dotnet run -- --sessions <connection string> <queue>
using Azure.Messaging.ServiceBus;

static class Sessions
{
    public static async Task Check(string[] args, Func<string, Func<Task<object>>, Task> check)
    {
        var (connection, queue) = (args[1], args[2]);
        var wait = TimeSpan.FromSeconds(10);
        await using var client = new ServiceBusClient(connection);
        await using var sender = client.CreateSender(queue);
        ServiceBusMessage Message(string body, string sessionId) => new(BinaryData.FromString(body)) { SessionId = sessionId };
        await sender.SendMessagesAsync(new[] { Message("a1", "alice"), Message("b1", "bob"), Message("a2", "alice") });

        await check("acceptSession", async () =>
        {
            await using var alice = await client.AcceptSessionAsync(queue, "alice");
            var bodies = new List<string>();
            while (bodies.Count < 2)
            {
                var received = await alice.ReceiveMessageAsync(wait) ?? throw new TimeoutException($"No message within {wait}.");
                bodies.Add($"{received.SessionId}:{received.Body}");
                await alice.CompleteMessageAsync(received);
            }
            return new { alice.SessionId, Bodies = bodies, LockedInFuture = alice.SessionLockedUntil > DateTimeOffset.UtcNow };
        });

        await check("acceptNextSession", async () =>
        {
            await using var next = await client.AcceptNextSessionAsync(queue);
            var received = await next.ReceiveMessageAsync(wait) ?? throw new TimeoutException($"No message within {wait}.");
            await next.CompleteMessageAsync(received);
            return new { next.SessionId, Body = received.Body.ToString() };
        });

        await check("sessionCannotBeLocked", async () =>
        {
            await using var holder = await client.AcceptSessionAsync(queue, "carol");
            try
            {
                await using var second = await client.AcceptSessionAsync(queue, "carol");
                return new { Reason = "accepted twice" };
            }
            catch (ServiceBusException error)
            {
                return new { Reason = error.Reason.ToString() };
            }
        });

        await check("sessionState", async () =>
        {
            await using var dave = await client.AcceptSessionAsync(queue, "dave");
            var initial = await dave.GetSessionStateAsync();
            await dave.SetSessionStateAsync(BinaryData.FromString("step-2"));
            var set = await dave.GetSessionStateAsync();
            var before = dave.SessionLockedUntil;
            await Task.Delay(50);
            await dave.RenewSessionLockAsync();
            return new { Initial = initial?.ToString(), Set = set?.ToString(), Renewed = dave.SessionLockedUntil > before };
        });

        await check("sendWithoutSessionId", async () =>
        {
            try
            {
                await sender.SendMessageAsync(new ServiceBusMessage(BinaryData.FromString("orphan")));
                return new { Error = (string?)null };
            }
            catch (Exception error)
            {
                return new { Refused = error.GetType().Name, Message = error.Message.Split('\n')[0] };
            }
        });
    }
}
