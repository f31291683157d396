import AsyncHTTPClient
import GroupDefaults
import GroupDefaultsWire
import NIOCore

/// Wake-up latency: a waiter parked on `waiter` (a long-poll, or an open event stream), then one
/// push through `pusher` (the same instance, or another on the same PostgreSQL); each sample runs
/// from just before the push is sent to the moment the waiter has the change.
///
/// Before each push the benchmark pauses `settle` so that the waiter is parked in the server: a
/// push that overtook it would be read without any wake-up at all. The push's own answer is timed
/// too: a waiter is woken once the push has committed (flushed, on the embedded store), so the
/// commit is part of every wake-up.
struct WakeUpLatency {
    let waiter: SyncAPI
    let pusher: SyncAPI
    let suite: String
    let samples: Int
    var settle: Duration = .milliseconds(10)

    struct Result {
        /// Push sent → the waiter has the change.
        var woken: Latencies
        /// Push sent → the push answered.
        var pushAnswered: Latencies
    }

    /// `GET …/changes?since=HEAD&wait=30` outstanding, then a push: push sent → long-poll answered.
    func longPoll() async throws -> Result {
        var head = try await pusher.changes(suite, since: 0).lastRev
        var latencies: [Int64] = []
        var pushes: [Int64] = []
        for index in 0..<samples {
            let since = head
            let waiter = self.waiter
            let suite = self.suite
            let poll = Task {
                let page = try await waiter.changes(suite, since: since, wait: 30)
                return (page, Clock.nanoseconds())
            }
            try await Task.sleep(for: settle)
            let sent = Clock.nanoseconds()
            head = try await pusher.push(suite, onePush(index)).headRev
            pushes.append(Clock.nanoseconds() - sent)
            let (page, answered) = try await poll.value
            guard page.lastRev > since else { throw BenchError("a long-poll ended without the push (since \(since))") }
            latencies.append(answered - sent)
        }
        return Result(woken: Latencies(latencies), pushAnswered: Latencies(pushes))
    }

    /// `GET …/events` open, then a push: push sent → its event (`id:` = the push's revision) parsed.
    func eventStream() async throws -> Result {
        var head = try await pusher.changes(suite, since: 0).lastRev
        let body = try await waiter.events(suite)
        let (arrivals, continuation) = AsyncThrowingStream<Arrival, any Error>.makeStream()
        let reader = Task {
            do {
                var parser = ServerSentEventParser()
                var started = false
                for try await chunk in body {
                    let events = parser.feed(chunk.readableBytesView)
                    let parsed = Clock.nanoseconds()
                    if !started && parser.retry != nil {  // the stream's first line: it is open
                        started = true
                        continuation.yield(Arrival(revision: nil, at: parsed))
                    }
                    for event in events where event.event == nil {
                        continuation.yield(Arrival(revision: event.id.flatMap { UInt64($0) }, at: parsed))
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        defer { reader.cancel() }

        var iterator = arrivals.makeAsyncIterator()
        guard try await iterator.next() != nil else { throw BenchError("the event stream ended at once") }
        var latencies: [Int64] = []
        var pushes: [Int64] = []
        for index in 0..<samples {
            try await Task.sleep(for: settle)
            let expected = head + 1
            let sent = Clock.nanoseconds()
            head = try await pusher.push(suite, onePush(index)).headRev
            pushes.append(Clock.nanoseconds() - sent)
            guard head == expected else { throw BenchError("another writer pushed to \(suite)") }
            while true {
                guard let arrival = try await iterator.next() else { throw BenchError("the event stream ended") }
                if let revision = arrival.revision, revision >= expected {
                    latencies.append(arrival.at - sent)
                    break
                }
            }
        }
        return Result(woken: Latencies(latencies), pushAnswered: Latencies(pushes))
    }

    private struct Arrival: Sendable {
        var revision: UInt64?
        var at: Int64
    }

    private func onePush(_ index: Int) -> PushRequest {
        PushRequest(
            deviceID: 7,
            batchID: "wake-\(index)-\(Clock.nanoseconds())",
            ops: [
                PushOp(
                    key: "k\(index % 100)",
                    value: .integer(index),
                    hlc: HLC(milliseconds: HLC.wallClockMilliseconds(), counter: UInt16(truncatingIfNeeded: index))
                )
            ]
        )
    }
}
